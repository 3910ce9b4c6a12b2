"""The cascade's own lift, measured online: does targeting find more failures per LLM call than uniform draws?

Per key (service, route, answer shape: short / long answers by `lift.long_answer_chars`), two groups of LLM
verdicts (`failed`: the records' label rule says the answer is bad; the caller decides it):

- targeted: interactions the cascade picks at full targeting: its own escalations, and the uniform draws it
  would have picked too (its tie hash is independent of the uniform hash, so those are a random part of
  its picks, and cost no call of their own);
- uniform: every uniform draw (selections `baseline` and `uniform`).

Both shares are fractions of LLM calls, so the one that is higher finds more failures per unit of budget.
Counts fade: each label of a group weighs that group's earlier labels by (1 - 1/memory).

The split: for a key, the cascade sends `share` of its admissions (a trace-id hash, so every share is a
random part of its picks). What it leaves unsent (the running mean over all candidates of (1 - share) x
the chance of a cascade pick) is drawn uniformly over the candidates of every key where targeting is not
in full force on shown lift, so the traffic where targeting shows no lift is sampled as uniform sampling
would sample it, whichever shape the offline judge happens to suspect more.

A key first spends its budget as the cascade would, until its targeted group holds `_EXPLORE` verdicts: a
bounded price (at most that many calls picked by a useless or misleading offline judge, per key) for
evidence that a floor alone gathers slowly when the budget is small (the floor's part of a 1% cascade
share is one targeted call in a thousand answers). Then `share` starts at `floor` (no credible lift:
uniform, so a useless offline judge does no worse than uniform) and moves a step per label toward 1 while
the targeted share is credibly above the uniform one, toward `floor` otherwise. The floor keeps a trickle
of targeted calls so lift can show again.

Credibly above: Newcombe's hybrid score interval for the difference of two proportions (Wilson intervals
per group, combined). It keeps its coverage at the small counts and near-zero shares this sees (5% failures,
tens of labels), where a Wald interval collapses to zero width; it is closed form, so it is cheap to redo on
every label. The two groups can share labels (a uniform draw the cascade would have picked), which only
widens the interval (the shares then covary positively): the decision errs toward uniform. Hysteresis: the
split turns to targeting when the 95% interval's lower bound is above 0 and turns back only when the 80%
interval's is not, so evidence hovering at one bound does not flip it.

No labels (a judge outage): the evidence and the split stay as they are; an outage says nothing about lift,
and calls that fail cost alike whichever way they were chosen. A judge that fails everything (or nothing)
shows no difference: uniform. Bounded: at most `max_routes` keys, the least recently seen forgotten (a
forgotten key starts again: exploring, then at the floor).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import NamedTuple

from tracescore.model import Interaction
from tracescore.sample._config import LiftConfig

__all__ = ["FailureShare", "Lift", "LiftKey", "LiftReading"]

# Turn to targeting when the 95% interval's lower bound is above 0. The bound is looked at after every label;
# the first _EXPLORE targeted verdicts keep a fluke (two failures in a handful of labels) from switching it.
# 95% was chosen over 99% on the calibration halves of both dev sets (BENCHMARKS, "Cascade lift"): lift on
# long answers shows within a stream, and a useless or misleading offline judge still does as uniform.
_Z_ENTER = 1.959964
_Z_STAY = 1.281552  # stay targeting while the 80% interval's lower bound is above 0
_Z_SHOWN = 1.959964  # the intervals shown (status line, metrics): 95%
_STEP = 0.5  # share of the way to the target the split moves per label: a few labels, no jumps
_WINDOW = 500  # candidates the running means of the uniform draws' budget are averaged over
_EXPLORE = 10  # targeted verdicts a key gathers at full targeting before the evidence decides


class LiftKey(NamedTuple):
    service: str
    route: str
    shape: str  # short / long answer


@dataclass(frozen=True, slots=True)
class FailureShare:
    """The share of a group's LLM verdicts that failed, with its 95% Wilson interval (counts fade)."""

    labels: float
    failed: float
    value: float
    lower: float
    upper: float


@dataclass(frozen=True, slots=True)
class LiftReading:
    """One key's lift and split: `targeted_share` of the cascade's budget targets, the rest is uniform."""

    key: LiftKey
    targeted_share: float
    targeting: bool  # the evidence says targeting finds more failures (the split moves toward 1)
    exploring: bool  # fewer than _EXPLORE targeted verdicts yet: the cascade targets to gather them
    targeted: FailureShare | None  # None: no labels yet
    uniform: FailureShare | None
    difference: tuple[float, float, float] | None  # targeted - uniform share, 95% Newcombe bounds

    def describe(self) -> str:
        key = self.key
        text = (
            f"{key.service} {key.route} {key.shape} answers: split targeted {self.targeted_share:.2f} / "
            f"uniform {1 - self.targeted_share:.2f}{' (exploring)' if self.exploring else ''}; "
            f"LLM judge failed {_shown(self.targeted)} targeted vs {_shown(self.uniform)} uniform"
        )
        if self.difference is None:
            return text + ", lift unknown"
        value, lower, upper = self.difference
        return text + f", lift {value:+.2f} 95% [{lower:+.2f}, {upper:+.2f}]"


