"""A broker call the service waits for only so long, and no longer once a stop is asked for.

Some kafka-python calls take no timeout: a fresh metadata look (`KafkaConsumer.topics()`) waits out the
client's reconnect backoff (growing to 30 s) or its request timeout (30 s) while the broker does not answer.
No signal interrupts such a call, so a stop asked for during it would wait longer than `stop_timeout_s`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError, KafkaTimeoutError

__all__ = ["BROKER_WAIT_S", "STOP_CHECK_S", "BoundedCall", "poll_or_nothing"]

T = TypeVar("T")
_log = logging.getLogger("tracescore")

# The longest one broker call of a tick may take (a look for the state topic, the stream time's reads). A
# stop interrupts the waits that `BoundedCall` runs; the others are part of the services' stop_timeout_s.
BROKER_WAIT_S = 10.0
STOP_CHECK_S = 0.1  # how often a wait on another thread looks whether a stop (or its deadline) came


class BoundedCall(Generic[T]):
    """`call()` on a daemon thread, waited for at most `timeout_s` and no longer once `stopping()`. A call
    given up on still runs to its end: until then, the next one waits for it instead of calling the client
    twice at once."""

    def __init__(self, call: Callable[[], T], what: str) -> None:
        self._call = call
        self.what = what
        self._under_way: _Run[T] | None = None

    def __call__(self, stopping: Callable[[], bool] = lambda: False, timeout_s: float = BROKER_WAIT_S) -> T:
        """The call's result (its exception raised here); KafkaTimeoutError when given up on."""
        if self._under_way is None:
            self._under_way = _Run(self._call)
        run = self._under_way
        deadline = time.monotonic() + timeout_s
        while not run.done.wait(STOP_CHECK_S):
            if stopping():
                raise KafkaTimeoutError(f"{self.what}: given up on, a stop was asked for")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{self.what}: no answer within {timeout_s:g}s")
        self._under_way = None
        return run.result()


class _Run(Generic[T]):
    def __init__(self, call: Callable[[], T]) -> None:
        self.done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None

        def run() -> None:
            try:
                self._value = call()
            except BaseException as exc:  # handed to the caller that waits for it
                self._error = exc
            finally:
                self.done.set()

        threading.Thread(target=run, name="tracescore-bounded-call", daemon=True).start()

    def result(self) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]


def poll_or_nothing(consumer: KafkaConsumer, timeout_ms: int) -> dict[TopicPartition, list[ConsumerRecord]]:
    """`consumer.poll`, or nothing when the broker does not answer: kafka-python raises the group
    coordinator's lookup failing (the broker restarting, or gone before a stop) from `poll`, and the service
    must poll again, not end. Errors that will not pass (a group that rebalances the other way) are raised."""
    try:
        return consumer.poll(timeout_ms=timeout_ms)
    except KafkaError as exc:
        if not exc.retriable:
            raise
        _log.debug("poll: %s; polling again", exc)
        # What the poll would have waited: no busy loop while the broker is away.
        time.sleep(timeout_ms / 1000)
        return {}
