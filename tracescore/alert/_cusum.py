"""A drop rule's sustained-drop test: Page's CUSUM on each answer as it is counted, against the normal.

The window test (alert/_drop.py) compares a window with the normal: best for a large drop, which shows in a
few hundred answers, but a drop of the size of its noise never reaches its bound within a day's window (on
long answers the offline judge moves its pass rate by only 0.0375 when hallucinations go from 5% to 30%).
The CUSUM adds each answer's evidence of a drop of `size` up as the answer comes, however long the drop
takes to show:

    S = max(0, S + log p1(v) / p0(v)),  p0 = the normal's level read low, p1 = p0 - size
    log p1(v) / p0(v) = v log(p1 / p0) + (1 - v) log((1 - p1) / (1 - p0))

(v: the answer's value as the window test reads it, 1 or 0 under `signal: label`; for a score in between,
the same linear form). The normal is estimated, and an error of it is a drift the CUSUM adds up as
faithfully as a drop, so p0 is the normal's level read `_REFERENCE_Z` standard errors low (its lower
confidence limit): a normal of few answers (a route that just learned it) makes a slower test, not a
noisy one. It alarms when S reaches the threshold at which a route *at p0* alarms about once per `every`
answers (`_threshold`: Siegmund's approximation of the run to a false alarm, h = log(every · KL(p0, p1))).
A route at or above p0, which it is but when its normal reads more than `_REFERENCE_Z` standard errors
high (7% of normals, whatever the judge's pass rate), pages less often than that: the false-alarm rate is
bounded by construction for every pass rate and every size of the normal (the guaranteed conditional
performance of a chart whose reference is estimated). An earlier version set it at the normal's level
itself: at p0 its route then paged 17 to 310 times more often than `every` said, by how closely the
normal was known, so the same setting meant another rate on each judge.

After the alarm a second CUSUM weighs the route being back at its normal against it staying below it by
half the drop found (at least `size`; the drop is that of the answers since S last left 0: the run, the
drop's likeliest start), with the same threshold rule; the alarm ends when it is reached. Each answer is
counted once (the drop rule counts it when it leaves the rule's window), so the statistic survives a
restart in the route's state (`DropState`).
"""

from __future__ import annotations

import functools
import math

from tracescore.alert._estimate import C_N, C_SUM, R_N, R_SUM, Sums, add_sums, empty_sums, plain_level
from tracescore.alert._state import DropState, Moments

__all__ = ["Sustained", "answer_value"]

_REFERENCE_Z = 1.5  # the normal is read this many standard errors low (chosen on half 0, BENCHMARKS.md)
_EDGE = 1e-4  # levels are kept within (edge, 1 - edge): a route at exactly 1.0 still has a likelihood


def answer_value(part: Sums, correction: float) -> float | None:
    """One answer's value as the window test reads it (its LLM value in stratum C, its offline value with
    the route's correction in R), within 0..1; None for one that adds no value (an unpaired LLM record)."""
    n = part[C_N] + part[R_N]
    if n <= 0:
        return None
    return min(1.0, max(0.0, (part[C_SUM] + part[R_SUM] + part[R_N] * correction) / n))


def _clamp(p: float) -> float:
    return min(1 - _EDGE, max(_EDGE, p))


# The levels move only when the normal does, the answers come one at a time: the logarithms of a pair of
# levels (and its threshold) are computed once, not once per answer (a few distinct pairs are live at once).
_CACHED_LEVELS = 64


@functools.lru_cache(maxsize=_CACHED_LEVELS)
def _log_ratios(p0: float, p1: float) -> tuple[float, float]:
    """(log p1 / p0, log (1 - p1) / (1 - p0)): the log-likelihood ratio of a value of 1 and of 0."""
    return math.log(p1 / p0), math.log((1 - p1) / (1 - p0))


def _llr(value: float, p0: float, p1: float) -> float:
    """log p1(v) / p0(v) of a value in 0..1 (Bernoulli's, linear in v)."""
    up, down = _log_ratios(p0, p1)
    return value * up + (1 - value) * down


