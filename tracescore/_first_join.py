"""kafka-python's "No partition metadata for topic X" at a member's first join, said our way.

A member subscribes, then joins its group at once; when it leads the group its assignor runs on its own
metadata, which may not show a topic yet (created or found moments before, by this process or another:
`wait_for_partitions` asks with a separate client). The assignor then warns "No partition metadata for topic
X" and assigns none of X; the member's next metadata shows it and the group rebalances at once. Nothing is
wrong and nothing is to do, yet the warning reads like a broken setup at every first start.

So from `expect(topics)` (just before subscribing) until the member is given partitions of a topic
(`joined`), or `FIRST_JOIN_S` at most, that warning for that topic becomes one debug line of ours. Any other
time (a topic deleted while running, another member subscribing to a topic this one does not know) it stays
kafka-python's warning, as it is.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable

__all__ = ["FIRST_JOIN_S", "FirstJoin", "first_join"]

_log = logging.getLogger("tracescore")

FIRST_JOIN_S = 120.0  # how long after subscribing a missing topic still counts as a first join
_NO_METADATA = "No partition metadata for topic "
# Where kafka-python's assignors log it (each its module's logger): a filter on a logger sees only the
# records logged on that logger itself.
_ASSIGNOR_LOGGERS = (
    "kafka.coordinator.assignors.range",
    "kafka.coordinator.assignors.roundrobin",
    "kafka.coordinator.assignors.sticky.sticky_assignor",
)


class FirstJoin(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._until: dict[str, float] = {}  # topic -> when its first join stops counting (monotonic)
        self._lock = threading.Lock()  # the client's threads log; subscribe and the listener update

    def expect(self, topics: Iterable[str]) -> None:
        """`topics` are about to be subscribed: the first join's warning about them is expected."""
        for name in _ASSIGNOR_LOGGERS:
            logger = logging.getLogger(name)
            if self not in logger.filters:
                logger.addFilter(self)
        until = time.monotonic() + FIRST_JOIN_S
        with self._lock:
            self._until.update(dict.fromkeys(topics, until))

    def joined(self, topics: Iterable[str]) -> None:
        """The member was given partitions of `topics`: a warning about them from now on is a real one."""
        with self._lock:
            for topic in topics:
                self._until.pop(topic, None)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(_NO_METADATA):
            return True
        topic = message.removeprefix(_NO_METADATA).strip()
        with self._lock:
            until = self._until.get(topic)
        if until is None or time.monotonic() > until:
            return True
        _log.debug(
            "topic %s is not in this member's metadata yet as it first joins its group (the topic was "
            "created or found moments ago): its partitions come at the rebalance that follows at once",
            topic,
        )
        return False


# One per process: logging is.
first_join = FirstJoin()
