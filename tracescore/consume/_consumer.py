"""The consumer loop: poll -> decode -> assemble traces -> extract interactions -> sample -> score -> emit ->
wait for acks -> store offsets -> commit.

At-least-once: a partition's offset is committed only up to the first message that still holds a buffered
trace, and only after every output of the released traces (evaluation records, evaluation spans, dead
letters) is acknowledged by Kafka. A crash before that replays those messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from tracescore import semconv
from tracescore._rag_span import RagSpan, Trace
from tracescore.consume._assemble import TraceAssembler
from tracescore.consume._decode import NotOtlp, decode_message
from tracescore.consume._settings import ConsumerSettings
from tracescore.emit import (
    EvaluationMetrics,
    EvaluationRecord,
    RecordSink,
    evaluation_record,
    evaluation_span,
)
from tracescore.export import encode_trace_messages
from tracescore.extract import Skip, extract
from tracescore.sample import AlwaysSample, Sampler
from tracescore.score import MetricResult
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric, evaluate

__all__ = ["ConsumerStats", "EvaluationConsumer", "OutputNotAcknowledged"]

_log = logging.getLogger("tracescore.consume")
EVALUATOR_SCOPE = semconv.EVALUATOR_SCOPE


class OutputNotAcknowledged(RuntimeError):
    """Kafka did not acknowledge an output; the batch's offsets were not committed and will be replayed."""


@dataclass
class ConsumerStats:
    messages: int = 0
    spans: int = 0
    traces: int = 0
    rag_spans: int = 0  # interactions recognised
    scored: int = 0
    sampled_out: int = 0
    evaluations: int = 0
    dead_letters: int = 0
    # Traces (or interactions in them) not scored, by reason; and by (service, scope, reason) to show whose.
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_by_source: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    # Assembly: late_spans, duplicate_spans, evaluation_spans (ours, read back), released_<why>.
    assembly: Counter[str] = field(default_factory=Counter)

    @property
    def handled(self) -> int:
        """Interactions dealt with: scored, sampled out, or skipped with a logged reason."""
        return self.scored + self.sampled_out + sum(n for r, n in self.skipped.items() if r != "not_rag")


class _CommitOnRevoke(ConsumerRebalanceListener):
    def __init__(self, owner: EvaluationConsumer) -> None:
        self._owner = owner

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self._owner.commit_stored()
        self._owner.forget_buffered()

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        _log.info("assigned partitions: %s", sorted(f"{tp.topic}[{tp.partition}]" for tp in assigned))
        if self._owner.first_assigned_at is None:
            self._owner.first_assigned_at = time.monotonic()


