"""The state topic: compacted, partitioned like the keyed topic it is the state of, a key's state on the
partition number of its records (quix-streams' changelog topics, Kafka Streams' too). A rebalance reads back
the assigned partitions' state only, never the whole topic.

Each partition also holds one `PartitionMeta` (under a key no service key can take): written when the
partition is first used, it says whether the state of an earlier version was carried over (the old
single-partition topic is read once) and where the verified output topics ended at the last saved state.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.producer.future import FutureRecordMetadata
from pydantic import Field

from tracescore._kafka import (
    BROKER_WAIT_S,
    ensure_topics,
    not_creating_topics,
    probe_consumer,
    read_partitions,
    topic_partitions,
)
from tracescore._kafka_config import KafkaConnection
from tracescore._service._bounded import BoundedCall, ClosedAtStop
from tracescore._service._codec import StateCodec, StateRecord, UnreadableState
from tracescore._service._outputs import close_shares, delivered

__all__ = ["META_KEY", "META_SAVED", "Changelog", "ChangelogError", "PartitionMeta", "PartitionState"]

_log = logging.getLogger("tracescore")

# A JSON list (conversations) or names joined by \x1f (alert) never starts with NUL or lacks both.
META_KEY = b"\x00tracescore.partition"
# The metadata of every offset stage 2 commits: the partition's meta was on the state topic before it. A
# restore that finds such an offset and no meta knows the partition's state was lost (`lost_state`).
META_SAVED = "tracescore.meta-saved"


class PartitionMeta(StateRecord):
    """One per state topic partition. Its `outputs` marks say where a restart looks for what was written;
    a missing mark means "look from the log start" (`OutputLog.since`), and so does a missing meta where the
    group committed an offset after saving one (the state lost: `_restore.lost_state`)."""

    schema_version: Literal[1] = 1
    migrated_from: str | None = Field(
        default=None, description="The old state topic this partition's state was carried over from."
    )
    outputs: dict[str, dict[int, int]] = Field(
        default_factory=dict,
        description="Per verified output topic and partition, its end offset when this partition's state was "
        "last saved: a restart looks there for outputs written after it (by ids in their headers). A topic "
        "or partition without a mark (its end never learnt: a stop before any look, one added since) means "
        "look from its log start, never nothing to look for.",
    )


_META = StateCodec(PartitionMeta)


class ChangelogError(KafkaError):
    """A state topic the service cannot keep its promise with (partitioned unlike its source, not creatable);
    one line that says what to do (a KafkaError: the command line prints it as one line)."""


class PartitionState:
    """What one state topic partition held when read: its meta and each key's last value (None: deleted)."""

    def __init__(self) -> None:
        self.meta: PartitionMeta | None = None
        self.values: dict[bytes, bytes | None] = {}
        self.unreadable_meta: UnreadableState | None = None


