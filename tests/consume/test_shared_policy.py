"""The consumer hands every LLM verdict on an escalated interaction back to the cascade as evidence of its
lift, read by the label rule the records use."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tracescore.consume._shared_policy import SharedPolicy
from tracescore.model import DecodedSpan, Interaction, MetricResult, MetricStatus, RagRecord, Selection
from tracescore.sample import (
    CascadePolicy,
    Decision,
    Escalation,
    SamplingConfig,
    SamplingPolicy,
)

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


SPAN = DecodedSpan(
    trace_id="e" * 32, span_id="f" * 16, name="answer", service_name="rag-api", scope_name="x",
    attributes={}, end_time_unix_nano=1,
)  # fmt: skip


class Learner(SamplingPolicy):
    """A policy of the user's own: admits and escalates everything, and keeps the labels it is taught."""

    def __init__(self) -> None:
        self.labels: list[bool] = []

    def admit(self, interaction: Interaction) -> Decision:
        return Decision(metrics=("faithfulness",))

    def escalate(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> Escalation:
        return Escalation(to_llm=True, selection=Selection.BASELINE)

    def charge(self, tokens: int, *, reserved: int = 0) -> None:
        pass

    def learn(
        self, interaction: Interaction, offline_results: Sequence[MetricResult], hallucinated: bool
    ) -> bool:
        self.labels.append(hallucinated)
        return True


def test_a_policy_of_ones_own_learns_by_the_same_label_rule_and_keeps_no_op_defaults() -> None:
    learner = Learner()
    policy = SharedPolicy(learner)
    interaction = Interaction(span=SPAN, record=RagRecord(query="q", contexts=("c",), answer="a"), route="/")
    assert policy.learn(interaction, [SUSPICIOUS], [llm("unfaithful", 0.9)])
    assert not policy.learn(interaction, [SUSPICIOUS], [llm(None, None, MetricStatus.ERROR)])  # no verdict
    assert learner.labels == [True]
    # What it does not implement is the protocol's no-op: no lift, nothing saved, no crash.
    assert policy.judged(interaction, policy.escalate(interaction, []), [llm(None, 0.2)]) is None
    assert policy.lift_readings() == []
    policy.save()
    policy.observe_offline(0.1)


def test_a_policy_without_the_hooks_is_refused_when_the_consumer_is_built() -> None:
    class Bare:  # the protocol's shape, not its class: nothing to inherit the hooks from
        def admit(self, interaction: Interaction) -> Decision:
            return Decision(metrics=())

    with pytest.raises(TypeError, match=r"Bare lacks label_metric, learn, judged.*subclass"):
        SharedPolicy(Bare())  # type: ignore[arg-type]