@functools.lru_cache(maxsize=_CACHED_LEVELS)
def _threshold(p0: float, p1: float, every: float) -> float:
    """The CUSUM's threshold for one false alarm per about `every` answers on a route at p0: there the
    increments X = log p1(v) / p0(v) have E[e^X] = 1 (θ = 1, whatever p0 and p1), so the run to a false
    alarm is about e^h / KL(p0, p1) and h = log(every · KL) (at least 1). A closed form: no root to find."""
    kl = p0 * math.log(p0 / p1) + (1 - p0) * math.log((1 - p0) / (1 - p1))
    return max(1.0, math.log(max(1.0, every * kl)))


class Sustained:
    """The sustained-drop test of one route; its values live in the route's `DropState` (`cusum`,
    `cusum_recovery`, `cusum_drop`) and `run` (the sums of the answers since the CUSUM last left 0),
    which `dump` writes back."""

    def __init__(self, size: float, every: float, state: DropState) -> None:
        self.size = size
        self.every = every
        self.state = state
        self.run: Sums = empty_sums() if state.cusum_run is None else state.cusum_run.values()
        # `levels` of the last normal read (what it depends on, then the levels): the same normal is read
        # for every answer until a bucket moves.
        self._levels_of: tuple[float, ...] | None = None
        self._levels: tuple[float, float, float] | None = None

    @property
    def alarm(self) -> bool:
        return self.state.cusum_drop is not None

    def levels(self, normal: Sums, correction: float) -> tuple[float, float, float] | None:
        """(p0, p1, the normal's level): what the test weighs against each other now; None while the normal
        has no answer."""
        read = (normal[C_N], normal[R_N], normal[C_SUM], normal[R_SUM], correction)  # what level and n are of
        if read == self._levels_of:
            return self._levels
        self._levels_of, self._levels = read, self._compute_levels(normal, correction)
        return self._levels

    def _compute_levels(self, normal: Sums, correction: float) -> tuple[float, float, float] | None:
        level, _, n = plain_level(normal, correction)
        if n <= 0:
            return None
        # With one pass and one fail added (Laplace), and a Bernoulli's spread at that level (the most a
        # value in 0..1 can have): a normal of a few answers, or of passes only, is no certainty that one
        # failing answer could overturn.
        level = (level * n + 1) / (n + 2)
        p0 = _clamp(level - _REFERENCE_Z * math.sqrt(level * (1 - level) / n))
        return p0, _clamp(p0 - self.size), level

    def evidence(self, normal: Sums, correction: float) -> float:
        """S as a share of the threshold it alarms at (1: alarm)."""
        levels = self.levels(normal, correction)
        return 0.0 if levels is None else self.state.cusum / _threshold(*levels[:2], self.every)

    def add(self, value: float, part: Sums, normal: Sums, correction: float, sign: float = 1.0) -> None:
        """One answer's value (`part`: its sums) against the normal; `sign` -1 takes back one counted before
        (a later record of it replaces it)."""
        levels = self.levels(normal, correction)
        if levels is None:
            return
        p0, p1, level = levels
        state = self.state
        if state.cusum_drop is not None:  # alarmed: is the route back at its normal, or still at the drop?
            # Half the drop found: the run it was measured on began where the answers looked worst, so
            # the drop is overstated; still at half of it is no recovery (the window test's rule alike).
            dropped = _clamp(level - max(self.size, state.cusum_drop / 2))
            back = _clamp(max(level, dropped + _EDGE))
            state.cusum_recovery = max(0.0, state.cusum_recovery + sign * _llr(value, dropped, back))
            add_sums(self.run, part, sign)
            if state.cusum_recovery >= _threshold(dropped, back, self.every):
                self.reset()
            return
        state.cusum = max(0.0, state.cusum + sign * _llr(value, p0, p1))
        if state.cusum == 0.0:
            self.run = empty_sums()  # the drop's likeliest start is after this answer
            return
        add_sums(self.run, part, sign)
        if state.cusum >= _threshold(p0, p1, self.every):
            found, _, n = plain_level(self.run, correction)
            state.cusum_drop = max(self.size, level - found) if n else self.size
            state.cusum, state.cusum_recovery = 0.0, 0.0

    def reset(self) -> None:
        """Back to a silent start: the route recovered, or its normal was learned again."""
        state = self.state
        state.cusum, state.cusum_recovery, state.cusum_drop = 0.0, 0.0, None
        self.run = empty_sums()

    def dump(self) -> None:
        self.state.cusum_run = Moments.of(self.run) if any(self.run) else None