class Changelog:
    def __init__(
        self,
        connection: KafkaConnection,
        topic: str,
        source: str,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.connection = connection
        self._stopping = stopping  # a stop asked for: no wait at startup for a broker that may be gone
        self.topic = topic
        self.source = source
        self.partitions = 0
        client = connection.client_config()
        # No client of ours may create it by accident: auto-created, it would have the broker's partition
        # count and no compaction. Its looks wait BROKER_WAIT_S per request, as their callers do: one given up
        # on (a broker that does not answer) ends with it, not at kafka-python's 30 s request timeout.
        wait_ms = int(BROKER_WAIT_S * 1000)
        self._probe = probe_consumer(client, request_timeout_ms=wait_ms, bootstrap_timeout_ms=wait_ms)
        self._producer = KafkaProducer(
            **client,
            acks="all",
            enable_idempotence=True,  # in order per partition, retries included: a meta never lands before
            **not_creating_topics(),  # the states it follows
            linger_ms=5,
            max_block_ms=10_000,  # a send to a deleted topic gives up after this, to recreate it
        )
        self._look = BoundedCall(
            lambda: topic_partitions(self._probe, [source, topic]), f"a look for the state topic {topic}"
        )
        # The client of a look for the old state topic under way (on a restore's thread): the stop closes it.
        self._old_look: ClosedAtStop[KafkaConsumer] | None = None
        self._closed = False
        self._guard = threading.Lock()  # a look's client made on its thread, closed from the service's
        self._ensure_call = BoundedCall(self._ensure, f"creating or looking up the state topic {topic}")

    # -- the topic --------------------------------------------------------------------------------------
    def ensure(self, timeout_s: float = BROKER_WAIT_S) -> int:
        """Create the topic if missing, with the source's partition count; that count (ChangelogError when
        the topic has another one; KafkaTimeoutError when the broker did not answer within `timeout_s`, or a
        stop was asked for first: nothing interrupts a metadata look under way)."""
        return self._ensure_call(self._stopping, timeout_s)

    def _ensure(self) -> int:
        found = topic_partitions(self._probe, [self.source, self.topic])
        source = found.get(self.source)
        if not source:
            raise ChangelogError(f"the topic {self.source} does not exist and could not be created")
        self.partitions = len(source)
        if not found.get(self.topic):
            self._create()
        self.check()
        return self.partitions

    def check(self, stopping: Callable[[], bool] = lambda: False) -> bool:
        """True when the topic exists as it must; False when it does not (deleted); ChangelogError when it or
        its source is partitioned unlike the source at the start (partitions added to either in place);
        KafkaTimeoutError when no broker answered within BROKER_WAIT_S or `stopping()` came true first."""
        found = self._look(stopping)  # a fresh look: the cached metadata would still show a deleted topic
        # Partitions added to the source while running: seen here first, every few seconds, before the
        # service's clients route and read by the new count (at their metadata refresh, minutes apart).
        source = found.get(self.source, ())
        if source and len(source) != self.partitions:
            raise ChangelogError(
                f"the topic {self.source} has {len(source)} partition(s) now, {self.partitions} when the "
                f"service started: a key's state must sit on its records' partition number. {self._added}"
            )
        state = found.get(self.topic, ())
        if not state:
            return False
        if len(state) != self.partitions:
            raise ChangelogError(
                f"the state topic {self.topic} has {len(state)} partition(s), its source {self.source} "
                f"{self.partitions}: a key's state must sit on its records' partition number. A topic of an "
                "earlier version (one partition): set it as legacy_state_topic and give state_topic a new "
                f"name. {self._added}. Otherwise recreate it with the source's partition count"
            )
        return True

    @property
    def _added(self) -> str:
        return (
            f"Partitions added to {self.source} (kafka-topics --alter) moved its keys away from their state: "
            "give both topics new names, and the service creates them (the state starts anew)"
        )

    def recreate(self, timeout_s: float = 60.0) -> None:
        """Create the deleted topic again (the broker may take a moment to finish deleting it)."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._create()
            if self.check():
                return
            if time.monotonic() > deadline:
                raise ChangelogError(
                    f"the state topic {self.topic} was deleted and could not be created again within "
                    f"{timeout_s:.0f}s: create it ({self.partitions} partitions, cleanup.policy=compact)"
                )
            time.sleep(1.0)

    def _create(self) -> None:
        compact = {"cleanup.policy": "compact"}
        ensure_topics(self.connection, [NewTopic(self.topic, self.partitions, -1, topic_configs=compact)])

    # -- reading back -----------------------------------------------------------------------------------
    def read(
        self, partitions: Iterable[int], give_up: Callable[[], bool] = lambda: False
    ) -> dict[int, PartitionState]:
        """Each of `partitions` as it is now: its meta and the last value of every key (each wait bounded:
        `read_partitions`)."""
        out = {p: PartitionState() for p in partitions}
        for message in read_partitions(self.connection, self.topic, list(out), give_up=give_up):
            state = out[message.partition]
            if message.key == META_KEY:
                try:
                    state.meta = _META.decode(message.value or b"")
                except UnreadableState as unreadable:
                    state.unreadable_meta = unreadable
            elif message.key is not None:
                state.values[message.key] = message.value
        return out

    # -- writing ----------------------------------------------------------------------------------------
    def write(self, partition: int, key: bytes, value: bytes | None) -> FutureRecordMetadata:
        return self._producer.send(self.topic, key=key, value=value, partition=partition)

    def write_meta(self, partition: int, meta: PartitionMeta) -> FutureRecordMetadata:
        return self.write(partition, META_KEY, _META.encode(meta))

    def flush(self) -> None:
        self._producer.flush()

    def delivered(
        self, futures: Iterable[FutureRecordMetadata], until: Callable[[], float | None] = lambda: None
    ) -> list[Exception]:
        return delivered(self._producer, futures, until)

    # -- the old state topic ---------------------------------------------------------------------------
    def legacy_states(
        self, topic: str | None, wanted: Mapping[int, Any], give_up: Callable[[], bool] = lambda: False
    ) -> list[tuple[bytes, bytes]]:
        """Every live (key, value) of the old single-partition state topic `topic` (none when it is unset or
        does not exist); `wanted` is only a guard that there is something to carry over to. Each wait is
        bounded like the restore's other reads: the look for the topic gives up after BROKER_WAIT_S (an error
        the restore tries again) or at once when `give_up()`."""
        if not topic or not wanted:
            return []
        what = f"a look for the old state topic {topic}"
        partitions = BoundedCall(lambda: self._old_partitions(topic, what), what)(give_up, BROKER_WAIT_S)
        if not partitions:
            return []
        last: dict[bytes, bytes | None] = {}
        for message in read_partitions(self.connection, topic, partitions, give_up=give_up):
            if message.key is not None:
                last[message.key] = message.value
        return [(key, value) for key, value in last.items() if value is not None]

    def _old_partitions(self, topic: str, what: str) -> list[int]:
        """The partitions of `topic` from a client of the look's own (a fresh look: nothing cached), closed
        once it answered, or by the stop (`close`): a look given up on for a stop ends with the stop, not
        when its request times out (one made while the stop came, within its first connection's
        BROKER_WAIT_S). An error says `what` failed, and stays retriable when it was."""
        look = ClosedAtStop(self._new_old_probe, what)
        with self._guard:
            if self._closed:
                look.close()  # none made: `get` says the stop came
            self._old_look = look
        try:
            try:
                return list(topic_partitions(look.get(), [topic]).get(topic, ()))
            finally:
                look.close()
        except KafkaError as exc:
            raise type(exc)(f"{what}: {exc}") from exc

    def _new_old_probe(self) -> KafkaConsumer:
        wait_ms = int(BROKER_WAIT_S * 1000)
        return probe_consumer(
            self.connection.client_config(),
            bootstrap_timeout_ms=wait_ms,  # its first metadata (30 s by default)
            request_timeout_ms=wait_ms,  # the look's metadata request (30 s by default, then retried)
        )

    def close(self, timeout_s: float = 30.0) -> None:
        """Every client closed within `timeout_s`, all of them together, each that may wait with an even share
        of what is left as it starts."""
        shares = close_shares(time.monotonic() + timeout_s, 2)
        with self._guard:
            self._closed = True
            old_look = self._old_look
        closes = (
            old_look.close if old_look is not None else lambda: None,  # at once: a look under way fails
            lambda: self._producer.close(timeout=next(shares)),
            lambda: self._probe.close(timeout_ms=int(1000 * next(shares))),
        )
        for close in closes:
            try:
                close()
            except KafkaError as exc:  # closing after the broker went away
                _log.debug("closing the state topic's clients: %s", exc)
