"""When the loop stops taking work and when `run()` returns: the run state, the idle timeout, `max_records`,
the drain timeout after stop().

Reads the loop's parts (what is queued, scored, settling, paused) and never calls Kafka itself: whether
every partition is read to its end and whether the broker is there are handed in (`at_end`, `probe`), so
its decisions run on a fake clock without a broker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from enum import Enum

from tracescore._plural import counted
from tracescore.consume._checkpoint import Checkpoint
from tracescore.consume._judging import Judging
from tracescore.consume._pauser import Pauser
from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._status import ConsumerStats
from tracescore.consume._stopping import StopPlan

__all__ = ["Lifecycle", "RunState"]

_log = logging.getLogger("tracescore.consume")
_BROKER_PROBE_S = 5.0  # after the idle timeout, probe the broker at most this often


class RunState(Enum):
    RUNNING = "running"  # polling, scoring, committing
    FINISHING = "finishing"  # idle timeout or max_records: no more polling; score everything taken, return
    STOPPING = "stopping"  # stop(): finish only what is being scored (within the drain's share), return


class Lifecycle:
    """Owned by the Kafka thread, except `stop()` (safe from a signal handler). `assigned_at` says when the
    first partitions were assigned (monotonic, None before); `at_end`, whether every assigned partition is
    read to its end; `probe` raises BrokerUnreachable when no broker answers."""

    def __init__(
        self,
        settings: ConsumerSettings,
        judging: Judging,
        checkpoint: Checkpoint,
        pauser: Pauser,
        stats: ConsumerStats,
        *,
        assigned_at: Callable[[], float | None],
        at_end: Callable[[], bool],
        probe: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._judging = judging
        self._checkpoint = checkpoint
        self._pauser = pauser
        self._stats = stats
        self._assigned_at = assigned_at
        self._at_end = at_end
        self._probe = probe
        self._clock = clock
        self.state = RunState.RUNNING
        self._stop_requested = False
        self._drain_deadline = float("inf")
        self._drain_limit = ""
        self.stop_plan = StopPlan(settings, clock)  # the stop's one budget, counted from the signal
        self._last_message: float | None = None
        self._busy_at = 0.0  # last time the loop had work in hand, for --idle-timeout
        self._probed_at = 0.0

    def stop(self) -> None:
        self.stop_plan.start()
        self._stop_requested = True

    @property
    def busy(self) -> bool:
        """Interactions pending or outputs not yet acknowledged: poll briefly, results are coming."""
        return bool(self._judging.pending or self._checkpoint.settling)

    def check_stop(self) -> None:
        """After stop(): no more polling, and the traces not started are dropped (left uncommitted, read
        again by the partitions' next owner); those being scored finish, whole, within the drain's share of
        the stop budget (StopPlan)."""
        if self._stop_requested and self.state is RunState.RUNNING:
            self.state = RunState.STOPPING
            self._drain_deadline, self._drain_limit = self.stop_plan.drain_deadline()
            self._judging.drop_unstarted()
            _log.info("stopping: finishing %s being scored", counted(self._judging.pending, "interaction"))

    def went_idle(self, polled: bool) -> bool:
        """Whether the stream just went idle (the loop then releases the buffered traces and finishes).
        Call after taking what was polled: decoding a large batch is not time without messages."""
        if polled:
            self._last_message = self._clock()
            return False
        if self.state is not RunState.RUNNING or not self._idle() or not self._nothing_left():
            return False
        self.state = RunState.FINISHING
        _log.info("no message for %.1fs; finishing the buffered traces", self._settings.idle_timeout_s)
        return True

    def done(self) -> bool:
        """Whether run() returns now: finishing with nothing left, or stopping with nothing being scored
        (or past the drain's share of the stop budget). Past `max_records` interactions handled, it starts
        finishing."""
        state = self.state
        if state is RunState.RUNNING:
            limit = self._settings.max_records
            if limit and self._stats.handled >= limit:
                self.state = state = RunState.FINISHING
            else:
                return False
        left = self._judging.running or self._checkpoint.settling
        if state is RunState.FINISHING and not (left or self._judging.queued):
            return True
        if state is RunState.STOPPING:
            if not (left or self._judging.queued):  # the rest of a trace being scored is queued
                return True
            if self._clock() > self._drain_deadline:
                one = self._judging.running == 1
                _log.warning(
                    "stopping: %s still being scored when the drain ran out (%s) %s not committed: the next "
                    "start reads and scores %s again (at least once, nothing lost)",
                    counted(self._judging.running, "interaction"),
                    self._drain_limit,
                    "is" if one else "are",
                    "it" if one else "them",
                )
                return True
        return False

    def _idle(self) -> bool:
        timeout = self._settings.idle_timeout_s
        assigned_at = self._assigned_at()
        if timeout is None or assigned_at is None:
            return False
        if self._judging.pending or self._pauser.paused:
            # Busy (or paused, so nothing could be read): idleness starts when the work is done.
            self._busy_at = self._clock()
            return False
        since = max(self._last_message or 0.0, assigned_at, self._busy_at)
        return self._clock() - since >= timeout

    def _nothing_left(self) -> bool:
        """After the idle timeout: idle means every partition is read to its end, not a slow first fetch on a
        loaded machine; and a broker that is gone is an error (BrokerUnreachable), never a clean stop."""
        now = self._clock()
        if now - self._probed_at >= _BROKER_PROBE_S:
            self._probed_at = now
            self._probe()
        return self._at_end()
