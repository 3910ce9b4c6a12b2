"""The stop's backstop, every service's (`tracescore consume`, `alert`, `conversations`): a wait still under
way when the stop's budget has run out (a broker call no signal interrupts, a judge's loop held by a call that
blocks it) does not hold the process. `OVERDUE_S` past the budget, counted from the signal, the process exits
with `OVERDUE_EXIT` and one line: what the stop was waiting on (`StopBudget.waiting_on`) and what it leaves,
as a crash at that point would (the services' every step of a stop is safe to die at: nothing is lost)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tracescore._service._bounded import StopBudget

__all__ = ["OVERDUE_EXIT", "OVERDUE_S", "OverdueExit"]

OVERDUE_S = 2.0  # past the stop's budget, a stop still waiting exits all the same
OVERDUE_EXIT = 1  # the exit status then: the closing steps did not run


class OverdueExit:
    """Armed at the stop's signal (`arm()`, after `budget.start()`; safe from a signal handler), and only
    while the service's run() runs (`running()`): a stop asked of a service embedded in another process
    before or after its run (a test's) never ends that process. `setting` names the budget as the service's
    user sets it (`--stop-timeout`, `stop_timeout_s`); `leaves` says what exiting then leaves undone, after
    "exiting "."""

    def __init__(self, budget: StopBudget, log: logging.Logger, *, setting: str, leaves: str) -> None:
        self._budget = budget
        self._log = log
        self._setting = setting
        self._leaves = leaves
        self._timer: threading.Timer | None = None
        self._running = False
        self._returned = False

    def arm(self) -> None:
        if self._running and not self._returned and self._timer is None:
            self._timer = threading.Timer(self._budget.timeout_s + OVERDUE_S, self._exit_overdue)
            self._timer.daemon = True
            self._timer.start()

    @contextmanager
    def running(self) -> Iterator[None]:
        """The service's run(): the only time an overdue stop may end the process."""
        self._running = True
        try:
            yield
        finally:
            self._returned = True
            if self._timer is not None:
                self._timer.cancel()

    def _exit_overdue(self) -> None:
        if self._returned:
            return
        self._log.warning(
            "stopping: %s (%gs) passed waiting on %s: exiting %s",
            self._setting,
            self._budget.timeout_s,
            self._budget.waiting_on,
            self._leaves,
        )
        os._exit(OVERDUE_EXIT)  # the log handlers flush each line
