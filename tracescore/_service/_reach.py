"""A broker outage said in a service's own words (`BrokerReach`), once per outage, so that an on-call reading
the logs tells it from a bug: kafka-python only logs its own rate-limited errors (connection refused, node
not ready, request timed out), none of which says what the service holds meanwhile or when it is back.

The signal is what the consumers' group membership already knows, read without a request: a member's
coordinator id, which kafka-python clears when its connection fails, its heartbeats go unanswered for the
session timeout, or a request to it times out, and sets again once a broker answers. A consumer whose
coordinator was never known (waiting for its topic to be created, not yet joined) says nothing either way.
It is looked at once a second on a thread of its own, not by the service's loop: during an outage the loop
sits in a broker call (a checkpoint waiting for its acknowledgements, a commit) for as long as it lasts, and
the loop's passes cost nothing for it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

__all__ = ["BrokerReach", "Reach"]

_CHECK_S = 1.0  # how often the coordinators are looked at
# Unknown this long before it is said: a coordinator moving to another broker, or a restarted broker
# loading its groups, is found again within a few seconds.
_GRACE_S = 5.0
_REPEAT_S = 60.0  # the warning again, with how long it lasts


class Reach:
    """What the coordinators say, decided on by `BrokerReach.seen` (apart, for its tests)."""

    def __init__(self, consumers: Sequence[Any]) -> None:
        self._consumers = consumers
        self._joined: set[int] = set()  # the consumers whose coordinator was once known

    def __call__(self) -> tuple[bool | None, float]:
        """(reachable: True when a coordinator is known, False when every joined consumer's is not, None when
        none has joined yet; the last answer to a heartbeat, time.monotonic, -inf when none)."""
        reachable: bool | None = None
        last_answer = -math.inf
        for n, consumer in enumerate(self._consumers):
            coordinator = getattr(consumer, "_coordinator", None)  # kafka-python's: None if it changes
            if coordinator is None:
                continue
            heartbeat = getattr(coordinator, "heartbeat", None)
            last_answer = max(last_answer, getattr(heartbeat, "last_receive", -math.inf))
            if getattr(coordinator, "coordinator_id", None) is not None:
                self._joined.add(n)
                reachable = True
            elif n in self._joined and reachable is None:
                reachable = False
        return reachable, last_answer


class BrokerReach:
    """While `watching()`, says once per outage: a WARNING `the Kafka broker is unreachable since HH:MM:SS`
    with what the service does meanwhile (`meanwhile()`, called on the watching thread: it reads counts),
    the same every minute while it lasts, and an INFO `the Kafka broker is reachable again after N s` when
    it is back."""

    def __init__(
        self,
        log: logging.Logger,
        service: str,
        bootstrap: str,
        reach: Callable[[], tuple[bool | None, float]],
        meanwhile: Callable[[], str],
        *,
        retry_s: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._log, self._service, self._bootstrap = log, service, bootstrap
        self._reach, self._meanwhile, self._retry_s = reach, meanwhile, retry_s
        self._clock, self._wall = clock, wall
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None
        self._unknown_from: float | None = None  # when the coordinators were first seen unknown (monotonic)
        self._since: float | None = None  # the outage said: from when (monotonic)
        self._said_at = -math.inf
        self.outages = 0  # said so far

    @property
    def unreachable(self) -> bool:
        """Whether an outage is being said (the broker unreachable for the grace at least)."""
        return self._since is not None

    def start(self) -> None:
        """Look at the coordinators once a second, on a thread of its own, until `stop()`."""
        done = self._done = threading.Event()

        def watch() -> None:
            while not done.wait(_CHECK_S):
                try:
                    self.seen(*self._reach(), self._clock())
                except Exception as exc:  # a client closing under it: the outage goes unsaid, nothing else
                    self._log.debug("looking whether the broker answers: %r", exc)

        self._watcher = threading.Thread(target=watch, name="tracescore-broker-reach", daemon=True)
        self._watcher.start()

    def stop(self) -> None:
        """Stop looking (before the clients close: a closed one has no coordinator)."""
        if self._watcher is not None:
            self._done.set()
            self._watcher.join(2 * _CHECK_S)
            self._watcher = None

    @contextmanager
    def watching(self) -> Iterator[None]:
        """`start()` for the block."""
        self.start()
        try:
            yield
        finally:
            self.stop()

    def seen(self, reachable: bool | None, last_answer: float, now: float) -> None:
        if reachable is None:
            return
        if reachable:
            self._unknown_from = None
            if self._since is not None:
                self._log.info(
                    "the Kafka broker is reachable again after %.0fs (bootstrap %s): %s goes on where it was",
                    now - self._since,
                    self._bootstrap,
                    self._service,
                )
                self._since = None
            return
        if self._unknown_from is None:
            self._unknown_from = now
        if self._since is None:
            if now - self._unknown_from < _GRACE_S:
                return
            # Since its last answer: the coordinator is cleared only once a heartbeat or a request times out.
            self._since = last_answer if last_answer > -math.inf else self._unknown_from
            self.outages += 1
        elif now - self._said_at < _REPEAT_S:
            return
        self._said_at = now
        since = datetime.fromtimestamp(self._wall() - (now - self._since)).strftime("%H:%M:%S")
        self._log.warning(
            "the Kafka broker is unreachable since %s, for %.0fs (bootstrap %s: no group coordinator "
            "answers): meanwhile %s %s; it retries on its own (kafka-python reconnects with a backoff of "
            "%gs at most; its connection errors in the log are this outage) and nothing is lost",
            since,
            now - self._since,
            self._bootstrap,
            self._service,
            self._meanwhile(),
            self._retry_s,
        )
