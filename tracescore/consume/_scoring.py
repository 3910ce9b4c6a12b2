"""Scoring off the Kafka thread: judges run on an asyncio loop in a thread of their own.

The Kafka thread keeps polling (heartbeats, `max.poll.interval.ms`) while judges run, submits interactions
here and collects finished ones; kafka-python's consumer is not thread-safe, so it never leaves that thread.
Results come back through `concurrent.futures.Future`s, so the Kafka thread never blocks on a judge.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["CLOSE_S", "ScoringWorker"]

T = TypeVar("T")
CLOSE_S = 30.0  # how long close() waits for the loop to end when no stop budget says less


class _DaemonCalls(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor (`asyncio.to_thread`, `run_in_executor(None, ...)`): each call on a daemon
    thread of its own. A ThreadPoolExecutor's threads are joined at the interpreter's exit, so a metric's
    blocking call handed to one that never returns would hold the process after its stop, past any budget
    (the backstop ends with run()); a daemon thread ends with the process."""

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # handed to the awaiting coroutine
                future.set_exception(exc)

        threading.Thread(target=call, name="tracescore-scoring-call", daemon=True).start()
        return future


class ScoringWorker:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.set_default_executor(_DaemonCalls(max_workers=1))  # max_workers: unused, no pool
        self._cancelled: concurrent.futures.Future[None] | None = None  # close()'s cancel, once asked for
        self._thread = threading.Thread(target=self._loop.run_forever, name="tracescore-scoring", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def close(self, timeout_s: float = CLOSE_S) -> bool:
        """Cancel what is still running and stop the loop, waiting `timeout_s` at most in all (callers drain
        first if they want results). Returns whether the loop ended: False when a call holds it (a metric's
        async function that blocks, a judge call in C code a cancel cannot interrupt), and the thread is
        left behind with what it was scoring (a daemon: it does not hold the process at exit)."""

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # As asyncio.run does: this closes the clients judges built for this loop (and their sockets).
            await asyncio.get_running_loop().shutdown_asyncgens()

        deadline = time.monotonic() + timeout_s
        if self._cancelled is None and self._loop.is_running():
            self._cancelled = asyncio.run_coroutine_threadsafe(cancel_all(), self._loop)
            # Whatever comes of the cancel, the loop stops once it gets to it (if ever).
            self._cancelled.add_done_callback(lambda _: self._loop.call_soon_threadsafe(self._loop.stop))
        if self._cancelled is not None:  # asked for now, or by a close that gave up on it
            try:
                self._cancelled.result(timeout=timeout_s)
            except concurrent.futures.TimeoutError:
                return False
        self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            return False
        self._loop.close()
        return True
