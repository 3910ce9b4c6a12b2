"""Backpressure: stop fetching while the judges are behind, without leaving the group.

Past `max_in_flight` interactions pending (being scored or queued) the assigned partitions are paused;
polling goes on, so heartbeats and `max.poll.interval.ms` are kept. They resume at half, so a queue hovering
at the limit does not flap.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Hashable

from kafka import KafkaConsumer

from tracescore._plural import counted

__all__ = ["Pauser"]

_log = logging.getLogger("tracescore.consume")


class Pauser:
    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.paused = False
        self.pauses = 0  # how many times it paused

    def update(self, pending: int) -> bool:
        """Whether the partitions should be paused with `pending` interactions not yet scored."""
        if not self.paused and pending >= self.max_in_flight:
            self.paused = True
            self.pauses += 1
            _log.debug("pausing partitions: %s pending", counted(pending, "interaction"))
        elif self.paused and pending <= self.max_in_flight // 2:
            self.paused = False
        return self.paused

    def apply(self, consumer: KafkaConsumer, pending: int, reading_again: Collection[Hashable] = ()) -> None:
        """`reading_again`: partitions still reading what their previous owner left (bounded: it had it
        buffered), never paused, so their handed-over traces go on as soon as they are read."""
        was = self.paused
        if self.update(pending):
            # Re-applied every loop: a rebalance gives back partitions unpaused.
            assigned = consumer.assignment()
            consumer.pause(*(tp for tp in assigned if tp not in reading_again))
            if reading_again:
                consumer.resume(*(tp for tp in assigned if tp in reading_again))
        elif was:
            consumer.resume(*consumer.assignment())
