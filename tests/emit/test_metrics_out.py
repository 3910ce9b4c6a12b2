"""The consumer's OTel metrics: what an operator graphs and alerts on."""

from __future__ import annotations

from datetime import UTC, datetime

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracescore.emit import EvaluationMetrics
from tracescore.model import EvaluationRecord, ExtractSkip, MetricStatus, Usage


def _record(score: float | None, status: MetricStatus = MetricStatus.OK) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id="0" * 31 + "1", span_id="0" * 15 + "1", service_name="bot", route="/billing",
        metric="faithfulness", score=score, label=None, status=status, judge="openai:m",
        timestamp=datetime.now(UTC), usage=Usage(calls=2, prompt_tokens=100, completion_tokens=20),
    )  # fmt: skip


def _points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {
        metric.name: list(metric.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }


def test_scores_counts_and_tokens_are_recorded_by_service_route_and_metric() -> None:
    reader = InMemoryMetricReader()
    out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))

    out.evaluated(_record(0.2))
    out.evaluated(_record(0.9))
    out.evaluated(_record(None, MetricStatus.ERROR))
    out.skipped(ExtractSkip.EMPTY_CONTEXT, "rag-api", "openinference.instrumentation.langchain")
    out.dead_lettered()
    out.escalation("cascade", "rag-api")
    out.escalation("budget", "rag-api")
    out.escalation("budget", "rag-api")

    points = _points(reader)
    (histogram,) = points["tracescore.evaluation.score"]
    assert histogram.count == 2 and histogram.sum == 1.1
    # Buckets fit 0..1 scores, so a quantile over them means something: 0.2 and 0.9 land apart.
    assert histogram.explicit_bounds[-1] == 1.0 and len(histogram.explicit_bounds) >= 10
    assert sum(1 for c in histogram.bucket_counts if c) == 2
    assert histogram.attributes == {
        "service.name": "bot",
        "tracescore.route": "/billing",
        "metric": "faithfulness",
        "annotator_kind": "LLM",
        "selection": "none",
    }
    by_status = {p.attributes["status"]: p.value for p in points["tracescore.evaluations"]}
    assert by_status == {"ok": 2, "error": 1}
    tokens = {p.attributes["type"]: p.value for p in points["tracescore.judge.tokens"]}
    assert tokens == {"input": 300, "output": 60}
    assert [(p.attributes, p.value) for p in points["tracescore.spans.skipped"]] == [
        (
            {
                "reason": "empty_context",
                "service.name": "rag-api",
                "tracescore.scope": "openinference.instrumentation.langchain",
            },
            1,
        )
    ]
    assert points["tracescore.messages.dead_lettered"][0].value == 1
    by_outcome = {p.attributes["outcome"]: p.value for p in points["tracescore.llm_judge.escalations"]}
    assert by_outcome == {"cascade": 1, "budget": 2}, "a spent LLM budget is visible, not silent"


def test_judge_tiers_never_share_a_series_and_the_estimate_sums_and_agreement_add_up() -> None:
    reader = InMemoryMetricReader()
    out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    offline = _record(0.2).model_copy(update={"judge": "offline", "annotator_kind": "CODE"})
    out.evaluated(offline)
    llm = {"judge": "openai:m", "annotator_kind": "LLM", "offline_score": 0.2}
    out.evaluated(
        offline.model_copy(update={**llm, "score": 1.0, "selection": "cascade", "inclusion_probability": 1.0})
    )
    out.evaluated(
        offline.model_copy(
            update={**llm, "score": 0.0, "selection": "baseline", "inclusion_probability": 0.25}
        )
    )
    out.evaluated(offline.model_copy(update={**llm, "score": 0.0, "selection": "cascade"}))  # no π: left out

    points = _points(reader)
    series = {
        (p.attributes["annotator_kind"], p.attributes["selection"]): p.count
        for p in points["tracescore.evaluation.score"]
    }
    assert series == {("CODE", "none"): 1, ("LLM", "cascade"): 2, ("LLM", "baseline"): 1}
    sums = {
        (p.attributes["stratum"], p.attributes["term"]): p.value for p in points["tracescore.estimate.sums"]
    }
    assert sums[("census", "weight")] == 1 and sums[("census", "llm")] == 1.0
    assert sums[("sample", "weight")] == 4 and sums[("sample", "offline")] == 0.8
    assert sums[("sample", "pairs")] == 1 and sums[("census", "pairs")] == 1
    (agreement,) = points["tracescore.judge.agreement"]
    assert (agreement.attributes["offline"], agreement.attributes["llm"], agreement.value) == (
        "fail",
        "fail",
        1,
    )


def test_no_attribute_takes_a_label_prometheus_exporters_add_themselves() -> None:
    """A Prometheus exporter labels each series with its meter's scope (otel_scope_name, ...); the Collector's
    drops the whole metric when an attribute turns into one of those labels too ("duplicate label names"):
    `tracescore.spans.skipped`, labelled `otel.scope.name`, never reached Prometheus through the shipped
    metrics Collector."""
    reader = InMemoryMetricReader()
    out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    out.evaluated(_record(0.2))
    out.skipped(ExtractSkip.EMPTY_CONTEXT, "rag-api", "openinference.instrumentation.langchain")
    out.read_partly(ExtractSkip.SESSION_ID_SCRUBBED, "rag-api", "logfire")
    out.dead_lettered()
    names = {name: {key for p in points for key in p.attributes} for name, points in _points(reader).items()}
    assert {"tracescore.spans.skipped", "tracescore.interactions.read_partly"} <= set(names)
    # An exporter names a label after the attribute, its dots as underscores.
    taken = {name: keys for name, keys in names.items() if any(k.startswith("otel.") for k in keys)}
    assert taken == {}, taken


def test_the_broker_unreachable_gauge_is_what_the_consumer_says() -> None:
    reader = InMemoryMetricReader()
    out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    data = reader.get_metrics_data()  # before the consumer connected: no point (None: none of any metric)
    assert data is None or "tracescore.broker.unreachable" not in _points(reader)
    unreachable = [False]
    out.observe_broker(lambda: unreachable[0])
    assert [p.value for p in _points(reader)["tracescore.broker.unreachable"]] == [0]
    unreachable[0] = True
    assert [p.value for p in _points(reader)["tracescore.broker.unreachable"]] == [1]
