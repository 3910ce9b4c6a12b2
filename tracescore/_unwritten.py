"""kafka-python's "Topic X not found in cluster metadata" while a reader waits for a topic no writer created
yet, said once our way.

A reader never creates the topic it reads (a misspelt name would be left on the broker): subscribed to one
that does not exist yet, it waits for its writer (the SDK, a Collector, `tracescore consume`) and says so in
one warning of its own. Meanwhile every metadata refresh of kafka-python's (each `metadata_max_age_ms`,
30 s) finds the topic missing and logs it as an ERROR on `kafka.cluster`, which reads like a failure.

So from `expect(waiter, topics)` (just before subscribing to topics found absent) until the waiter is
given partitions of a topic (`found`), or the waiter is gone, exactly that record about that topic is
dropped. The logger's level is left alone: `kafka.cluster` also says a topic was recreated, or that the
client may not read it. Any other time (a topic deleted while read) the ERROR stays kafka-python's.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterable

__all__ = ["NOT_FOUND", "Unwritten", "unwritten"]

NOT_FOUND = "Topic %s not found in cluster metadata"  # kafka.cluster's format, matched exactly
_LOGGER = "kafka.cluster"


class Unwritten(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        # waiter (a rebalance listener) -> the topics it waits for; a waiter gone (its service dropped
        # without ever being given them) waits no more.
        self._waiting: weakref.WeakKeyDictionary[object, set[str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # the clients' threads log; subscribing and the listener update

    def expect(self, waiter: object, topics: Iterable[str]) -> None:
        """`waiter` subscribes to `topics`, which no writer created yet: their not-found ERROR is expected."""
        wanted = set(topics)
        if not wanted:
            return
        logger = logging.getLogger(_LOGGER)
        if self not in logger.filters:
            logger.addFilter(self)
        with self._lock:
            self._waiting.setdefault(waiter, set()).update(wanted)

    def found(self, waiter: object, topics: Iterable[str]) -> None:
        """`waiter` was given partitions of `topics`: they exist, an ERROR about them is a real one now."""
        with self._lock:
            left = self._waiting.get(waiter)
            if left is not None:
                left.difference_update(topics)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != NOT_FOUND or not isinstance(record.args, tuple) or len(record.args) != 1:
            return True
        with self._lock:
            awaited = any(record.args[0] in topics for topics in self._waiting.values())
        return not awaited


# One per process: logging is.
unwritten = Unwritten()
