"""The sampling policy as the consumer's two threads share it: the Kafka thread admits, the scoring loop
escalates, charges and teaches it. `SharedPolicy` serialises the calls, which are cheap, so neither thread
sees the policy half-updated; it turns the LLM judge's verdicts on baseline interactions into labels for the
policy's learning and every verdict on an escalated interaction into evidence of its lift (by the label rule
every stage reads, tracescore.model). Any `SamplingPolicy` gets both: a policy that does not learn or measure
lift keeps the protocol's no-op defaults."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tracescore.model import (
    DecodedSpan,
    Interaction,
    MetricResult,
    MetricStatus,
    is_flagged,
    label_is_bad,
)
from tracescore.sample import Decision, Escalation, LiftReading, SamplingPolicy

__all__ = ["SharedPolicy"]

# What a policy may leave out when it only admits, escalates and charges: subclassing SamplingPolicy gives
# their no-op defaults, a policy written to the protocol's shape alone must define them.
_HOOKS = ("label_metric", "learn", "judged", "lift_readings", "observe_offline", "save")


class SharedPolicy:
    def __init__(self, policy: SamplingPolicy) -> None:
        if missing := [hook for hook in _HOOKS if not hasattr(policy, hook)]:
            raise TypeError(
                f"{type(policy).__name__} lacks {', '.join(missing)}: subclass "
                "tracescore.sample.SamplingPolicy for their no-op defaults"
            )
        self.policy = policy
        self._lock = threading.Lock()
        # A policy written to the protocol's shape alone may leave it out: every interaction is then built.
        self._screen = getattr(policy, "screen", None)

    def screen(self, span: DecodedSpan, route: str) -> Decision | None:
        if self._screen is None:
            return None
        with self._lock:
            return self._screen(span, route)

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
        with self._lock:
            hallucinated = self._hallucinated(llm)
            return hallucinated is not None and self.policy.learn(interaction, offline, hallucinated)

    def judged(
        self, interaction: Interaction, escalation: Escalation, llm: Sequence[MetricResult]
    ) -> LiftReading | None:
        """Hand the LLM judge's verdict on any escalated interaction to the policy: evidence of the cascade's
        lift. Returns the route's lift and split after it (None: no verdict, or nothing to measure)."""
        with self._lock:
            hallucinated = self._hallucinated(llm)
            return None if hallucinated is None else self.policy.judged(interaction, escalation, hallucinated)

    def lift_readings(self) -> list[LiftReading]:
        with self._lock:
            return self.policy.lift_readings()

    def save(self) -> None:
        with self._lock:
            self.policy.save()

    def observe_offline(self, seconds: float) -> None:
        with self._lock:
            self.policy.observe_offline(seconds)

    def _hallucinated(self, llm: Sequence[MetricResult]) -> bool | None:
        """Whether the LLM judge failed the answer on the policy's label metric, by the label rule every stage
        reads (tracescore.model); None when there is no verdict (an error, a timeout, an unknown label without
        a score)."""
        metric = self.policy.label_metric
        verdict = next((r for r in llm if r.metric == metric and r.status is MetricStatus.OK), None)
        if verdict is None or (verdict.label is None and verdict.score is None):
            return None
        # A verdict without a score counts by its label.
        return is_flagged(verdict) if verdict.score is not None else label_is_bad(verdict.label)
