"""The sampling policy as the consumer's two threads share it: the Kafka thread admits, the scoring loop
escalates, charges and teaches it. `SharedPolicy` serialises the calls, which are cheap, so neither thread
sees the policy half-updated; it turns the LLM judge's verdicts on baseline interactions into labels for the
suspicion score and every verdict on an escalated interaction into evidence of the cascade's lift (by the
label rule every stage reads, tracescore.model)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tracescore.model import Interaction, MetricResult, MetricStatus, is_flagged, label_is_bad
from tracescore.sample import CascadePolicy, Decision, Escalation, LiftReading, SamplingPolicy

__all__ = ["SharedPolicy"]


class SharedPolicy:
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
        hallucinated = self._hallucinated(llm)
        if hallucinated is None or not isinstance(self.policy, CascadePolicy):
            return False
        with self._lock:
            return self.policy.learn(interaction, offline, hallucinated)

    def judged(
        self, interaction: Interaction, escalation: Escalation, llm: Sequence[MetricResult]
    ) -> LiftReading | None:
        """Hand the LLM judge's verdict on any escalated interaction to the policy: evidence of the cascade's
        lift. Returns the route's lift and split after it (None: no verdict, or nothing to measure)."""
        hallucinated = self._hallucinated(llm)
        if hallucinated is None or not isinstance(self.policy, CascadePolicy):
            return None
        with self._lock:
            return self.policy.judged(interaction, escalation, hallucinated)

    def lift_readings(self) -> list[LiftReading]:
        if not isinstance(self.policy, CascadePolicy):
            return []
        with self._lock:
            return self.policy.lift_readings()

    def _hallucinated(self, llm: Sequence[MetricResult]) -> bool | None:
        """Whether the LLM judge failed the answer on the cascade's metric, by the label rule every stage
        reads (tracescore.model); None when there is no verdict (an error, a timeout, an unknown label without
        a score, a policy of the caller's own with no suspicion score to teach)."""
        if not isinstance(self.policy, CascadePolicy):
            return None
        metric = self.policy.config.cascade.metric
        verdict = next((r for r in llm if r.metric == metric and r.status is MetricStatus.OK), None)
        if verdict is None or (verdict.label is None and verdict.score is None):
            return None
        # A verdict without a score counts by its label.
        return is_flagged(verdict) if verdict.score is not None else label_is_bad(verdict.label)

    def save(self) -> None:
        if isinstance(self.policy, CascadePolicy):
            with self._lock:
                self.policy.save()

    def observe_offline(self, seconds: float) -> None:
        observe = getattr(self.policy, "observe_offline", None)
        if observe is not None:
            with self._lock:
                observe(seconds)
