"""`tracescore conversations`: evaluation records -> one record per conversation when it goes quiet.

    tracescore.evaluations --(group G, keyed by trace id)--> re-keyed by (service, conversation id)
        --> tracescore.conversations.turns --(group G.turns)--> ConversationTracker
                                                                  |          |
                       tracescore.conversations (records) <------+          v  each conversation, on its
                       spans topic, Phoenix sessions, metrics          tracescore.conversations.changelog
                                                                          partition (compacted)

Evaluation records are keyed by trace id, so a conversation's turns are spread over every partition. The
first stage writes them again (what a conversation needs of them: no details) keyed by conversation, so
with several instances each owns whole conversations. The service base (tracescore/_service) does the
Kafka part: a conversation's state sits on the state topic partition of its turns, so a rebalance reads back
only the assigned partitions; records are written, then the state that records their revisions, then the
turns topic is committed. A crash anywhere loses no conversation and writes no record twice (docs,
Contributing, Architecture).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from kafka.consumer.fetcher import ConsumerRecord

from tracescore._kafka import LogOnce
from tracescore._kafka_config import KafkaConnection
from tracescore._service import Forward, ServiceLoop, ServiceTopics
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._logic import ConversationLogic, ConversationStats, Written
from tracescore.conversations._stored import encode_key
from tracescore.conversations._tracker import ConversationTracker, key_of
from tracescore.emit import ConversationMetrics, PhoenixAnnotations
from tracescore.model import ConversationRecord, EvaluationRecord, UnreadableRecord, read_evaluation_record

__all__ = ["ConversationService", "ConversationStats"]

_log = logging.getLogger("tracescore.conversations")
Clock = Callable[[], datetime]
_TURN_REASON_CHARS = 1_000


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
        self._phoenix = phoenix
        self._metrics = metrics or ConversationMetrics()
        self._on_record = on_record
        self._warn_once = LogOnce(_log)
        self.connection = kafka or KafkaConnection(bootstrap_servers=config.bootstrap_servers)
        self._logic = ConversationLogic(
            config, self.tracker, self.stats, skip=self._skip, on_written=self._written, clock=clock
        )
        c = config
        topics = ServiceTopics(
            inputs=[c.evaluations_topic],
            keyed=c.turns_topic,
            keyed_partitions=c.turns_partitions,
            state=c.state_topic,
            legacy_state=c.legacy_state_topic,
            outputs=[c.conversations_topic, *([c.spans_topic] if c.spans_topic else [])],
            verified=[c.conversations_topic],
        )
        # BrokerUnreachable (one line) when no broker answers within the connect timeout.
        self._loop = ServiceLoop(
            log=_log,
            connection=self.connection,
            group_id=c.group_id,
            session_timeout_ms=c.session_timeout_ms,
            rebalance_protocol=c.rebalance_protocol,
            stage="turns",
            topics=topics,
            forward=self._forward,
            oversized=lambda detail: self._skip("oversized_record", detail),
            logic=self._logic,
            open_keys=self.tracker.open,
            clock=clock,
            tick_seconds=c.tick_seconds,
            health_file=c.health_file,
            checkpoint_every_batch=False,
        )

    @property
    def first_assigned_at(self) -> float | None:
        return self._loop.keyed.first_assigned_at

    def stop(self) -> None:
        """Return from run() after the current pass. Safe from a signal handler."""
        self._loop.stop()

    def run(self, idle_timeout_s: float | None = None) -> ConversationStats:
        """Until stopped, or `idle_timeout_s` without a record (counted from the first assignment) with
        everything read and nothing left to write."""
        try:
            self._loop.run(idle_timeout_s)
        finally:
            if self._phoenix is not None:
                self._phoenix.close()
            self.stats.state.update(self._loop.keyed.counts)
        return self.stats

    # -- stage 1: re-key by conversation ----------------------------------------------------------------
    def _forward(self, message: ConsumerRecord) -> Forward | None:
        record = self._parse(message.value)
        if record is None:
            return None
        key = key_of(record)
        if key is None:
            self._skip("no_conversation", "its interaction carries no session.id / conversation id")
            return None
        return Forward(encode_key(key), record.slim(_TURN_REASON_CHARS).model_dump_json().encode())

    def _parse(self, value: bytes | None) -> EvaluationRecord | None:
        try:
            return read_evaluation_record(value)
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return None

    def _skip(self, reason: str, detail: str, count: int = 1) -> None:
        self.stats.skipped[reason] += count
        self._metrics.skipped(reason, count)
        # A turn without a conversation id is normal (a one-shot question): said once, not warned about.
        level = logging.INFO if reason == "no_conversation" else logging.WARNING
        self._warn_once(
            reason, "skipped a record (%s): %s; further ones are only counted", reason, detail, level=level
        )

    # -- stage 2's outputs ------------------------------------------------------------------------------
    def _written(self, done: Written) -> None:
        self.stats.state["recovered"] += done.found
        if done.evicted:
            self._metrics.skipped("evicted", done.evicted)
        for record in done.records:
            self.stats.records += 1
            self.stats.revisions += record.revision > 0
            self._metrics.recorded(record)
            if self._on_record is not None:
                self._on_record(record)
        if self._phoenix is not None and done.records:
            self._phoenix.send_sessions(done.records)
