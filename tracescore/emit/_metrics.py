"""OTel metrics from the consumer: score distributions per service, route, metric, judge tier
(`annotator_kind`) and `selection`, and the counts an operator alerts on (dead letters, skipped spans, judge
errors, judge tokens, the LLM judge's spent budget).

Two judges' scores never share a series. The additive `tracescore.estimate.sums` let recording rules build
the same estimate `tracescore alert` uses (offline mean corrected by the LLM judge, see alert/_estimate.py);
`tracescore.judge.agreement` counts the baseline pairs by both judges' verdicts.

Instruments come from the Meter passed in, so the process's MeterProvider (OTLP, Prometheus, ...) decides
where they go; with no provider configured they are no-ops.
"""

from __future__ import annotations

from opentelemetry import metrics
from opentelemetry.metrics import Meter

from tracescore import __version__
from tracescore.model import UNLABELLED_THRESHOLD, EvaluationRecord

__all__ = ["LABEL_THRESHOLD", "SCORE_BUCKETS", "EvaluationMetrics"]

# Scores live in 0..1; the SDK's default buckets (0, 5, 10, ... 10000) would put every score in one bucket.
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# Judge agreement: a score at or above this passes (the label rule's threshold for unlabelled scores).
LABEL_THRESHOLD = UNLABELLED_THRESHOLD


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
        self._estimate = meter.create_counter(
            "tracescore.estimate.sums",
            description="Sums over LLM-judged interactions behind the sampling policy, by stratum (census: "
            "inclusion probability 1; sample: the uniform baseline) and term: weight (Σ 1/π), llm and "
            "offline (Σ score/π), squared_difference (Σ (llm - offline)²/π), pairs (count).",
        )
        self._agreement = meter.create_counter(
            "tracescore.judge.agreement",
            description="Baseline interactions scored by both judges, by the offline and the LLM verdict "
            "(pass / fail at the label threshold) and whether they agree.",
        )
        self._agreement_scores = meter.create_counter(
            "tracescore.judge.agreement.scores",
            description="Sum of each judge's scores (tier CODE or LLM) over the baseline pairs.",
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
            tier = {"annotator_kind": record.annotator_kind, "selection": record.selection or "none"}
            self._scores.record(record.score, {**where, **tier})
            if record.selection is not None and record.offline_score is not None:
                self._paired(where, record, record.score, record.offline_score)
        judge = {"judge": record.judge}
        if record.usage.prompt_tokens:
            self._tokens.add(record.usage.prompt_tokens, {**judge, "type": "input"})
        if record.usage.completion_tokens:
            self._tokens.add(record.usage.completion_tokens, {**judge, "type": "output"})

    def _paired(self, where: dict[str, str], record: EvaluationRecord, llm: float, offline: float) -> None:
        pi = record.inclusion_probability
        if pi is None and record.selection == "baseline":
            pi = 0.0  # an older consumer's baseline record: uniform, its rate unknown; weight 1
        if pi is not None:
            weight = 1.0 if pi <= 0 or pi >= 1 else 1.0 / pi
            stratum = {**where, "stratum": "census" if pi >= 1 else "sample"}
            for term, value in (
                ("weight", weight), ("llm", weight * llm), ("offline", weight * offline),
                ("squared_difference", weight * (llm - offline) ** 2), ("pairs", 1.0),
            ):  # fmt: skip
                self._estimate.add(value, {**stratum, "term": term})
        if record.selection == "baseline":
            verdicts = {
                "offline": "pass" if offline >= LABEL_THRESHOLD else "fail",
                "llm": "pass" if llm >= LABEL_THRESHOLD else "fail",
            }
            agree = "true" if verdicts["offline"] == verdicts["llm"] else "false"
            self._agreement.add(1, {**where, **verdicts, "agree": agree})
            self._agreement_scores.add(offline, {**where, "annotator_kind": "CODE"})
            self._agreement_scores.add(llm, {**where, "annotator_kind": "LLM"})

    def skipped(self, reason: str, service: str = "", scope: str = "") -> None:
        self._skipped.add(1, {"reason": reason, "service.name": service, "otel.scope.name": scope})

    def escalation(self, outcome: str, service: str = "") -> None:
        self._escalations.add(1, {"outcome": outcome, "service.name": service})

    def dead_lettered(self) -> None:
        self._dead_letters.add(1)
