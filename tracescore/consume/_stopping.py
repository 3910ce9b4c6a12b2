"""How a stop of `tracescore consume` spends its one budget, `stop_timeout_s` counted from the signal:

    drain (judge calls being scored) -> cancelling the judge calls left -> acknowledgements of the outputs
        sent -> the last commit -> closing the producer, leaving the group -> closing the other sinks
        (Phoenix), with what is left

Each step waits at most its own limit (`drain_timeout_s`, `ack_timeout_s`, `close_timeout_s`) and never into
what the steps after it are kept: a tenth of the budget each (at most `close_timeout_s`), half of it for the
producer and half for leaving the group; cancelling the judge calls shares the acknowledgements' (half of it
at most when the drain took all it may: a cancel takes milliseconds unless a call blocks the judges' loop,
and then no wait ends it). With the broker up every later step takes well under a second; with
it gone each gives up at its share, says what it leaves for the next start, and the stop ends within the
budget. The budget is the service base's `StopBudget` (alert and conversations spend theirs in
_service/_loop.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from tracescore._service import BROKER_WAIT_S, StopBudget
from tracescore.consume._scoring import CLOSE_S
from tracescore.consume._settings import ConsumerSettings

__all__ = ["StopPlan", "Wait"]

# After the drain: cancelling the judge calls left with the acknowledgements, the last commit, the producer
# and leaving the group.
_LATER_STEPS = 3
_STEP_SHARE = 0.1  # of the budget, kept for each later step (at most close_timeout_s)


@dataclass(frozen=True)
class Wait:
    """How long a step of the stop may wait, and which limit says so (for the line of a step that ran out)."""

    s: float
    by: str

    def __str__(self) -> str:
        return f"{self.s:.1f}s, {self.by}"


class StopPlan:
    """The steps' shares of one stop budget; `start()` at the signal (safe from a signal handler)."""

    def __init__(self, settings: ConsumerSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._clock = clock
        self.budget = StopBudget(settings.stop_timeout_s, clock)
        self._step_s = min(settings.close_timeout_s, settings.stop_timeout_s * _STEP_SHARE)

    def start(self) -> None:
        self.budget.start()

    def drain_deadline(self) -> tuple[float, str]:
        """When the drain gives up on the judge calls still running (the clock's time), and which limit says
        so; call once the stop has started."""
        started = self.budget.started_at
        deadline = self.budget.deadline
        assert started is not None and deadline is not None, "the stop has not started"
        own = started + self._settings.drain_timeout_s
        shared = deadline - _LATER_STEPS * self._step_s
        if own <= shared:
            return own, f"--drain-timeout {self._settings.drain_timeout_s:g}s"
        return shared, self._rest("the drain")

    def broker_call(self) -> float:
        """A broker call of the loop (a periodic commit, reading a handover): BROKER_WAIT_S, and while the
        stop drains no longer than the drain may last."""
        return self.budget.until(BROKER_WAIT_S, keep_s=_LATER_STEPS * self._step_s)

    def cancelling(self) -> Wait:
        """Cancelling the judge calls the drain left (ScoringWorker.close): at most CLOSE_S, and half of the
        acknowledgements' share once the drain took all of its own."""
        return self._wait(CLOSE_S, "the cancel's own limit", (_LATER_STEPS - 0.5) * self._step_s)

    def acknowledgements(self) -> Wait:
        return self._wait(self._settings.ack_timeout_s, "--ack-timeout", 2 * self._step_s)

    def last_commit(self) -> Wait:
        return self._wait(self._settings.close_timeout_s, "--close-timeout", self._step_s)

    def producer_close(self) -> Wait:
        return self._wait(self._settings.ack_timeout_s, "--ack-timeout", self._step_s / 2)

    def leaving(self) -> Wait:
        return self._wait(self._settings.close_timeout_s, "--close-timeout", 0.0)

    def sinks(self) -> Wait:
        """Closing the other sinks (Phoenix), the last step: whatever the budget has left, nothing kept for
        it (with the broker up the steps before take well under a second; gone, they leave it nothing)."""
        return Wait(self.budget.until(math.inf), self._rest("closing the sinks"))

    def _wait(self, own_s: float, own: str, keep_s: float) -> Wait:
        seconds = self.budget.until(own_s, keep_s)
        if round(seconds, 1) >= own_s:  # as the line shows it: "10.0s" is the step's own limit
            return Wait(own_s, own)
        return Wait(seconds, self._rest("this step"))

    def _rest(self, step: str) -> str:
        return f"what --stop-timeout {self._settings.stop_timeout_s:g}s left {step}"
