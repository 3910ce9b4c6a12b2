"""`tracescore alert`: evaluation records from Kafka -> alert state per (service, route, metric) -> sinks.

    tracescore.evaluations --(group G, keyed by trace id)--> re-keyed by (service, route, metric)
        --> tracescore.alert.routes --(group G.routes)--> AlertEvaluator --> sinks
                                                              |
                                                              v  last notified state, compacted
                                                       tracescore.alert.state

Evaluation records are keyed by trace id, so one route's records are spread over every partition. The first
stage writes them again (what alerting reads of them: no details) keyed by route, so with several alert
instances each owns whole routes and its alert state is complete. After a restart or rebalance, an instance
rebuilds its routes' windows by re-reading the routes topic from the window's start (without notifying) and
knows what it already notified from the compacted state topic: a firing alert is neither repeated nor
forgotten, and one that recovered meanwhile is resolved.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import MessageSizeTooLargeError
from kafka.partitioner.default import murmur2

from tracescore._kafka import (
    LogOnce,
    RebalanceListener,
    connect,
    ensure_topics,
    read_compacted,
    rekeying_clients,
    wait_for_partitions,
)
from tracescore._kafka_config import KafkaConnection
from tracescore.alert._config import AlertConfig
from tracescore.alert._conversations import record_key
from tracescore.alert._evaluator import AlertEvaluator, AlertState
from tracescore.alert._notification import AlertKey, Notification
from tracescore.alert._sinks import AlertmanagerSink, Sink
from tracescore.model import (
    ConversationRecord,
    EvaluationRecord,
    UnreadableRecord,
    read_conversation_record,
    read_evaluation_record,
)

__all__ = ["AlertService", "AlertStats"]

_log = logging.getLogger("tracescore.alert")
Clock = Callable[[], datetime]
_ROUTES_REASON_CHARS = 1_000


@dataclass
class AlertStats:
    records: int = 0
    # evaluations topic: unknown_schema_version, invalid_record, oversized_record; state topic: invalid_state
    skipped: Counter[str] = field(default_factory=Counter)
    notifications: int = 0
    evicted_routes: int = 0
    delivery_failures: int = 0


# Marks a conversation record on the routes topic (the rest are evaluation records).
_UNIT = [("tracescore.unit", b"conversation")]


def _for_routes(record: EvaluationRecord) -> bytes:
    return record.slim(_ROUTES_REASON_CHARS).model_dump_json().encode()


def _conversation_for_routes(record: ConversationRecord) -> bytes:
    """What alerting reads of a conversation record: without its turns' ids and the worst turn."""
    slim = record.model_copy(update={"trace_ids": [], "span_ids": [], "worst_turn": None})
    return slim.model_dump_json().encode()


