"""How the service scores one admitted interaction: the offline judge always, an LLM judge where the sampling
policy sends it (the suspicion-first cascade), or the one configured judge alone.

The policy is shared by the Kafka thread (admit) and the scoring loop (escalate, charge): `LockedPolicy`
serialises the calls, which are cheap, so neither thread sees it half-updated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from tracescore.model import Interaction, MetricResult, MetricStatus, is_flagged, label_is_bad
from tracescore.sample import CascadePolicy, Decision, Escalation, SamplingPolicy, Selection
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric, evaluate_record

__all__ = ["LockedPolicy", "Scored", "Scorer"]


@dataclass(frozen=True)
class Scored:
    """The results of one interaction; `selection` (cascade / baseline) says why the LLM judge's results
    exist, so rolling estimates can use the unbiased baseline alone."""

    results: list[MetricResult]
    selection: str | None = None
    llm_judge: str | None = None
    # In the cascade, what followed the offline judge: cascade, baseline, budget or offline_only.
    escalation: str | None = None
    inclusion_probability: float | None = None

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
        }


class LockedPolicy:
    def __init__(self, policy: SamplingPolicy) -> None:
        self.policy = policy
        self._lock = threading.Lock()

    def admit(self, interaction: Interaction) -> Decision:
        with self._lock:
            return self.policy.admit(interaction)

    def escalate(self, interaction: Interaction, offline: Sequence[MetricResult]) -> Escalation:
        with self._lock:
            return self.policy.escalate(interaction, offline)

    def charge(self, tokens: int, reserved: int) -> None:
        with self._lock:
            self.policy.charge(tokens, reserved=reserved)

    def learn(
        self, interaction: Interaction, offline: Sequence[MetricResult], llm: Sequence[MetricResult]
    ) -> bool:
        """Hand the LLM judge's verdict on a baseline interaction to the policy as a label for its suspicion
        score. A failed or missing LLM result is no label. Returns whether one was learned."""
        if not isinstance(self.policy, CascadePolicy):
            return False  # a policy of the caller's own has no suspicion score to teach
        metric = self.policy.config.cascade.metric
        verdict = next((r for r in llm if r.metric == metric and r.status is MetricStatus.OK), None)
        if verdict is None or (verdict.label is None and verdict.score is None):
            return False
        # The label rule every stage reads (tracescore.model); a verdict without a score counts by its label.
        hallucinated = is_flagged(verdict) if verdict.score is not None else label_is_bad(verdict.label)
        if hallucinated is None:
            return False  # an unknown label and no score: no label for the suspicion score
        with self._lock:
            return self.policy.learn(interaction, offline, hallucinated)

    def save(self) -> None:
        if isinstance(self.policy, CascadePolicy):
            with self._lock:
                self.policy.save()

    def observe_offline(self, seconds: float) -> None:
        observe = getattr(self.policy, "observe_offline", None)
        if observe is not None:
            with self._lock:
                observe(seconds)


class Scorer:
    """Stateless per call: one instance serves every interaction concurrently."""

    def __init__(
        self,
        judge: Judge,
        metrics: Sequence[Metric],
        *,
        llm_judge: Judge | None = None,
        policy: LockedPolicy | None = None,
    ) -> None:
        self.judge = judge
        self.metrics = tuple(metrics)
        self.llm_judge = llm_judge
        self.policy = policy

    def metrics_named(self, names: Sequence[str] | None) -> tuple[Metric, ...]:
        return self.metrics if not names else tuple(m for m in self.metrics if m.name in names)

    async def score(self, interaction: Interaction, metric_names: Sequence[str] | None = None) -> Scored:
        metrics = self.metrics_named(metric_names)
        started = time.process_time()
        first = await evaluate_record(interaction.record, metrics, self.judge)
        offline_first = self.llm_judge is not None or self.judge.name == "offline"
        if self.policy is not None and offline_first:
            # Feeds the policy's thinning: what one interaction costs the offline judge's CPU share.
            self.policy.observe_offline(time.process_time() - started)
        if self.llm_judge is None or self.policy is None:
            return Scored(first)
        escalation = self.policy.escalate(interaction, first)
        if not escalation.to_llm:
            return Scored(first, escalation=escalation.reason)
        second: list[MetricResult] = []
        try:
            second = await evaluate_record(interaction.record, metrics, self.llm_judge)
        finally:
            # Charged even when the call failed, or the reservation would never be released.
            tokens = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in second)
            self.policy.charge(tokens, escalation.reserved_tokens)
        if escalation.selection is Selection.BASELINE:
            # Chosen without looking at its score: an unbiased label for the suspicion score.
            self.policy.learn(interaction, first, second)
        selection = escalation.selection.value if escalation.selection is not None else None
        llm_judge = self.llm_judge.name
        return Scored(
            [*first, *second],
            selection,
            llm_judge,
            escalation=escalation.reason,
            inclusion_probability=escalation.inclusion_probability,
        )
