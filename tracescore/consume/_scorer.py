"""How the service scores one admitted interaction: the offline judge always, an LLM judge where the sampling
policy sends it (the suspicion-first cascade, sample/_policy.py), or the one configured judge alone."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from tracescore.consume._shared_policy import SharedPolicy
from tracescore.model import Interaction, MetricResult, Selection, annotator_kind
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric, evaluate_record, uses_judge

__all__ = ["ScoredInteraction", "Scorer"]


@dataclass(frozen=True)
class ScoredInteraction:
    """The results of one interaction; `selection` (cascade / baseline) says why the LLM judge's results
    exist, so rolling estimates can use the unbiased baseline alone."""

    results: list[MetricResult]
    selection: str | None = None
    llm_judge: str | None = None
    # In the cascade, what followed the offline judge: cascade, baseline, uniform, unselected, budget or
    # offline_only (`Escalation.reason`).
    escalation: str | None = None
    inclusion_probability: float | None = None
    # The split for the interaction's route and answer shape when it was decided (share of the cascade's
    # budget that targeted; the rest drew uniformly).
    targeted_share: float | None = None

    def weighting(self, result: MetricResult) -> dict[str, float | str | None]:
        """An LLM record's inclusion probability and the offline score and label it corrects (rolling
        estimates of the mean score or of the share of faithful answers)."""
        if self.llm_judge is None or result.judge != self.llm_judge:
            return {}
        same = next((r for r in self.results if r.metric == result.metric and r.judge != result.judge), None)
        return {
            "inclusion_probability": self.inclusion_probability,
            "offline_score": None if same is None else same.score,
            "offline_label": None if same is None else same.label,
            "targeted_share": self.targeted_share,
        }


class Scorer:
    """Stateless per call: one instance serves every interaction concurrently."""

    def __init__(
        self,
        judge: Judge,
        metrics: Sequence[Metric],
        *,
        llm_judge: Judge | None = None,
        policy: SharedPolicy | None = None,
    ) -> None:
        self.judge = judge
        self.metrics = tuple(metrics)
        self.llm_judge = llm_judge
        self.policy = policy

    def metrics_named(self, names: Sequence[str] | None) -> tuple[Metric, ...]:
        return self.metrics if not names else tuple(m for m in self.metrics if m.name in names)

    async def score(
        self, interaction: Interaction, metric_names: Sequence[str] | None = None
    ) -> ScoredInteraction:
        metrics = self.metrics_named(metric_names)
        started = time.process_time()
        first = await evaluate_record(interaction.record, metrics, self.judge)
        offline_first = self.llm_judge is not None or annotator_kind(self.judge.name) == "CODE"
        if self.policy is not None and offline_first:
            # Feeds the policy's thinning: what one interaction costs the offline judge's CPU share.
            self.policy.observe_offline(time.process_time() - started)
        judged = tuple(m for m in metrics if uses_judge(m))  # the LLM judge would repeat the others
        if self.llm_judge is None or self.policy is None or not judged:
            return ScoredInteraction(first)
        escalation = self.policy.escalate(interaction, first)
        if not escalation.to_llm:
            return ScoredInteraction(first, escalation=escalation.reason)
        second: list[MetricResult] = []
        try:
            second = await evaluate_record(interaction.record, judged, self.llm_judge)
        finally:
            # Charged even when the call failed, or the reservation would never be released.
            tokens = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in second)
            self.policy.charge(tokens, escalation.reserved_tokens)
        if escalation.selection is Selection.BASELINE:
            # Chosen without looking at its score: an unbiased label for the suspicion score.
            self.policy.learn(interaction, first, second)
        self.policy.judged(interaction, escalation, second)  # evidence of the cascade's lift
        selection = escalation.selection.value if escalation.selection is not None else None
        llm_judge = self.llm_judge.name
        return ScoredInteraction(
            [*first, *second],
            selection,
            llm_judge,
            escalation=escalation.reason,
            inclusion_probability=escalation.inclusion_probability,
            targeted_share=escalation.targeted_share,
        )
