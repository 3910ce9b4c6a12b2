"""A broker call the service waits for only so long, and no longer once a stop is asked for; and the one
budget every step of a stop shares.

Some kafka-python calls take no timeout: a fresh metadata look (`KafkaConsumer.topics()`) waits out the
client's reconnect backoff (growing to 30 s) or its request timeout (30 s) while the broker does not answer.
No signal interrupts such a call, so a stop asked for during it would wait longer than `stop_timeout_s`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaError, KafkaTimeoutError

from tracescore._kafka import BROKER_WAIT_S

__all__ = [
    "BROKER_WAIT_S",
    "STOP_CHECK_S",
    "BoundedCall",
    "ClosedAtStop",
    "StopBudget",
    "poll_or_nothing",
    "why",
]

T = TypeVar("T")
C = TypeVar("C", KafkaConsumer, KafkaAdminClient)
_log = logging.getLogger("tracescore")

# A stop interrupts the waits that `BoundedCall` runs; the other broker calls (BROKER_WAIT_S at most each) are
# part of the services' stop budget.
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
        """The call's result (its exception raised here); KafkaTimeoutError when given up on, and at once,
        without starting it, when `stopping()` already: a call started after the stop (a client made, a
        connection opened) would outlive it by a broker wait."""
        if self._under_way is None:
            if stopping():
                raise KafkaTimeoutError(f"{self.what}: not started, a stop was asked for")
            self._under_way = _Run(self._call, f"tracescore: {self.what}")
        run = self._under_way
        deadline = time.monotonic() + timeout_s
        while not run.done.wait(STOP_CHECK_S):
            if stopping():
                raise KafkaTimeoutError(f"{self.what}: given up on, a stop was asked for")
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"{self.what}: no answer within {timeout_s:g}s")
        self._under_way = None
        return run.result()


class ClosedAtStop(Generic[C]):
    """One kafka-python client made when first needed, on the thread of a call a stop may give up on (a look,
    a restore's read, the stream time's update), and closed by the stop from the service's thread: a call
    on it that waits for a broker that does not answer then fails at once (closing the client fails what its
    IO loop was waited on for), so the thread ends with the stop rather than a broker wait later. A client
    made while the stop came (its first connection waits BROKER_WAIT_S at most: `make` passes it) is closed
    as soon as made, never used; none is made after it (KafkaTimeoutError)."""

    def __init__(self, make: Callable[[], C], what: str) -> None:
        self._make = make
        self.what = what
        self._client: C | None = None
        self._closed = False
        self._lock = threading.Lock()  # made on a call's thread, closed from the service's

    def get(self) -> C:
        """The client, made on the first call (KafkaTimeoutError once closed)."""
        client = self._client
        if client is not None:
            return client
        if self._closed:
            raise KafkaTimeoutError(f"{self.what}: closed, a stop was asked for")
        made = self._make()
        with self._lock:
            if not self._closed:
                self._client = made
                return made
        _close(made)
        raise KafkaTimeoutError(f"{self.what}: closed while it connected, a stop was asked for")

    def close(self) -> None:
        """Close the client (if made) and make none again; KafkaError of its close is the caller's."""
        with self._lock:
            self._closed = True
            client, self._client = self._client, None
        if client is not None:
            _close(client)


def _close(client: KafkaConsumer | KafkaAdminClient) -> None:
    """Closed without waiting for anything: the stop's own steps are bounded by its budget, not by this."""
    if isinstance(client, KafkaConsumer):
        client.close(autocommit=False, timeout_ms=0)
    else:
        client.close()


class StopBudget:
    """The one deadline every step of a stop shares: `timeout_s`, counted from the signal (`start()`, safe
    from a signal handler; a stop for another reason starts it when the loop ends). Each step waits what is
    left, less what it keeps for the steps after it (`until`), so the whole stop fits however the time is
    spent.
    `waiting_on` names the step under way, for a line that says what a stop that ran out was waiting on."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self._clock = clock
        self.started_at: float | None = None
        self.waiting_on = "the broker"

    def start(self) -> None:
        if self.started_at is None:
            self.started_at = self._clock()

    @property
    def deadline(self) -> float | None:
        """When the budget runs out (the clock's time); None before the stop."""
        return None if self.started_at is None else self.started_at + self.timeout_s

    def until(self, most_s: float, keep_s: float = 0.0) -> float:
        """How long a step may wait now: at most `most_s` (its own limit), and no longer than what the budget
        has left less `keep_s` (what the steps after it are kept); `most_s` before the stop."""
        deadline = self.deadline
        if deadline is None:
            return most_s
        return max(0.0, min(most_s, deadline - keep_s - self._clock()))

    @contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """`what` is what the block waits on (the broker, a receiver), while it runs."""
        before, self.waiting_on = self.waiting_on, what
        try:
            yield
        finally:
            self.waiting_on = before


class _Run(Generic[T]):
    def __init__(self, call: Callable[[], T], name: str) -> None:
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

        threading.Thread(target=run, name=name, daemon=True).start()

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


def why(exc: BaseException) -> str:
    """Why a broker call failed, in words for the stop's line (a timeout's own text says nothing)."""
    if isinstance(exc, KafkaTimeoutError):
        return "no broker answered in time"
    return str(exc).splitlines()[0][:160] or type(exc).__name__
