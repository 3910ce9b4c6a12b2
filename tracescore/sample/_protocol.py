"""The sampling seam: what the consumer asks a sampling policy, and what it gets back.

A policy must `admit`, `escalate` and `charge`. The rest are hooks with no-op defaults (subclass
`SamplingPolicy` to inherit them): a policy that learns from the LLM judge's verdicts (`learn`), measures
its own lift (`judged`, `lift_readings`), keeps state across restarts (`save`) or thins on the offline
judge's cost (`observe_offline`) implements those, and the consumer calls them whatever the policy's class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from tracescore.model import DecodedSpan, Interaction, MetricResult, Selection
from tracescore.sample._config import DEFAULT_CASCADE_METRIC
from tracescore.sample._lift import LiftReading

__all__ = ["Decision", "Escalation", "SamplingPolicy", "SkipReason"]


class SkipReason(StrEnum):
    FILTER = "filter"  # an attribute filter excluded it
    RATE = "rate"  # outside the configured share for its service/route/metrics
    THINNED = "thinned"  # the stream outran the offline judge's CPU share
    RATE_LIMIT = "rate_limit"  # evaluations per minute reached
    UNSELECTED = "unselected"  # above the floor, outside the share the cascade sends; the budget had room
    BUDGET = "budget"  # above the floor, not sent: the token budget had no room (spent, or the rest reserved)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to score an interaction, and with which metrics (a subset of the policy's, in its order)."""

    metrics: tuple[str, ...]
    skip: SkipReason | None = None

    @property
    def sampled(self) -> bool:
        return self.skip is None


@dataclass(frozen=True, slots=True)
class Escalation:
    """Whether the LLM judge scores this interaction too, and why.

    `selection` is how it was chosen (also set when the budget stopped it or no draw chose it: what it would
    have been, `cascade` when undrawn); write it into the LLM judge's records. `reserved_tokens` must be
    handed back through `charge`.
    `suspicion_score` is P(hallucinated) from the offline result (None: nothing to rank), `suspicion` why.
    `inclusion_probability` is the chance the policy had of sending this interaction to the LLM judge
    (baseline, uniform draws and cascade together); None when it did not go. `targeted_share` is the split
    in force for its route and answer shape (the share of the cascade's budget that targets; the rest draws
    uniformly); `cascade_pick`, whether the cascade fully targeting would have sent it (lift evidence).
    """

    to_llm: bool
    selection: Selection | None = None
    skip: SkipReason | None = None
    suspicion: str | None = None
    reserved_tokens: int = 0
    inclusion_probability: float | None = None
    suspicion_score: float | None = None
    targeted_share: float | None = None
    cascade_pick: bool = False

    @property
    def reason(self) -> str:
        """`cascade`, `baseline`, `uniform`, `unselected`, `budget` (`SkipReason`), or `offline_only` (nothing
        suspicious, not drawn)."""
        if self.skip is not None:
            return self.skip.value
        return self.selection.value if self.selection is not None else "offline_only"


@runtime_checkable
class SamplingPolicy(Protocol):
    """Which interactions are scored, and which of those the LLM judge sees (`CascadePolicy` is ours).

    Not thread-safe by contract: the consumer serialises every call."""

    def admit(self, interaction: Interaction) -> Decision:
        """Before any scoring: whether (and for which metrics) the interaction is scored offline."""
        ...

    def escalate(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> Escalation:
        """After the offline judge: whether the LLM judge scores it too."""
        ...

    def screen(self, span: DecodedSpan, route: str) -> Decision | None:
        """`admit`'s decision when the interaction's span and route alone decide it (an attribute filter, a
        rate of 0 or a trace outside the rate), counted as `admit` counts it; None when `admit` must see the
        interaction (default). The consumer asks first and builds only the interactions it must show
        `admit`: at low rates most interactions are never built."""
        return None

    def charge(self, tokens: int, *, reserved: int = 0) -> None:
        """The tokens one LLM evaluation really used, releasing what its Escalation reserved."""
        ...

    @property
    def label_metric(self) -> str:
        """The metric whose LLM verdict `learn` and `judged` receive (as `hallucinated` / `failed`)."""
        return DEFAULT_CASCADE_METRIC

    def learn(
        self, interaction: Interaction, offline_results: Sequence[MetricResult], hallucinated: bool
    ) -> bool:
        """The LLM verdict on a baseline interaction, with its offline results again. Returns whether it was
        learned (default: nothing learns)."""
        return False

    def judged(self, interaction: Interaction, escalation: Escalation, failed: bool) -> LiftReading | None:
        """The LLM verdict on any escalated interaction: evidence of the policy's lift. Returns the key's
        lift after it (default: no lift measured, None)."""
        return None

    def lift_readings(self) -> list[LiftReading]:
        """Every tracked key's lift, for status lines and metrics (default: none)."""
        return []

    def observe_offline(self, seconds: float) -> None:
        """How long one interaction's offline scoring took (default: ignored)."""
        return None

    def save(self) -> None:
        """Persist learned state, on stop (default: nothing to save)."""
        return None
