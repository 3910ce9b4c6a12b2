"""Scoring off the Kafka thread: judges run on an asyncio loop in a thread of their own.

The Kafka thread keeps polling (heartbeats, `max.poll.interval.ms`) while judges run, submits interactions
here and collects finished ones; kafka-python's consumer is not thread-safe, so it never leaves that thread.
Results come back through `concurrent.futures.Future`s, so the Kafka thread never blocks on a judge.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["ScoringWorker"]

T = TypeVar("T")


class ScoringWorker:
    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="tracescore-scoring", daemon=True)
        self._thread.start()

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def close(self) -> None:
        """Cancel what is still running and stop the loop (callers drain first if they want results)."""

        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            # As asyncio.run does: this closes the clients judges built for this loop (and their sockets).
            await asyncio.get_running_loop().shutdown_asyncgens()

        if self._loop.is_running():
            asyncio.run_coroutine_threadsafe(cancel_all(), self._loop).result(timeout=30)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._loop.is_running():
            self._loop.close()
