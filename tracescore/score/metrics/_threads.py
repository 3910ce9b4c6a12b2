"""The threads a plain-Python custom metric (`PythonMetric` over a `def`) runs its calls on.

Each metric has its own, at most `THREADS_PER_METRIC`, started as calls need them and ended after
`THREAD_IDLE_S` without a call. A call cannot be stopped once running (a thread cannot be killed), so a
hung function keeps its thread; what the threads bound is what such a function can hold: its threads, the
records of the calls they run, and the calls still awaited behind them (each until its caller's time limit;
one whose caller stopped waiting is dropped at once, its record with it). Once every thread runs a call past
its caller's time limit, nothing is queued behind them: `submit` refuses the call (`AllThreadsOverTime`) and
the metric says so in an ERROR result. Without a time limit (`timeout_s=None`) no call is ever past it: the
calls wait for a thread as long as their callers do, as asked.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["THREADS_PER_METRIC", "THREAD_IDLE_S", "AllThreadsOverTime", "DaemonThreads"]

# The threads a plain function runs on, per metric: calls beyond them wait (within the time limit), so a
# hung function holds at most this many threads.
THREADS_PER_METRIC = 8
# A thread with no call for this long ends: a metric no longer called (a notebook's evaluate(), a metric
# only some records reach) holds no thread; the next call starts one again.
THREAD_IDLE_S = 60.0


class AllThreadsOverTime(Exception):
    """Every one of the metric's threads runs a call past its caller's time limit: the call is not run."""


@dataclass(eq=False)  # identity: a call is taken off the queue as itself
class _Call:
    future: concurrent.futures.Future[Any]
    fn: Callable[[], Any]
    deadline: float | None  # when its caller stops waiting (monotonic); None: never


class DaemonThreads:
    """At most `size` daemon threads running one metric's plain function, started as calls need them, each
    ending after `idle_s` without a call. Daemon, unlike a ThreadPoolExecutor's, so a call that never
    returns stops neither asyncio.run() nor the process at exit (its result is not waited for); the loop's
    default executor is not used, so it cannot starve the offline judge, which runs there. A call cancelled
    while queued (its caller's time limit) is taken off the queue at once."""

    def __init__(self, name: str, size: int = THREADS_PER_METRIC, idle_s: float | None = None) -> None:
        self._name = name
        self._size = size
        self._idle_s = THREAD_IDLE_S if idle_s is None else idle_s
        self._ready = threading.Condition()
        # Under the condition's lock, in step: every thread is idle (waiting for a call, or just started)
        # or running one of `_running`, so `len(_waiting) - _idle` is the calls no thread will take.
        self._waiting: deque[_Call] = deque()
        self._running: set[_Call] = set()
        self._threads = 0
        self._idle = 0
        self._started = 0  # for the threads' names

    def submit(self, fn: Callable[[], Any], deadline: float | None) -> concurrent.futures.Future[Any]:
        """`fn` run on one of the threads; `deadline`: when its caller stops waiting (monotonic), None for
        never. Raises AllThreadsOverTime, queueing nothing, when every thread runs a call past its
        deadline: a hung function must not gather records behind it."""
        call = _Call(concurrent.futures.Future(), fn, deadline)
        with self._ready:
            if self._idle == 0 and len(self._running) >= self._size and self._all_over_time():
                raise AllThreadsOverTime
            self._waiting.append(call)
            if len(self._waiting) > self._idle and self._threads < self._size:
                self._threads += 1
                self._idle += 1  # counted from now: the next call does not start one more for this one
                self._started += 1
                threading.Thread(
                    target=self._serve, name=f"metric-{self._name}-{self._started}", daemon=True
                ).start()
            self._ready.notify()
        call.future.add_done_callback(lambda future: self._drop(call) if future.cancelled() else None)
        return call.future

    @property
    def threads(self) -> int:
        """The threads running now (idle ones included)."""
        with self._ready:
            return self._threads

    @property
    def running(self) -> int:
        """The calls running now."""
        with self._ready:
            return len(self._running)

    @property
    def waiting(self) -> int:
        """The calls waiting for a thread."""
        with self._ready:
            return len(self._waiting)

    def _all_over_time(self) -> bool:
        now = time.monotonic()
        return all(c.deadline is not None and c.deadline <= now for c in self._running)

    def _drop(self, call: _Call) -> None:
        """A call cancelled before a thread took it: off the queue, with its record."""
        with self._ready:
            if call in self._waiting:
                self._waiting.remove(call)

    def _serve(self) -> None:
        while (call := self._next()) is not None:
            if call.future.set_running_or_notify_cancel():
                try:
                    call.future.set_result(call.fn())
                except BaseException as exc:  # handed to the awaiting metric, which raises it
                    call.future.set_exception(exc)
            with self._ready:
                self._running.discard(call)
                self._idle += 1

    def _next(self) -> _Call | None:
        """The next call to run, or None once this thread waited `idle_s` for one (it then ends)."""
        with self._ready:
            while not self._waiting:
                if not self._ready.wait(self._idle_s) and not self._waiting:
                    self._idle -= 1
                    self._threads -= 1
                    return None
            call = self._waiting.popleft()
            self._idle -= 1
            self._running.add(call)
            return call
