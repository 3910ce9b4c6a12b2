"""A group member's subscription to inputs that their writers create: never to a topic that does not exist.

Two members of one group subscribed to a topic not created yet, and the topic appearing, left one of them
out of the group for good under load (kafka-python 3.0.12: a leader whose assignment ran on metadata without
the topic's partitions rejoins as soon as its metadata shows them, and a member whose own metadata does not
show them yet assigns none when it leads the next generation, so generations follow each other while the
metadata of each member catches up; one member, elected leader of such a generation, never completed it,
was dropped (UnknownMemberIdError when it left) and never rejoined).
So a member subscribes only to the inputs that exist, looks for the others every `LOOK_EVERY_S` (on a
separate client that never creates them, off the poll thread so a stop is never kept waiting) and extends
its subscription when one appears, its own metadata brought up to date first: its join, and its assignment
when it leads, see every partition of every topic it subscribes to, and no topic appears mid-rebalance.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer
from kafka.errors import KafkaError, KafkaTimeoutError

from tracescore._kafka import BROKER_WAIT_S, RebalanceListener, not_creating_topics, subscribe_topics
from tracescore._service._bounded import BoundedCall

__all__ = ["LOOK_EVERY_S", "AwaitedInputs"]

_log = logging.getLogger("tracescore")

LOOK_EVERY_S = 1.0  # how often a member looks for the inputs no writer created yet


class AwaitedInputs:
    """`consumer` subscribed to those of `topics` that exist; `absent` (`ready_to_read`) waited for, each
    added to the subscription once it exists (`look`, before each poll)."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        topics: Sequence[str],
        listener: RebalanceListener,
        absent: Collection[str],
        client_config: Mapping[str, Any],
    ) -> None:
        self._consumer = consumer
        self._listener = listener
        self._present = [t for t in topics if t not in absent]
        self._absent = [t for t in topics if t in absent]
        self._client_config = dict(client_config)
        self._looking = BoundedCall(self._existing, "looking for the inputs not written yet")
        self._next_look = time.monotonic() + LOOK_EVERY_S
        listener.subscribed(self._absent)  # idle (`--idle-timeout`) from now while waiting
        if self._present:
            self._subscribe()

    @property
    def absent(self) -> tuple[str, ...]:
        """The inputs not subscribed to yet: no writer created them."""
        return tuple(self._absent)

    def look(self) -> None:
        """On the poll thread, before a poll: at most every LOOK_EVERY_S, whether an absent input exists now
        (waiting for the look a moment at most: it runs on a thread of its own), and if so subscribed to."""
        if not self._absent or time.monotonic() < self._next_look:
            return
        try:
            existing = self._looking(timeout_s=0)
        except KafkaTimeoutError:  # the look under way: its answer at the next call
            return
        except KafkaError as exc:  # no broker now: looked for again
            _log.debug("looking for %s: %s", ", ".join(self._absent), exc)
            existing = set()
        self._next_look = time.monotonic() + LOOK_EVERY_S
        appeared = [t for t in self._absent if t in existing]
        if not appeared:
            return
        _log.info("the topic(s) %s now exist: reading them", ", ".join(appeared))
        self._absent = [t for t in self._absent if t not in appeared]
        self._present += appeared
        self._subscribe()

    def _subscribe(self) -> None:
        subscribe_topics(self._consumer, self._present, self._listener)
        # The member's own metadata, fresh before its (re)join: a metadata update that changes what it
        # subscribes to mid-rebalance makes a leader rejoin at once (the hazard above), and a leader whose
        # metadata lacks a topic assigns none of it.
        try:
            self._consumer.topics()
        except KafkaError as exc:  # no broker this moment: its next metadata refresh brings them
            _log.debug("metadata before joining with %s: %s", ", ".join(self._present), exc)

    def _existing(self) -> set[str]:
        """The absent inputs that exist now, each with its partitions known, asked by a client of its own
        that never creates a topic (on BoundedCall's thread)."""
        probe = KafkaConsumer(
            **self._client_config,
            group_id=None,
            enable_auto_commit=False,
            **not_creating_topics(),
            request_timeout_ms=int(BROKER_WAIT_S * 1000),
        )
        try:
            wanted = set(self._absent) & probe.topics()
            return {t for t in wanted if probe.partitions_for_topic(t)}
        finally:
            probe.close()
