"""The consumer loop: poll -> decode -> sample -> score -> emit -> wait for acks -> store offset -> commit.

At-least-once: input offsets are committed only after every output of the batch (evaluation records,
evaluation spans, dead letters) is acknowledged by Kafka. A crash before that replays the batch.
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

from tracescore.consume._decode import NotOtlp, RagSpan, Skip, classify, decode_message
from tracescore.consume._settings import ConsumerSettings
from tracescore.emit import EvaluationMetrics, EvaluationRecord, evaluation_record, evaluation_span
from tracescore.export import encode_trace_messages
from tracescore.sample import AlwaysSample, Sampler
from tracescore.score import MetricResult
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric, evaluate

__all__ = ["ConsumerStats", "EvaluationConsumer", "OutputNotAcknowledged"]

_log = logging.getLogger("tracescore.consume")


class OutputNotAcknowledged(RuntimeError):
    """Kafka did not acknowledge an output; the batch's offsets were not committed and will be replayed."""


@dataclass
class ConsumerStats:
    messages: int = 0
    spans: int = 0
    rag_spans: int = 0
    scored: int = 0
    sampled_out: int = 0
    evaluations: int = 0
    dead_letters: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def handled(self) -> int:
        """RAG-looking spans dealt with: scored, sampled out, or skipped with a logged reason."""
        return (
            self.scored
            + self.sampled_out
            + sum(n for reason, n in self.skipped.items() if reason not in ("not_rag", "evaluation_span"))
        )


class _CommitOnRevoke(ConsumerRebalanceListener):
    def __init__(self, owner: EvaluationConsumer) -> None:
        self._owner = owner

    def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        self._owner.commit_stored()

    def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        _log.info("assigned partitions: %s", sorted(f"{tp.topic}[{tp.partition}]" for tp in assigned))


class EvaluationConsumer:
    """A member of a Kafka consumer group that scores RAG spans. Scale out by starting more members."""

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        judge: Judge,
        metrics: Sequence[Metric],
        sampler: Sampler | None = None,
        on_evaluation: Callable[[EvaluationRecord], None] | None = None,
        metrics_out: EvaluationMetrics | None = None,
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
        self._consumer = consumer or KafkaConsumer(
            bootstrap_servers=settings.bootstrap_servers,
            group_id=settings.group_id,
            enable_auto_commit=False,
            auto_offset_reset=settings.auto_offset_reset,
            max_poll_records=settings.max_poll_records,
            max_poll_interval_ms=settings.max_poll_interval_ms,
        )
        self._producer = producer or KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all")
        self._stored: dict[TopicPartition, OffsetAndMetadata] = {}
        self._stopping = False

    def stop(self) -> None:
        """Finish the current batch, commit it and return from run(). Safe from a signal handler."""
        self._stopping = True

    def run(self) -> ConsumerStats:
        self._ensure_topics()
        self._consumer.subscribe([self.settings.topic], listener=_CommitOnRevoke(self))
        last_message = time.monotonic()
        try:
            with asyncio.Runner() as runner:
                while not self._stopping:
                    polled = self._consumer.poll(timeout_ms=self.settings.poll_timeout_ms)
                    batch = [m for messages in polled.values() for m in messages]
                    if batch:
                        last_message = time.monotonic()
                        self.process(batch, runner)
                        self.commit_stored()
                    elif self._idle_for(last_message):
                        _log.info("no message for %.1fs; stopping", self.settings.idle_timeout_s)
                        break
                    if self.settings.max_records and self.stats.handled >= self.settings.max_records:
                        break
        finally:
            self.commit_stored()
            self._producer.close(timeout=self.settings.ack_timeout_s)
            self._consumer.close(autocommit=False)
        return self.stats

    def process(self, batch: Sequence[ConsumerRecord], runner: asyncio.Runner) -> None:
        """Score one polled batch and store its offsets once every output is acknowledged."""
        pending: list[Any] = []
        to_score: list[RagSpan] = []
        for message in batch:
            self.stats.messages += 1
            try:
                spans = decode_message(message.value)
            except NotOtlp as exc:
                pending.append(self._dead_letter(message, exc))
                continue
            self.stats.spans += len(spans)
            for span in spans:
                outcome = classify(span)
                if isinstance(outcome, Skip):
                    self._skip(outcome)
                    continue
                self.stats.rag_spans += 1
                if self._sampler.should_sample(outcome):
                    to_score.append(outcome)
                else:
                    self.stats.sampled_out += 1
        records = self._score(to_score, runner, pending) if to_score else []
        self._await_acks(pending)
        self.stats.evaluations += len(records)
        for message in batch:
            tp = TopicPartition(message.topic, message.partition)
            self._stored[tp] = OffsetAndMetadata(message.offset + 1, "", -1)
        for record in records:
            self._metrics_out.evaluated(record)
            if self._on_evaluation is not None:
                self._on_evaluation(record)

    def commit_stored(self) -> None:
        if not self._stored:
            return
        try:
            self._consumer.commit(offsets=dict(self._stored))
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
        self.stats.skipped[skip.reason] += 1
        self._metrics_out.skipped(skip.reason)
        if not skip.expected:
            _log.warning("skipped (%s): %s", skip.reason, skip.detail)

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

    def _idle_for(self, last_message: float) -> bool:
        timeout = self.settings.idle_timeout_s
        return timeout is not None and time.monotonic() - last_message >= timeout
