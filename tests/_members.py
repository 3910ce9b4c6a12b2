"""A test's own member of a service's consumer group (a stand-in for another instance, a lagging or a
crashed one): a raw kafka-python consumer that joins through the services' guards (`GuardedJoins`), as
every member of theirs does. kafka-python 3.0.12 can leave a join undone between two polls (a rejoin a
metadata change started, a join that completed while no poll waited): the member then stays
"rebalancing", its heartbeats off, until the group drops it, and the test reads a group that is not the one
it set up. tests/test_members_guarded.py checks that no test subscribes a raw consumer itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from _helpers import wait_until
from kafka import KafkaConsumer

from tracescore._kafka import RebalanceListener
from tracescore._service._awaited import GuardedJoins

__all__ = ["GuardedMember"]


class GuardedMember:
    """`consumer` (made with a `group_id`, no topics) subscribed to `topics` once its own metadata holds
    their partitions, as the services subscribe (a member that joins on metadata without them is assigned
    none of them and never rebalances again); `poll` waits for any join under way."""

    def __init__(
        self, consumer: KafkaConsumer, *topics: str, stopping: Callable[[], bool] = lambda: False
    ) -> None:
        for topic in topics:
            wait_until(lambda t=topic: bool(consumer.partitions_for_topic(t)), f"{topic}'s partitions known")
        self.consumer = consumer
        self._joins = GuardedJoins(consumer, stopping)
        listener = RebalanceListener(logging.getLogger("tracescore"), assigned=_ignored, revoked=_ignored)
        self._joins.subscribe(list(topics), listener)

    def poll(self, timeout_ms: int) -> dict[Any, Any]:
        self._joins.before_poll()
        return self.consumer.poll(timeout_ms=timeout_ms)

    def assignment(self) -> set[Any]:
        return self.consumer.assignment()

    def close(self) -> None:
        self.consumer.close(autocommit=False)


def _ignored(_: object) -> None:
    pass