class EvaluationConsumer:
    """A member of a Kafka consumer group that scores RAG interactions. Scale out by starting more members:
    the Collector and our exporter key messages by trace id, so one member sees all of a trace."""

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        judge: Judge,
        metrics: Sequence[Metric],
        sampler: Sampler | None = None,
        on_evaluation: Callable[[EvaluationRecord], None] | None = None,
        metrics_out: EvaluationMetrics | None = None,
        sinks: Sequence[RecordSink] = (),
        consumer: KafkaConsumer | None = None,
        producer: KafkaProducer | None = None,
    ) -> None:
        self.settings = settings
        self.stats = ConsumerStats()
        self._judge = judge
        self._metrics = tuple(metrics)
        self._sampler = sampler or AlwaysSample()
        self._on_evaluation = on_evaluation
        self._metrics_out = metrics_out or EvaluationMetrics()
        self._sinks = tuple(sinks)
        self._consumer = consumer or KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers,
            group_id=settings.group_id,
            enable_auto_commit=False,
            auto_offset_reset=settings.auto_offset_reset,
            max_poll_records=settings.max_poll_records,
            max_poll_interval_ms=settings.max_poll_interval_ms,
        )
        self._producer = producer or KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
        self._assembler = TraceAssembler(settings.assembly)
        self._read_up_to: dict[TopicPartition, int] = {}  # next offset after the last message taken in
        self._read_from: dict[TopicPartition, int] = {}  # first offset taken in since the assignment
        self._stored: dict[TopicPartition, OffsetAndMetadata] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._logged_skips: set[tuple[str, str, str]] = set()
        self._stopping = False
        # --idle-timeout counts from the first assignment: waiting to join the group (a dead member's
        # session still holding the partitions) is not idleness.
        self.first_assigned_at: float | None = None

    def stop(self) -> None:
        """Finish the current batch, commit it and return from run(). Safe from a signal handler."""
        self._stopping = True

    def run(self) -> ConsumerStats:
        self._ensure_topics()
        self._consumer.subscribe([self.settings.topic], listener=_CommitOnRevoke(self))
        last_message: float | None = None
        try:
            with asyncio.Runner() as runner:
                while not self._stopping:
                    polled = self._consumer.poll(timeout_ms=self.settings.poll_timeout_ms)
                    batch = [m for messages in polled.values() for m in messages]
                    idle = False
                    if batch:
                        last_message = time.monotonic()
                    elif self._idle_for(last_message):
                        idle = True
                    self.process(batch, runner, release_all=idle)
                    self.commit_stored()
                    if idle:
                        _log.info("no message for %.1fs; stopping", self.settings.idle_timeout_s)
                        break
                    if self.settings.max_records and self.stats.handled >= self.settings.max_records:
                        break
        finally:
            self.commit_stored()
            self._producer.close(timeout=self.settings.ack_timeout_s)
            self._consumer.close(autocommit=False)
            for sink in self._sinks:
                sink.close()
        return self.stats

    def process(
        self, batch: Sequence[ConsumerRecord], runner: asyncio.Runner, release_all: bool = False
    ) -> None:
        """Take one polled batch into the trace buffer, score the traces that are ready, and store the
        offsets that no buffered trace still needs once every output is acknowledged.

        `release_all` reads every buffered trace now (the stream went idle: nothing more is coming)."""
        pending: list[Any] = []
        released: list[Trace] = []
        for message in batch:
            self.stats.messages += 1
            tp = TopicPartition(message.topic, message.partition)
            self._read_up_to[tp] = message.offset + 1
            self._read_from.setdefault(tp, message.offset)
            try:
                spans = decode_message(message.value)
            except NotOtlp as exc:
                pending.append(self._dead_letter(message, exc))
                continue
            self.stats.spans += len(spans)
            # Our own evaluation spans come back on the input topic by default: never buffer them.
            ours = [s for s in spans if s.scope_name == EVALUATOR_SCOPE]
            if ours:
                self.stats.assembly["evaluation_spans"] += len(ours)
                spans = [s for s in spans if s.scope_name != EVALUATOR_SCOPE]
            size = len(message.value or b"")
            released += self._assembler.add(spans, tp, message.offset, size)
        released += self._assembler.release_all() if release_all else self._assembler.ready()
        to_score: list[RagSpan] = []
        for trace in released:
            to_score += self._interactions(trace)
        records = self._score(to_score, runner, pending) if to_score else []
        self._await_acks(pending)
        self.stats.evaluations += len(records)
        self.stats.assembly.update(self._assembler.counts)
        self._assembler.counts.clear()
        self._store_offsets()
        for record in records:
            self._metrics_out.evaluated(record)
            if self._on_evaluation is not None:
                self._on_evaluation(record)
        if records:
            for sink in self._sinks:
                sink.send(records)

    def forget_buffered(self) -> None:
        """Partitions were revoked: drop buffered traces; whoever owns the partitions next re-reads them
        from the committed offsets, which never passed a buffered trace."""
        dropped = self._assembler.clear()
        self._read_up_to.clear()
        self._read_from.clear()
        self._committed.clear()
        if dropped:
            _log.info("rebalance: %d buffered traces left to the partitions' next owner", dropped)

    def _interactions(self, trace: Trace) -> list[RagSpan]:
        self.stats.traces += 1
        found = extract(trace)
        for skip in found.skips:
            self._skip(skip)
        wanted = []
        for interaction in found.interactions:
            self.stats.rag_spans += 1
            if self._sampler.should_sample(interaction):
                wanted.append(interaction)
            else:
                self.stats.sampled_out += 1
        return wanted

    def _store_offsets(self) -> None:
        held = self._assembler.low_watermarks()
        for tp, next_offset in self._read_up_to.items():
            offset = min(next_offset, held.get(tp, next_offset))
            # Nothing new is done below the first offset read: committing it would only restate the group's.
            if offset > self._read_from[tp] and self._committed.get(tp) != offset:
                self._stored[tp] = OffsetAndMetadata(offset, "", -1)

    def commit_stored(self) -> None:
        if not self._stored:
            return
        try:
            self._consumer.commit(offsets=dict(self._stored))
            self._committed.update({tp: meta.offset for tp, meta in self._stored.items()})
        except CommitFailedError as exc:
            # The group rebalanced while we scored (a batch slower than max_poll_interval_ms): the partitions'
            # new owner re-reads these messages, so their outputs may appear twice, never zero times.
            _log.warning(
                "offsets not committed, the group rebalanced during the batch (%s); those messages will be "
                "scored again. Lower --max-poll-records or raise max_poll_interval_ms if this repeats.",
                exc,
            )
        self._stored.clear()

    def _score(
        self, rags: list[RagSpan], runner: asyncio.Runner, pending: list[Any]
    ) -> list[EvaluationRecord]:
        started = time.time_ns()
        all_results: list[list[MetricResult]] = runner.run(self._evaluate_all(rags))
        records = []
        eval_spans = []
        for rag, results in zip(rags, all_results, strict=True):
            self.stats.scored += 1
            for result in results:
                span = evaluation_span(rag, result, start_ns=started)
                eval_spans.append(span)
                record = evaluation_record(rag, result, format(span.context.span_id, "016x"))
                records.append(record)
                key, value = record.to_kafka()
                pending.append(self._producer.send(self.settings.evaluations_topic, key=key, value=value))
        for key, value in encode_trace_messages(eval_spans):
            pending.append(self._producer.send(self.settings.spans_out_topic, key=key, value=value))
        return records

    async def _evaluate_all(self, rags: list[RagSpan]) -> list[list[MetricResult]]:
        return list(await asyncio.gather(*(evaluate(r.record, self._metrics, self._judge) for r in rags)))

    def _dead_letter(self, message: ConsumerRecord, error: NotOtlp) -> Any:
        self.stats.dead_letters += 1
        self._metrics_out.dead_lettered()
        _log.warning(
            "dead-lettered %s[%d]@%d to %s: %s",
            message.topic,
            message.partition,
            message.offset,
            self.settings.dlq_topic,
            error,
        )
        headers = [
            ("tracescore.error", str(error).encode()),
            ("tracescore.source", f"{message.topic}[{message.partition}]@{message.offset}".encode()),
            *((k, v) for k, v in (message.headers or [])),
        ]
        return self._producer.send(
            self.settings.dlq_topic, key=message.key, value=message.value or b"", headers=headers
        )

    def _skip(self, skip: Skip) -> None:
        service = skip.span.service_name if skip.span else "unknown_service"
        scope = (skip.span.scope_name or "(no scope)") if skip.span else "(no scope)"
        source = (service, scope, skip.reason)
        self.stats.skipped[skip.reason] += 1
        self.stats.skipped_by_source[source] += 1
        self._metrics_out.skipped(skip.reason, service, scope)
        if source not in self._logged_skips:
            # Once per (service, scope, reason), so a user sees at once why their traffic is not scored
            # without a line per trace; the counts carry the rest.
            self._logged_skips.add(source)
            level = logging.INFO if skip.expected else logging.WARNING
            _log.log(
                level,
                "not scored (%s) from %s/%s: %s [logged once]",
                skip.reason,
                service,
                scope,
                skip.detail,
            )
        else:
            _log.debug("not scored (%s): %s", skip.reason, skip.detail)

    def _await_acks(self, pending: list[Any]) -> None:
        if not pending:
            return
        self._producer.flush(timeout=self.settings.ack_timeout_s)
        failures = [f.exception for f in pending if not f.is_done or f.failed()]
        if failures:
            raise OutputNotAcknowledged(
                f"{len(failures)} of {len(pending)} outputs not acknowledged by Kafka "
                f"(first: {failures[0]!r}); offsets not committed, the batch will be re-read"
            )

    def _ensure_topics(self) -> None:
        """Create missing topics with the broker's defaults. Best effort: where the consumer may not create
        topics, the broker's auto-creation or the operator's provisioning applies."""
        s = self.settings
        wanted = {s.topic, s.evaluations_topic, s.dlq_topic, s.spans_out_topic}
        try:
            admin = KafkaAdminClient(bootstrap_servers=s.bootstrap_servers)
        except KafkaError as exc:
            _log.debug("cannot check topics: %s", exc)
            return
        try:
            missing = wanted - set(admin.list_topics())
            if missing:
                admin.create_topics([NewTopic(name) for name in sorted(missing)], raise_errors=False)
                _log.info("created topics: %s", ", ".join(sorted(missing)))
        except KafkaError as exc:
            _log.debug("could not create topics %s: %s", wanted, exc)
        finally:
            admin.close()

    def _idle_for(self, last_message: float | None) -> bool:
        timeout = self.settings.idle_timeout_s
        if timeout is None or self.first_assigned_at is None:
            return False
        since = max(last_message or 0.0, self.first_assigned_at)
        return time.monotonic() - since >= timeout
