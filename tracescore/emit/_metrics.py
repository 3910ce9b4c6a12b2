"""OTel metrics from the consumer: score distributions per service, route and metric, and the counts an
operator alerts on (dead letters, skipped spans, judge errors, judge tokens, the LLM judge's spent budget).

Instruments come from the Meter passed in, so the process's MeterProvider (OTLP, Prometheus, ...) decides
where they go; with no provider configured they are no-ops.
"""

from __future__ import annotations

from opentelemetry import metrics
from opentelemetry.metrics import Meter

from tracescore import __version__
from tracescore.emit._records import EvaluationRecord

__all__ = ["SCORE_BUCKETS", "EvaluationMetrics"]

# Scores live in 0..1; the SDK's default buckets (0, 5, 10, ... 10000) would put every score in one bucket.
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


class EvaluationMetrics:
    def __init__(self, meter: Meter | None = None) -> None:
        meter = meter or metrics.get_meter("tracescore.consumer", __version__)
        self._scores = meter.create_histogram(
            "tracescore.evaluation.score",
            unit="1",
            description="Metric scores of evaluated RAG spans (0..1).",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self._evaluations = meter.create_counter(
            "tracescore.evaluations", description="Evaluation results, by metric and status (ok, error, ...)."
        )
        self._tokens = meter.create_counter(
            "tracescore.judge.tokens", unit="{token}", description="Judge tokens spent, by type."
        )
        self._skipped = meter.create_counter(
            "tracescore.spans.skipped",
            description="Traces or interactions not scored, by reason, service and instrumentation scope.",
        )
        self._escalations = meter.create_counter(
            "tracescore.llm_judge.escalations",
            description="Interactions the cascade's offline judge scored, by what followed: cascade or "
            "baseline (sent to the LLM judge), budget (its token budget was spent) or offline_only.",
        )
        self._dead_letters = meter.create_counter(
            "tracescore.messages.dead_lettered", description="Input messages sent to the dead-letter topic."
        )

    def evaluated(self, record: EvaluationRecord) -> None:
        where = {
            "service.name": record.service_name,
            "tracescore.route": record.route,
            "metric": record.metric,
        }
        self._evaluations.add(1, {**where, "status": record.status.value})
        if record.score is not None:
            self._scores.record(record.score, where)
        judge = {"judge": record.judge}
        if record.usage.prompt_tokens:
            self._tokens.add(record.usage.prompt_tokens, {**judge, "type": "input"})
        if record.usage.completion_tokens:
            self._tokens.add(record.usage.completion_tokens, {**judge, "type": "output"})

    def skipped(self, reason: str, service: str = "", scope: str = "") -> None:
        self._skipped.add(1, {"reason": reason, "service.name": service, "otel.scope.name": scope})

    def escalation(self, outcome: str, service: str = "") -> None:
        self._escalations.add(1, {"outcome": outcome, "service.name": service})

    def dead_lettered(self) -> None:
        self._dead_letters.add(1)
