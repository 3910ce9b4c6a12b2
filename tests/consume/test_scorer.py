"""Scorer: which judge scores first, and what the sampling policy learns of the offline judge's cost."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tracescore.consume._scorer import Scorer
from tracescore.consume._shared_policy import SharedPolicy
from tracescore.model import DecodedSpan, Interaction, MetricResult, RagRecord
from tracescore.sample import Decision, Escalation, SamplingPolicy
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness

SPAN = DecodedSpan(
    trace_id="e" * 32, span_id="f" * 16, name="answer", service_name="rag-api", scope_name="x",
    attributes={}, end_time_unix_nano=1,
)  # fmt: skip
ANSWER = Interaction(
    span=SPAN,
    record=RagRecord(query="How long?", contexts=("It lasts 14 hours.",), answer="It lasts 14 hours."),
    route="/",
)


class Counting(SamplingPolicy):
    """Admits all, escalates none; keeps what the scorer tells it of the offline judge's CPU time."""

    def __init__(self) -> None:
        self.offline_seconds: list[float] = []

    def admit(self, interaction: Interaction) -> Decision:
        return Decision(metrics=())

    def escalate(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> Escalation:
        return Escalation(to_llm=False)

    def observe_offline(self, seconds: float) -> None:
        self.offline_seconds.append(seconds)


class TunedOffline(OfflineJudge):
    """The offline judge under a name of its own: its records say `offline:strict`, still the CODE judge."""

    name = "offline:strict"


def test_the_offline_judge_under_any_name_of_its_own_feeds_the_policy_its_cost() -> None:
    """The cost was fed only when the judge's name was exactly "offline"; the model says which judges are
    the offline one (annotator_kind), and a variant of it is thinned by its CPU share like the original."""
    for judge in (OfflineJudge(), TunedOffline()):
        policy = Counting()
        scorer = Scorer(judge, [Faithfulness()], policy=SharedPolicy(policy))
        asyncio.run(scorer.score(ANSWER))
        assert len(policy.offline_seconds) == 1, judge.name
