"""When a route's silence is news: its arrival rate, and how improbable a silence is at that rate.

A rule's no-data part in `unusual` mode (the default) pages once the route's own recent rate predicts so
many answers in the silence so far that a healthy route would be that quiet at most once per
`no_data_every` answers: arrivals are Poisson at rate λ, so P(no answer in s) = exp(-λ·s), and the
silence pages once λ·s >= ln(no_data_every), and is at least `no_data_seconds` long. λ is the lower
confidence bound of the route's rate: its answers weighted by age (an answer `no_data_rate_seconds` old
counts e^-1) over the time it was seen, so a route known from few answers needs a longer silence. Until
it has `no_data_min_answers` (weighted) over at least a day (or `no_data_rate_seconds`, if shorter), its
rate is not known and its silence does not page. In `fixed` mode every silence of `no_data_seconds` pages.

The rate is three numbers of `AlertState` (`arrivals`, `arrivals_at`, `first_seen`), changed only when an
answer arrives (never by a record read again after a restart: it is in the saved state already).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from tracescore.alert._config import RuleConfig
from tracescore.alert._durations import span
from tracescore.alert._state import AlertState

__all__ = ["Silence", "armed", "arrived", "describe_rate", "silence"]

_DAY = 86_400.0
_Z = 1.6449  # the rate's one-sided 95% lower bound


def arrived(state: AlertState, at: datetime, tau_seconds: float) -> None:
    """Count one answer at `at` into the route's weighted arrivals (in any order)."""
    if state.arrivals_at is None or state.first_seen is None:
        state.arrivals, state.arrivals_at, state.first_seen = 1.0, at, at
        return
    age = (at - state.arrivals_at).total_seconds()
    if age >= 0:
        state.arrivals = state.arrivals * math.exp(-age / tau_seconds) + 1.0
        state.arrivals_at = at
    else:  # read late: it counts as old as it is
        state.arrivals += math.exp(age / tau_seconds)
    state.first_seen = min(state.first_seen, at)


def _lower(n: float) -> float:
    """The one-sided 95% lower bound of a Poisson mean observed as `n` (Wilson-Hilferty)."""
    if n <= 0:
        return 0.0
    return n * max(0.0, 1 - 1 / (9 * n) - _Z / (3 * math.sqrt(n))) ** 3


@dataclass(frozen=True, slots=True)
class Silence:
    """A route's silence against its rule: `quiet` True (it pages), False (it does not, and a firing no-data
    alert resolves), None (its rate is not known: neither)."""

    quiet: bool | None
    rate_per_hour: float | None = None  # the rate's lower bound (unusual mode, once known)
    expected: float | None = None  # answers that rate expects in the silence so far
    pages_after: timedelta | None = None  # the silence that pages at that rate

    def why(self, unit: str = "answer") -> str | None:
        """What makes it unusual, for the page (None: the fixed rule's silence)."""
        if self.rate_per_hour is None or self.expected is None:
            return None
        return (
            f"{self.expected:,.0f} of its {unit}s were expected by now at its rate of at least "
            f"{_per_hour(self.rate_per_hour)}"
        )


def _per_hour(rate: float) -> str:
    return f"{rate:.2g} an hour" if rate < 1 else f"{rate:,.0f} an hour"


def describe_rate(found: Silence, unit: str) -> str:
    """`at least 12 answers an hour; no-data alert armed: a silence of 1.2 hours pages`, for the line that
    says a route's rate is known."""
    assert found.rate_per_hour is not None and found.pages_after is not None
    rate = _per_hour(found.rate_per_hour).replace(" an hour", f" {unit}s an hour")
    return (
        f"at least {rate}; no-data alert armed: a silence of {span(found.pages_after.total_seconds())} pages"
    )


def silence(rule: RuleConfig, state: AlertState, read_up_to: datetime) -> Silence:
    """The route's silence at `read_up_to` (how far its records are read) under `rule`'s no-data part,
    which is set (`no_data_seconds`), on a route seen at least once."""
    floor, last = rule.no_data_seconds, state.last_seen
    assert floor is not None and last is not None
    quiet_for = (read_up_to - last).total_seconds()
    if rule.no_data_mode == "fixed":
        return Silence(quiet_for > floor)
    known = _rate(rule, state)
    if known is None:  # too little history: a silence past the floor is neither news nor a recovery
        return Silence(False if quiet_for <= floor else None)
    pages_after = max(floor, math.log(rule.no_data_every) / known)
    expected = known * max(quiet_for, 0.0)
    rate = known * 3600
    return Silence(quiet_for > pages_after, rate, expected, timedelta(seconds=pages_after))


def armed(rule: RuleConfig, state: AlertState) -> Silence | None:
    """The route's rate and the silence that pages it, once known (unusual mode), else None."""
    if rule.no_data_seconds is None or rule.no_data_mode == "fixed" or state.last_seen is None:
        return None
    found = silence(rule, state, state.last_seen)
    return None if found.rate_per_hour is None else found


def _rate(rule: RuleConfig, state: AlertState) -> float | None:
    """The lower bound of the route's rate (answers a second) as of its newest answer; None: not known."""
    if state.arrivals_at is None or state.first_seen is None:
        return None  # never counted (or a state of an earlier version): learned from the next answers
    tau = rule.no_data_rate_seconds
    seen_for = (state.arrivals_at - state.first_seen).total_seconds()
    if state.arrivals < rule.no_data_min_answers or seen_for < min(_DAY, tau):
        return None
    exposure = tau * -math.expm1(-seen_for / tau)  # the weighted time the weighted answers came in
    return _lower(state.arrivals) / exposure