def _shown(share: FailureShare | None) -> str:
    if share is None:
        return "n/a (0 labels)"
    return f"{share.value:.2f} [{share.lower:.2f}, {share.upper:.2f}] of {share.labels:.0f}"


def wilson(failed: float, labels: float, z: float) -> tuple[float, float]:
    if labels <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, failed / labels))
    z2 = z * z
    scale = 1.0 + z2 / labels
    centre = (p + z2 / (2 * labels)) / scale
    half = z * math.sqrt(p * (1 - p) / labels + z2 / (4 * labels * labels)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(first: _Group, second: _Group, z: float) -> tuple[float, float, float] | None:
    """first - second share, with Newcombe's hybrid score bounds at `z`; None when a group has no labels."""
    if first.labels <= 0 or second.labels <= 0:
        return None
    p1, p2 = first.failed / first.labels, second.failed / second.labels
    l1, u1 = wilson(first.failed, first.labels, z)
    l2, u2 = wilson(second.failed, second.labels, z)
    d = p1 - p2
    return d, d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2)


@dataclass(slots=True)
class _Group:
    labels: float = 0.0
    failed: float = 0.0

    def add(self, failed: bool, memory: int) -> None:
        keep = 1.0 - 1.0 / memory
        self.labels = self.labels * keep + 1.0
        self.failed = self.failed * keep + float(failed)

    def share(self) -> FailureShare | None:
        if self.labels <= 0:
            return None
        lower, upper = wilson(self.failed, self.labels, _Z_SHOWN)
        return FailureShare(self.labels, self.failed, self.failed / self.labels, lower, upper)


@dataclass(slots=True)
class _State:
    share: float
    targeting: bool = False
    targeted: _Group = field(default_factory=_Group)
    uniform: _Group = field(default_factory=_Group)


class Lift:
    """Per-key evidence and split. Not thread-safe (the policy's caller serialises it)."""

    def __init__(self, config: LiftConfig | None = None) -> None:
        self.config = config or LiftConfig()
        self._states: OrderedDict[LiftKey, _State] = OrderedDict()
        # Running means over all candidates: the cascade picks moved to uniform draws, (1 - share) x pick;
        # and the share of candidates whose key is not fully targeting (where the draws go).
        self._moved = 0.0
        self._open = 0.0
        self._candidates = 0

    def __len__(self) -> int:
        return len(self._states)

    def key(self, interaction: Interaction) -> LiftKey:
        long = len(interaction.record.answer or "") > self.config.long_answer_chars
        return LiftKey(interaction.span.service_name, interaction.route, "long" if long else "short")

    def split(self, key: LiftKey, pick: float) -> tuple[float, float]:
        """(targeted share, uniform rate) for one candidate of `key`, whose chance of a cascade pick at full
        targeting is `pick` (0 when it is not ranked); then counts it. The uniform rate comes from the
        candidates before it, so a draw at that rate does not depend on this candidate's own score."""
        if not self.config.enabled:
            return 1.0, 0.0
        state = self._state(key)
        share = 1.0 if _exploring(state) else state.share
        # Uniform draws go wherever targeting is not in full force on shown lift: a key at its floor or
        # on its way, and a key still exploring or whose answers the cascade never picks.
        open_ = share < 1.0 or not state.targeting
        uniform = min(1.0, self._moved / self._open) if open_ and self._open > 0.0 else 0.0
        self._candidates += 1
        weight = 1.0 / min(self._candidates, _WINDOW)
        self._moved += ((1.0 - share) * pick - self._moved) * weight
        self._open += (float(open_) - self._open) * weight
        return share, uniform

    def judged(self, key: LiftKey, *, targeted: bool, uniform: bool, failed: bool) -> LiftReading | None:
        """One LLM verdict on an interaction of `key`, in the targeted group, the uniform one, or both."""
        if not self.config.enabled or not (targeted or uniform):
            return None
        state = self._state(key)
        memory = self.config.memory
        if targeted:
            state.targeted.add(failed, memory)
        if uniform:
            state.uniform.add(failed, memory)
        bound = newcombe(state.targeted, state.uniform, _Z_STAY if state.targeting else _Z_ENTER)
        state.targeting = bound is not None and bound[1] > 0.0
        goal = 1.0 if state.targeting else self.config.floor
        state.share += _STEP * (goal - state.share)
        if abs(goal - state.share) < 1e-3:
            state.share = goal
        return self._reading(key, state)

    def readings(self) -> list[LiftReading]:
        return [self._reading(key, state) for key, state in self._states.items()]

    def _state(self, key: LiftKey) -> _State:
        state = self._states.get(key)
        if state is None:
            if len(self._states) >= self.config.max_routes:
                self._states.popitem(last=False)
            state = self._states[key] = _State(share=self.config.floor)
        else:
            self._states.move_to_end(key)
        return state

    @staticmethod
    def _reading(key: LiftKey, state: _State) -> LiftReading:
        exploring = _exploring(state)
        return LiftReading(
            key,
            1.0 if exploring else state.share,
            state.targeting,
            exploring,
            state.targeted.share(),
            state.uniform.share(),
            newcombe(state.targeted, state.uniform, _Z_SHOWN),
        )


def _exploring(state: _State) -> bool:
    return state.targeted.labels < _EXPLORE - 1e-9
