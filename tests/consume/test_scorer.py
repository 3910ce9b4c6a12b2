"""Scorer: which judge scores first, and what the sampling policy learns of the offline judge's cost."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from tracescore.consume._scorer import Scorer
from tracescore.consume._shared_policy import SharedPolicy
from tracescore.model import DecodedSpan, Interaction, MetricResult, RagRecord, Selection
from tracescore.sample import Decision, Escalation, SamplingPolicy
from tracescore.score import OfflineJudge
from tracescore.score.metrics import DistinctN, Faithfulness, ToolErrors, python_metric

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


class EscalateAll(Counting):
    """Sends every interaction to the LLM judge (as its baseline draw)."""

    def escalate(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> Escalation:
        return Escalation(to_llm=True, selection=Selection.BASELINE, inclusion_probability=1.0)


class SecondTier(OfflineJudge):
    """The offline judge standing in as the second tier under an LLM judge's name (no LLM is reachable)."""

    name = "openai:second-tier"


def test_the_llm_judge_scores_only_the_metrics_that_call_a_judge() -> None:
    """A Python metric, distinct-n and the run signals give the same result under any judge: scored once, by
    the offline judge, never again under the LLM judge's name (its second record read as an LLM's)."""

    @python_metric
    def cites_a_document(answer: str) -> float:
        return 1.0

    metrics = [Faithfulness(), cites_a_document, DistinctN(), ToolErrors()]
    scorer = Scorer(OfflineJudge(), metrics, llm_judge=SecondTier(), policy=SharedPolicy(EscalateAll()))
    scored = asyncio.run(scorer.score(ANSWER))
    by_judge = sorted((r.judge, r.metric) for r in scored.results)
    assert by_judge == [
        ("offline", "cites_a_document"),
        ("offline", "distinct_2"),
        ("offline", "faithfulness"),
        ("offline", "tool_errors"),
        ("openai:second-tier", "faithfulness"),
    ]
    only_code = Scorer(
        OfflineJudge(), metrics[1:], llm_judge=SecondTier(), policy=SharedPolicy(EscalateAll())
    )
    assert {r.judge for r in asyncio.run(only_code.score(ANSWER)).results} == {"offline"}