class AlertService:
    def __init__(
        self,
        config: AlertConfig,
        sinks: Sequence[Sink],
        *,
        kafka: KafkaConnection | None = None,
        clock: Clock = lambda: datetime.now(UTC),
        on_notification: Callable[[Notification], None] | None = None,
    ) -> None:
        self.config = config
        self.sinks = list(sinks)
        self.evaluator = AlertEvaluator(config)
        self.stats = AlertStats()
        self._clock = clock
        self._on_notification = on_notification
        self._stopping = False
        self._warn_once = LogOnce(_log)
        self._replay_until: dict[TopicPartition, int] = {}
        self._pending_rebuild: set[TopicPartition] = set()
        self._last_resend: float = time.monotonic()
        # Plaintext to config.bootstrap_servers unless given (`tracescore alert` gives TRACESCORE_KAFKA__*).
        self.connection = kafka or KafkaConnection(bootstrap_servers=config.bootstrap_servers)
        # BrokerUnreachable (one line) when no broker answers within the connect timeout.
        self._ingest, self._routes, self._producer = connect(self.connection, self._clients)
        self.first_assigned_at: float | None = None

    def _clients(self, client: dict[str, Any]) -> tuple[KafkaConsumer, KafkaConsumer, KafkaProducer]:
        return rekeying_clients(client, self.config.group_id, "routes")

    def stop(self) -> None:
        """Return from run() after the current batch. Safe from a signal handler."""
        self._stopping = True

    def run(self, idle_timeout_s: float | None = None) -> AlertStats:
        self._ensure_topics()
        inputs = [self.config.evaluations_topic]
        if self.config.watches_conversations:
            inputs.append(self.config.conversations_topic)
        topics = [*inputs, self.config.routes_topic]
        wait_for_partitions(self.connection.client_config(), topics, self.connection.connect_timeout_s)
        self._ingest.subscribe(inputs)
        listener = RebalanceListener(
            _log,
            assigned=self.assigned,
            revoked=lambda revoked: self.evaluator.forget_partitions(tp.partition for tp in revoked),
        )
        self._routes.subscribe([self.config.routes_topic], listener=listener)
        last_message = time.monotonic()
        last_tick = 0.0
        try:
            while not self._stopping:
                if self.config.health_file is not None:
                    self.config.health_file.touch()
                moved = self._forward(self._ingest.poll(timeout_ms=200))
                moved += self._evaluate(self._routes.poll(timeout_ms=200))
                if moved:
                    last_message = time.monotonic()
                if time.monotonic() - last_tick >= self.config.tick_seconds:
                    last_tick = time.monotonic()
                    self._deliver(self.evaluator.tick(self._clock()))
                    self._resend_firing()
                    self._persist()
                if idle_timeout_s and time.monotonic() - last_message > idle_timeout_s:
                    _log.info("no evaluation record for %.1fs; stopping", idle_timeout_s)
                    break
        finally:
            self._persist()
            self._producer.close(timeout=30)
            self._ingest.close(autocommit=False)
            self._routes.close(autocommit=False)
            for sink in self.sinks:
                sink.close()
        self.stats.evicted_routes = self.evaluator.evicted
        return self.stats

    # -- stage 1: re-key by route -----------------------------------------------------------------------
    def _forward(self, polled: dict[TopicPartition, list]) -> int:
        count = 0
        for tp, messages in polled.items():
            conversations = tp.topic == self.config.conversations_topic
            for message in messages:
                count += 1
                record = self._parse(message.value, conversations)
                if record is None:
                    continue
                key = record_key(record)
                if isinstance(record, ConversationRecord):
                    value, headers = _conversation_for_routes(record), _UNIT
                else:
                    value, headers = _for_routes(record), []
                try:
                    self._producer.send(
                        self.config.routes_topic, key=key.encode(), value=value, headers=headers
                    )
                except MessageSizeTooLargeError as exc:  # only names of hundreds of KB get here
                    self._skip("oversized_record", str(exc).splitlines()[0][:200])
        if count:
            self._producer.flush(timeout=30)
            self._ingest.commit()
        return count

    def _parse(
        self, value: bytes | None, conversation: bool = False
    ) -> EvaluationRecord | ConversationRecord | None:
        try:
            return read_conversation_record(value) if conversation else read_evaluation_record(value)
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return None

    def _skip(self, reason: str, detail: str) -> None:
        self.stats.skipped[reason] += 1
        self._warn_once(
            reason, "skipped evaluation record (%s): %s; further ones are only counted", reason, detail
        )

    # -- stage 2: alert state per route -----------------------------------------------------------------
    def assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """Rebalance callback (on the client's IO thread, which must not block): park the partitions until
        the main loop has positioned them for the rebuild."""
        if self.first_assigned_at is None:
            self.first_assigned_at = time.monotonic()
        self._pending_rebuild.update(assigned)
        self._routes.pause(*assigned)

    def _rebuild(self) -> None:
        """Seek newly assigned partitions back to the start of the longest window; what precedes the
        committed offset was already evaluated, so it only refills the windows."""
        assigned = sorted(self._pending_rebuild & self._routes.assignment())
        self._pending_rebuild.clear()
        if not assigned:
            return
        # The previous owner persisted each state change before committing the offsets that caused it.
        self._restore_states()
        partitions = len(self._routes.partitions_for_topic(self.config.routes_topic) or ()) or 1
        mine = {tp.partition for tp in assigned}

        def partition_of(key: AlertKey) -> int | None:
            # The producer's default partitioner (murmur2, as the Java client) placed the key there.
            partition = (murmur2(key.encode()) & 0x7FFFFFFF) % partitions
            return partition if partition in mine else None

        self.evaluator.adopt_restored(partition_of)
        longest = max(r.window_seconds for r in [*self.config.rules, self.config.judge_health])
        since_ms = int((self._clock().timestamp() - longest) * 1000)
        starts = self._routes.offsets_for_times({tp: since_ms for tp in assigned})
        for tp in assigned:
            committed = self._routes.committed(tp)
            start = starts.get(tp)
            if committed is None:
                continue  # a new group: auto_offset_reset decides, nothing was evaluated before
            begin = min(start.offset, committed) if start is not None else committed
            self._replay_until[tp] = committed
            self._routes.seek(tp, begin)
        self._routes.resume(*assigned)

    def _evaluate(self, polled: dict[TopicPartition, list]) -> int:
        count = 0
        now = self._clock()
        if self._pending_rebuild:
            # Anything fetched for them before the seek is read again from the rebuild position.
            polled = {tp: m for tp, m in polled.items() if tp not in self._pending_rebuild}
            self._rebuild()
        for tp, messages in polled.items():
            replay_until = self._replay_until.get(tp, 0)
            for message in messages:
                count += 1
                record = self._parse(message.value, (_UNIT[0] in (message.headers or ())))
                if record is None:
                    continue
                self.stats.records += 1
                key = self.evaluator.add(record, tp.partition)
                if key is not None and message.offset >= replay_until:
                    self._deliver(self.evaluator.evaluate(key, now))
        if count:
            self._persist()
            self._routes.commit()
        return count

    def _deliver(self, notifications: Sequence[Notification]) -> None:
        for note in notifications:
            self.stats.notifications += 1
            for sink in self.sinks:
                if not sink.send(note):
                    self.stats.delivery_failures += 1
            if self._on_notification:
                self._on_notification(note)

    def _resend_firing(self) -> None:
        managers = [s for s in self.sinks if isinstance(s, AlertmanagerSink)]
        if not managers:
            return
        interval = min(s.resend_seconds for s in managers)
        if time.monotonic() - self._last_resend < interval:
            return
        self._last_resend = time.monotonic()
        for note in self.evaluator.firing(self._clock()):
            for sink in managers:
                sink.send(note)

    # -- state topic ------------------------------------------------------------------------------------
    def _persist(self) -> None:
        changed = self.evaluator.take_changed_states()
        for key, state in changed.items():
            value = state.model_dump_json().encode() if state is not None else None
            self._producer.send(self.config.state_topic, key=key.encode(), value=value)
        if changed:
            self._producer.flush(timeout=30)

    def _restore_states(self) -> None:
        for m in read_compacted(self.connection, self.config.state_topic):
            try:
                key = AlertKey.decode(m.key or b"")
                state = AlertState.model_validate_json(m.value) if m.value else None
            except ValueError as exc:  # ValidationError too
                # Not what _persist writes: read at every start, so skipping is the only way on.
                self._skip("invalid_state", str(exc).splitlines()[0][:200])
                continue
            self.evaluator.restore(key, state)

    def _ensure_topics(self) -> None:
        c = self.config
        ensure_topics(
            self.connection,
            [
                c.evaluations_topic,  # with the broker's defaults, as `tracescore consume` creates it
                *([c.conversations_topic] if c.watches_conversations else []),
                NewTopic(c.routes_topic, c.routes_partitions, -1),
                NewTopic(c.state_topic, 1, -1, topic_configs={"cleanup.policy": "compact"}),
            ],
        )
