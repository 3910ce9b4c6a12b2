"""The consumer hands every LLM verdict on an escalated interaction back to the cascade as evidence of its
lift, read by the label rule the records use."""

from __future__ import annotations

from tracescore.consume._shared_policy import SharedPolicy
from tracescore.model import DecodedSpan, Interaction, MetricResult, MetricStatus, RagRecord
from tracescore.sample import CascadePolicy, SamplingConfig, Selection

SUSPICIOUS = MetricResult(
    metric="faithfulness",
    score=0.0,
    judge="offline",
    details={"total_claims": 2, "verdict_counts": {"NO_EVIDENCE": 2}},
)


def llm(label: str | None, score: float | None, status: MetricStatus = MetricStatus.OK) -> MetricResult:
    return MetricResult(metric="faithfulness", score=score, label=label, status=status, judge="openai")


def test_verdicts_reach_the_lift_by_the_records_label_rule() -> None:
    policy = SharedPolicy(CascadePolicy(SamplingConfig(cascade={"baseline_rate": 1.0})))
    span = DecodedSpan(
        trace_id="c" * 32, span_id="d" * 16, name="answer", service_name="rag-api", scope_name="x",
        attributes={}, end_time_unix_nano=1,
    )  # fmt: skip
    interaction = Interaction(
        span=span, record=RagRecord(query="q", contexts=("c",), answer="a"), route="/ask"
    )
    escalation = policy.escalate(interaction, [SUSPICIOUS])
    assert escalation.selection is Selection.BASELINE and escalation.cascade_pick
    # The label decides, whatever the score ("unfaithful" is a bad label).
    reading = policy.judged(interaction, escalation, [llm("unfaithful", 0.9)])
    assert reading is not None and reading.uniform is not None and reading.uniform.failed == 1.0
    assert reading.targeted is not None and reading.targeted.failed == 1.0  # a pick: evidence for both
    # A judge error is no verdict; without a label the score decides.
    assert policy.judged(interaction, escalation, [llm(None, None, MetricStatus.ERROR)]) is None
    reading = policy.judged(interaction, escalation, [llm(None, 0.2)])
    assert reading is not None and reading.uniform is not None
    assert reading.uniform.labels == 1 + (1 - 1 / 200) and reading.uniform.failed == reading.uniform.labels
    assert [r.key.route for r in policy.lift_readings()] == ["/ask"]
