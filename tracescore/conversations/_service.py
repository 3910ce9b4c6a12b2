"""`tracescore conversations`: evaluation records -> one record per conversation when it goes quiet.

    tracescore.evaluations --(group G, keyed by trace id)--> re-keyed by (service, conversation id)
        --> tracescore.conversations.turns --(group G.turns)--> ConversationTracker
                                                                  |          |
                       tracescore.conversations (records) <------+          v  each conversation as of its
                       spans topic, Phoenix sessions, metrics          tracescore.conversations.state
                                                                          (compacted) last record

Evaluation records are keyed by trace id, so a conversation's turns are spread over every partition. The
first stage writes them again (what a conversation needs of them: no details) keyed by conversation, so
with several instances each owns whole conversations. A conversation's state goes to the compacted state
topic when its records are written (or, for one that never goes quiet, after `quiet_seconds` of changes),
and the turns topic's offsets are committed no further than the oldest change not in it: after a restart
or rebalance an instance restores its conversations from the state topic and re-reads only the turns since.
At least once: a crash between writing a record and its state writes that record again, same revision.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, MessageSizeTooLargeError
from kafka.partitioner.default import murmur2
from kafka.structs import OffsetAndMetadata

from tracescore._kafka import (
    LogOnce,
    RebalanceListener,
    connect,
    ensure_topics,
    lag,
    read_compacted,
    rekeying_clients,
    wait_for_partitions,
)
from tracescore._kafka_config import KafkaConnection
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._state import Conversation, Tier
from tracescore.conversations._tracker import ConversationTracker, Key, key_of
from tracescore.emit import (
    EVALUATION_SPANS_HEADER,
    ConversationMetrics,
    PhoenixAnnotations,
    conversation_span,
)
from tracescore.export import encode_trace_messages
from tracescore.model import ConversationRecord, EvaluationRecord, UnreadableRecord, read_evaluation_record

__all__ = ["ConversationService", "ConversationStats"]

_log = logging.getLogger("tracescore.conversations")
Clock = Callable[[], datetime]
_TURN_REASON_CHARS = 1_000


@dataclass
class ConversationStats:
    turn_records: int = 0  # read from the turns topic
    records: int = 0  # conversation records written
    revisions: int = 0  # of which revised an earlier one
    evicted: int = 0  # written early and forgotten past max_conversations
    forgotten: int = 0  # silent for forget_seconds
    # evaluations topic: no_conversation, invalid_record, unknown_schema_version, oversized_record;
    # turns topic: records_past_cap; state topic: invalid_state, state_too_large
    skipped: Counter[str] = field(default_factory=Counter)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _encode_key(key: Key) -> bytes:
    """Kafka key of the turns and state topics: JSON, so any service or conversation id round-trips."""
    return json.dumps(list(key), ensure_ascii=False).encode()


class ConversationService:
    def __init__(
        self,
        config: ConversationsConfig,
        *,
        kafka: KafkaConnection | None = None,
        clock: Clock = lambda: datetime.now(UTC),
        phoenix: PhoenixAnnotations | None = None,
        metrics: ConversationMetrics | None = None,
        on_record: Callable[[ConversationRecord], None] | None = None,
    ) -> None:
        self.config = config
        self.tracker = ConversationTracker(config)
        self.stats = ConversationStats()
        self._clock = clock
        self._phoenix = phoenix
        self._metrics = metrics or ConversationMetrics()
        self._on_record = on_record
        self._stopping = False
        self._warn_once = LogOnce(_log)
        self._pending_rebuild: set[TopicPartition] = set()
        self._committed: dict[TopicPartition, int] = {}
        self.first_assigned_at: float | None = None
        self.connection = kafka or KafkaConnection(bootstrap_servers=config.bootstrap_servers)
        # BrokerUnreachable (one line) when no broker answers within the connect timeout.
        self._ingest, self._turns, self._producer = connect(self.connection, self._clients)

    def _clients(self, client: dict[str, Any]) -> tuple[KafkaConsumer, KafkaConsumer, KafkaProducer]:
        return rekeying_clients(client, self.config.group_id, "turns")

    def stop(self) -> None:
        """Return from run() after the current batch. Safe from a signal handler."""
        self._stopping = True

    def run(self, idle_timeout_s: float | None = None) -> ConversationStats:
        """Until stopped, or `idle_timeout_s` without a record and with nothing left to write."""
        self._ensure_topics()
        topics = [self.config.evaluations_topic, self.config.turns_topic]
        wait_for_partitions(self.connection.client_config(), topics, self.connection.connect_timeout_s)
        self._ingest.subscribe([self.config.evaluations_topic])
        listener = RebalanceListener(_log, assigned=self._assigned, revoked=self._revoked)
        self._turns.subscribe([self.config.turns_topic], listener=listener)
        last_message = time.monotonic()
        last_tick = 0.0
        try:
            while not self._stopping:
                if self.config.health_file is not None:
                    self.config.health_file.touch()
                moved = self._forward(self._ingest.poll(timeout_ms=200))
                moved += self._gather(self._turns.poll(timeout_ms=200))
                if moved:
                    last_message = time.monotonic()
                if time.monotonic() - last_tick >= self.config.tick_seconds:
                    last_tick = time.monotonic()
                    self._tick()
                idle = idle_timeout_s and time.monotonic() - last_message > idle_timeout_s
                if idle and not self.tracker.open():
                    _log.info(
                        "no record for %.1fs and no conversation left to write; stopping", idle_timeout_s
                    )
                    break
        finally:
            self._commit()
            self._producer.close(timeout=30)
            self._ingest.close(autocommit=False)
            self._turns.close(autocommit=False)
            if self._phoenix is not None:
                self._phoenix.close()
        return self.stats

    # -- stage 1: re-key by conversation ----------------------------------------------------------------
    def _forward(self, polled: dict[TopicPartition, list]) -> int:
        count = 0
        for messages in polled.values():
            for message in messages:
                count += 1
                record = self._parse(message.value)
                if record is None:
                    continue
                key = key_of(record)
                if key is None:
                    self._skip("no_conversation", "its interaction carries no session.id / conversation id")
                    continue
                value = record.slim(_TURN_REASON_CHARS).model_dump_json().encode()
                try:
                    self._producer.send(self.config.turns_topic, key=_encode_key(key), value=value)
                except MessageSizeTooLargeError as exc:  # only names of hundreds of KB get here
                    self._skip("oversized_record", str(exc).splitlines()[0][:200])
        if count:
            self._producer.flush(timeout=30)
            self._ingest.commit()
        return count

    def _parse(self, value: bytes | None) -> EvaluationRecord | None:
        try:
            return read_evaluation_record(value)
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return None

    def _skip(self, reason: str, detail: str) -> None:
        self.stats.skipped[reason] += 1
        self._metrics.skipped(reason)
        # A turn without a conversation id is normal (a one-shot question): said once, not warned about.
        level = logging.INFO if reason == "no_conversation" else logging.WARNING
        self._warn_once(
            reason, "skipped a record (%s): %s; further ones are only counted", reason, detail, level=level
        )

    # -- stage 2: conversations -------------------------------------------------------------------------
    def _assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """Rebalance callback (on the client's IO thread, which must not block): park the partitions until
        the main loop has restored their conversations."""
        if self.first_assigned_at is None:
            self.first_assigned_at = time.monotonic()
        self._pending_rebuild.update(assigned)
        self._turns.pause(*assigned)

    def _revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self.tracker.forget_partitions(tp.partition for tp in revoked)
        for tp in revoked:
            self._committed.pop(tp, None)

    def _rebuild(self) -> None:
        """Restore the newly assigned partitions' conversations from the state topic and read their turns
        again from the committed offset (the oldest change the state topic did not have)."""
        assigned = sorted(self._pending_rebuild & self._turns.assignment())
        self._pending_rebuild.clear()
        if not assigned:
            return
        partitions = len(self._turns.partitions_for_topic(self.config.turns_topic) or ()) or 1
        mine = {tp.partition for tp in assigned}
        self.tracker.restore(self._restore(mine, partitions))
        for tp in assigned:
            committed = self._turns.committed(tp)
            if committed is None:
                self._turns.seek_to_beginning(tp)  # a new group: nothing was read before
            else:
                self._turns.seek(tp, committed)
                self._committed[tp] = committed
        self._turns.resume(*assigned)

    def _gather(self, polled: dict[TopicPartition, list]) -> int:
        count = 0
        if self._pending_rebuild:
            # Anything fetched for them before the seek is read again from the rebuild position.
            polled = {tp: m for tp, m in polled.items() if tp not in self._pending_rebuild}
            self._rebuild()
        for tp, messages in polled.items():
            for message in messages:
                count += 1
                record = self._parse(message.value)
                if record is None:
                    continue
                self.stats.turn_records += 1
                # The message's own time (CreateTime, set by stage 1); a broker that gives none: now.
                arrival = (
                    message.timestamp if message.timestamp and message.timestamp > 0 else _ms(self._clock())
                )
                self.tracker.apply(record, tp.partition, message.offset, arrival)
        past_cap = self.tracker.counts.pop("records_past_cap", 0)
        if past_cap:
            self.stats.skipped["records_past_cap"] += past_cap
            self._metrics.skipped("records_past_cap", past_cap)
        return count

    def _tick(self) -> None:
        now = self._clock()
        wall_ms = _ms(now)
        left = {tp.partition: n for tp, n in lag(self._turns).items()}

        def now_of(partition: int) -> int:
            return self.tracker.now_of(partition, wall_ms, left.get(partition) == 0)

        evicted = self.tracker.over_capacity()
        leaving = {c.key for c in evicted}
        self._write([c for c in self.tracker.quiet(now_of) if c.key not in leaving] + evicted, now)
        for conversation in evicted:
            self._forget(conversation)
            self.stats.evicted += 1
            self._metrics.skipped("evicted")
        for conversation in self.tracker.to_checkpoint(now_of):
            self._persist(conversation)
        for conversation in self.tracker.to_forget(now_of):
            self._forget(conversation)
            self.stats.forgotten += 1
        self._producer.flush(timeout=30)
        self._commit()

    def _write(self, conversations: list[Conversation], now: datetime) -> None:
        """Each conversation's changed records, then (once Kafka has them) its state."""
        written: list[tuple[Conversation, list[tuple[Tier, ConversationRecord]]]] = []
        for conversation in conversations:
            due = conversation.due(self.config.confidence, now) if conversation.pending else []
            for _, record in due:
                value = record.model_dump_json().encode()
                self._producer.send(
                    self.config.conversations_topic, key=_encode_key(conversation.key), value=value
                )
                self._send_span(record)
            written.append((conversation, due))
        if not written:
            return
        self._producer.flush(timeout=30)
        records = [record for _, due in written for _, record in due]
        for conversation, due in written:
            conversation.written(due)
            self._persist(conversation)
        for record in records:
            self.stats.records += 1
            self.stats.revisions += record.revision > 0
            self._metrics.recorded(record)
            if self._on_record is not None:
                self._on_record(record)
        if self._phoenix is not None and records:
            self._phoenix.send_sessions(records)

    def _send_span(self, record: ConversationRecord) -> None:
        if self.config.spans_topic is None:
            return
        span = conversation_span(record, start_ns=time.time_ns())
        if span is None:
            return
        for key, value in encode_trace_messages([span]):
            headers = [(EVALUATION_SPANS_HEADER, b"1")]
            self._producer.send(self.config.spans_topic, key=key, value=value, headers=headers)

    def _persist(self, conversation: Conversation) -> None:
        value = json.dumps(conversation.snapshot(), ensure_ascii=False).encode()
        if len(value) > self.config.max_message_bytes:
            value = json.dumps(conversation.snapshot(with_reasons=False), ensure_ascii=False).encode()
        if len(value) > self.config.max_message_bytes:
            # Written without its state: a restart would miss its turns read so far; said once, counted.
            self._skip(
                "state_too_large", f"conversation {conversation.conversation_id!r}: {len(value)} bytes"
            )
        else:
            self._producer.send(self.config.state_topic, key=_encode_key(conversation.key), value=value)
        conversation.dirty_from = None

    def _forget(self, conversation: Conversation) -> None:
        self.tracker.forget(conversation)
        self._producer.send(self.config.state_topic, key=_encode_key(conversation.key), value=None)

    def _commit(self) -> None:
        assigned = [tp for tp in self._turns.assignment() if tp not in self._pending_rebuild]
        positions = {}
        for tp in assigned:
            try:
                positions[tp.partition] = self._turns.position(tp, timeout_ms=1000)
            except KafkaError:  # a partition without a position yet: nothing read, nothing to commit
                continue
        offsets = self.tracker.commit_offsets(positions)
        topic = self.config.turns_topic
        due = {
            TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
            for p, o in offsets.items()
            if self._committed.get(TopicPartition(topic, p)) != o
        }
        if not due:
            return
        try:
            self._turns.commit(due)
        except KafkaError as exc:  # a rebalance under way: the next tick commits, or the new owner re-reads
            _log.debug("commit of the turns topic deferred: %s", exc)
            return
        self._committed.update({tp: meta.offset for tp, meta in due.items()})

    # -- state topic ------------------------------------------------------------------------------------
    def _restore(self, mine: set[int], partitions: int) -> list[Conversation]:
        found: dict[bytes, Conversation | None] = {}
        for m in read_compacted(self.connection, self.config.state_topic):
            # The producer's default partitioner (murmur2, as the Java client) placed the key there.
            partition = (murmur2(m.key or b"") & 0x7FFFFFFF) % partitions
            if partition not in mine:
                continue
            try:
                found[m.key] = (
                    None if m.value is None else Conversation.restore(json.loads(m.value), partition)
                )
            except (KeyError, TypeError, ValueError) as exc:
                # Not what _persist writes: read at every assignment, so skipping is the only way on.
                self._skip("invalid_state", f"{type(exc).__name__}: {exc}"[:200])
        return [c for c in found.values() if c is not None]

    def _ensure_topics(self) -> None:
        c = self.config
        topics: list[str | NewTopic] = [
            c.evaluations_topic,  # with the broker's defaults, as `tracescore consume` creates it
            c.conversations_topic,
            NewTopic(c.turns_topic, c.turns_partitions, -1),
            NewTopic(c.state_topic, 1, -1, topic_configs={"cleanup.policy": "compact"}),
        ]
        ensure_topics(self.connection, topics)
