"""The scoring service's loop, on one thread that owns every Kafka call; `run()` is the README's flow:

    poll -> decode -> assemble traces -> extract interactions -> sample   (Pipeline, no Kafka call)
         -> score (Judging, on the ScoringWorker's loop while this thread keeps polling)
         -> emit (the sink) -> ack -> commit                             (Checkpoint)
    and past `max_in_flight` interactions pending, pause fetching          (Pauser)

At-least-once: a partition commits only up to its first message whose trace is still buffered, being scored,
or has outputs Kafka has not acknowledged, so a crash replays exactly the unfinished work.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from enum import Enum

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from tracescore._kafka import (
    RebalanceListener,
    caught_up,
    check_broker,
    ensure_topics,
    lag,
    wait_for_partitions,
)
from tracescore.consume._assemble import TraceAssembler
from tracescore.consume._cascade import LockedPolicy, Scorer
from tracescore.consume._checkpoint import Checkpoint, OutputNotAcknowledged
from tracescore.consume._clients import connect
from tracescore.consume._gc import gc_tuned
from tracescore.consume._judging import Judged, Judging
from tracescore.consume._pauser import Pauser
from tracescore.consume._pipeline import Admitted, DeadLetter, Pipeline
from tracescore.consume._scoring import ScoringWorker
from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._status import ConsumerStats, StatusLine
from tracescore.emit import (
    EvaluationMetrics,
    EvaluationRecord,
    KafkaEvaluationSink,
    KafkaOutputSettings,
    RecordSink,
)
from tracescore.sample import SamplingPolicy, SkipReason
from tracescore.score import MetricResult, MetricStatus
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric

__all__ = ["ConsumerStats", "EvaluationConsumer", "OutputNotAcknowledged", "RunState", "default_sink"]

_log = logging.getLogger("tracescore.consume")
_BUSY_POLL_MS = 20  # while judges run, poll briefly so finished results are emitted promptly
_BROKER_PROBE_S = 5.0  # after the idle timeout, probe the broker at most this often


class RunState(Enum):
    RUNNING = "running"  # polling, scoring, committing
    FINISHING = "finishing"  # idle timeout or max_records: no more polling; score everything taken, return
    STOPPING = "stopping"  # stop(): finish only what is being scored (up to drain_timeout_s), return


def default_sink(producer: KafkaProducer, settings: ConsumerSettings) -> KafkaEvaluationSink:
    """The records, evaluation spans and dead letters on the configured topics."""
    return KafkaEvaluationSink(
        producer,
        KafkaOutputSettings(
            evaluations_topic=settings.evaluations_topic,
            dlq_topic=settings.dlq_topic,
            spans_topic=settings.spans_out_topic,
            max_message_bytes=settings.max_message_bytes,
        ),
    )


class EvaluationConsumer:
    """A member of a Kafka consumer group that scores the RAG interactions in the traces it reads. Scale out
    by starting more members: the Collector and tracescore's exporter key messages by trace id, so one member
    sees all of a trace.

    With a `policy`, it admits interactions (none: every one is scored); with an `llm_judge` too, the cascade:
    `judge` (the offline judge) scores every admitted interaction, the LLM judge those the policy escalates.
    `sink` (default: `default_sink` on the producer) and `worker` (default: a new ScoringWorker, closed when
    run() returns) may be given."""

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        judge: Judge,
        metrics: Sequence[Metric],
        policy: SamplingPolicy | None = None,
        llm_judge: Judge | None = None,
        on_evaluation: Callable[[EvaluationRecord], object] | None = None,
        metrics_out: EvaluationMetrics | None = None,
        sinks: Sequence[RecordSink] = (),
        consumer: KafkaConsumer | None = None,
        producer: KafkaProducer | None = None,
        sink: Callable[[KafkaProducer, ConsumerSettings], KafkaEvaluationSink] = default_sink,
        worker: Callable[[], ScoringWorker] = ScoringWorker,
    ) -> None:
        self.settings = settings
        self.stats = ConsumerStats()
        self._policy = LockedPolicy(policy) if policy is not None else None
        self._on_evaluation = on_evaluation
        self._metrics_out = metrics_out or EvaluationMetrics()
        self._sinks = tuple(sinks)
        self._consumer = consumer
        self._producer = producer
        self._make_sink = sink
        self._make_worker = worker
        self._sink: KafkaEvaluationSink  # made in run(), on the connected producer
        assembler = TraceAssembler(settings.assembly)
        self._assembler = assembler
        self._pipeline = Pipeline(assembler, self.stats, policy=self._policy, metrics_out=self._metrics_out)
        self._checkpoint = Checkpoint(assembler.low_watermarks, settings.commit_interval_s)
        self._judging = Judging(
            Scorer(judge, metrics, llm_judge=llm_judge, policy=self._policy), settings.max_in_flight
        )
        self._pauser = Pauser(settings.max_in_flight)
        self._status = StatusLine(self.stats, settings.status_interval_s)
        self._state = RunState.RUNNING
        self._stop_requested = False
        self._rebalance = RebalanceListener(
            _log,
            assigned=self.partitions_assigned,
            revoked=lambda _: self.partitions_revoked(lost=False),
            lost=lambda _: self.partitions_revoked(lost=True),
        )
        self._last_message: float | None = None
        self._drain_deadline = float("inf")
        self._broker_checked_at = 0.0
        self._busy_at = 0.0  # last time the loop had work in hand, for --idle-timeout

    @property
    def state(self) -> RunState:
        return self._state

    def stop(self) -> None:
        """Stop taking new work, finish what is being scored (up to `drain_timeout_s`), commit and return
        from run(). Safe from a signal handler."""
        self._stop_requested = True

    # --- the loop ----------------------------------------------------------------------------------------

    def run(self) -> ConsumerStats:
        with gc_tuned(self.settings.gc_gen0_threshold):  # decoding allocates much; see consume/_gc.py
            return self._run()

    def _run(self) -> ConsumerStats:
        consumer, producer = self._start()
        self._sink = self._make_sink(producer, self.settings)
        worker = self._make_worker()
        try:
            while True:
                self._check_stop()
                polled = self._poll(consumer)
                if polled:
                    self._take(polled)  # decode -> assemble -> extract -> sample
                self._finish_if_idle(polled)
                if self._state is RunState.RUNNING:
                    self._queue(self._pipeline.ready())
                if self._state is not RunState.STOPPING:
                    self._judging.submit(worker)  # score, on the worker's loop
                self._collect()  # emit
                self._settle()  # ack
                if self._state is RunState.RUNNING:
                    self._pauser.apply(consumer, self._judging.pending)
                    self.stats.pauses = self._pauser.pauses
                self._maybe_commit(force=False)  # commit
                if self._status.due():
                    self._log_status(consumer)
                if self._done():
                    break
        finally:
            worker.close()
            if self._policy is not None:
                self._policy.save()  # the cascade's learned suspicion models, when a state path is set
            self._finish_outputs(producer)
            self._maybe_commit(force=True)
            producer.close(timeout=self.settings.ack_timeout_s)
            consumer.close(autocommit=False)
            for extra in self._sinks:
                extra.close()
            self.stats.truncated_outputs = self._sink.truncated
        return self.stats

    def _connect(self) -> None:
        self._consumer, self._producer = connect(self.settings, self._consumer, self._producer)

    def _start(self) -> tuple[KafkaConsumer, KafkaProducer]:
        s = self.settings
        self._connect()
        assert self._consumer is not None and self._producer is not None
        ensure_topics(s.connection(), {s.topic, s.evaluations_topic, s.dlq_topic, s.spans_out_topic})
        wait_for_partitions(s.client_config(), [s.topic], timeout_s=s.connect_timeout_s)
        self._consumer.subscribe([s.topic], listener=self._rebalance)
        return self._consumer, self._producer

    def _check_stop(self) -> None:
        if self._stop_requested and self._state is RunState.RUNNING:
            self._state = RunState.STOPPING
            self._drain_deadline = time.monotonic() + self.settings.drain_timeout_s
            self._judging.drop_queued()  # not started: left uncommitted, read again after a restart
            _log.info("stopping: finishing %d interactions being scored", self._judging.running)

    def _busy(self) -> bool:
        return bool(self._judging.pending or self._checkpoint.settling)

    def _poll(self, consumer: KafkaConsumer) -> list[ConsumerRecord]:
        if self._state is not RunState.RUNNING:
            if self._busy():
                time.sleep(_BUSY_POLL_MS / 1000)
            return []
        timeout_ms = _BUSY_POLL_MS if self._busy() else self.settings.poll_timeout_ms
        batch: list[ConsumerRecord] = []
        for partition, messages in consumer.poll(timeout_ms=timeout_ms).items():
            if messages:
                # A partition's messages come in offset order: its first and last offsets say all it read.
                self._checkpoint.read(partition, messages[0].offset)
                self._checkpoint.read(partition, messages[-1].offset)
                batch += messages
        return batch

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        taken = self._pipeline.take(batch)
        self._dead_letter(taken.dead_letters)
        self._queue(taken.admitted)

    def _finish_if_idle(self, polled: list[ConsumerRecord]) -> None:
        if polled:
            # After taking them: decoding a large batch is not time without messages.
            self._last_message = time.monotonic()
        elif self._state is RunState.RUNNING and self._idle() and self._nothing_left():
            self._state = RunState.FINISHING
            _log.info("no message for %.1fs; finishing the buffered traces", self.settings.idle_timeout_s)
            self._queue(self._pipeline.flush())

    def _queue(self, admitted: list[Admitted]) -> None:
        for trace in admitted:
            work = self._checkpoint.hold(trace.offsets, scoring=len(trace.interactions))
            for revision, metrics in trace.interactions:
                self._judging.queue(work, revision, metrics)

    def _collect(self) -> None:
        for judged in self._judging.finished():
            self._write(judged)

    def _write(self, judged: Judged) -> None:
        """Count one judged interaction and send its outputs."""
        self._status.judged(time.monotonic() - judged.started)
        self._count(judged)
        scored = judged.scored
        assert scored is not None

        def selection(result: MetricResult) -> str | None:
            return scored.selection if result.judge == scored.llm_judge else None

        records, outputs = self._sink.write(
            judged.interaction,
            scored.results,
            judged.started_ns,
            selection,
            scored.weighting,
            judged.revision.revision,
            judged.revision.supersedes,
        )
        self._checkpoint.scored(judged.work, records, outputs)

    def _count(self, judged: Judged) -> None:
        scored = judged.scored
        assert scored is not None
        self.stats.scored += 1
        self.stats.judge_errors += sum(r.status is MetricStatus.ERROR for r in scored.results)
        if scored.selection is not None:
            self.stats.escalated[scored.selection] += 1
        if scored.escalation is not None:
            self._metrics_out.escalation(scored.escalation, judged.interaction.span.service_name)
            if scored.escalation == SkipReason.BUDGET:
                self.stats.sampling[scored.escalation] += 1

    def _settle(self) -> None:
        """Work whose outputs are all acknowledged reaches the other sinks (its offsets are finished)."""
        for work in self._checkpoint.settle():
            self.stats.evaluations += len(work.records)
            for record in work.records:
                self._metrics_out.evaluated(record)
                self._status.recorded(record)
                if self._on_evaluation is not None:
                    self._on_evaluation(record)
            if work.records:
                for extra in self._sinks:
                    extra.send(work.records)

    def _done(self) -> bool:
        state = self._state
        if state is RunState.RUNNING:
            if self.settings.max_records and self.stats.handled >= self.settings.max_records:
                self._state = state = RunState.FINISHING
            else:
                return False
        left = self._judging.running or self._checkpoint.settling
        if state is RunState.FINISHING and not (left or self._judging.queued):
            return True
        if state is RunState.STOPPING:
            if not left:
                return True
            if time.monotonic() > self._drain_deadline:
                _log.warning(
                    "drain timeout: %d interactions still being scored are left to be read again",
                    self._judging.running,
                )
                return True
        return False

    def _finish_outputs(self, producer: KafkaProducer) -> None:
        """On the way out: wait (bounded) for the acknowledgements of work already emitted, so its offsets
        can be committed; anything not acknowledged stays uncommitted."""
        if not self._checkpoint.settling:
            return
        producer.flush(timeout=self.settings.ack_timeout_s)
        try:
            self._settle()
        except OutputNotAcknowledged as exc:
            _log.warning("%s", exc)

    def _maybe_commit(self, force: bool) -> None:
        assert self._consumer is not None
        self._checkpoint.commit_with(self._consumer, force=force)

    def _dead_letter(self, dead_letters: Sequence[DeadLetter]) -> None:
        for dead in dead_letters:
            message = dead.message
            _log.warning(
                "dead-lettered %s[%d]@%d to %s: %s",
                message.topic, message.partition, message.offset, self.settings.dlq_topic, dead.error,
            )  # fmt: skip
            output = self._sink.dead_letter(
                message.topic, message.partition, message.offset, message.key, message.value,
                list(message.headers or ()), str(dead.error),
            )  # fmt: skip
            self._checkpoint.hold({dead.partition: message.offset}, outputs=[output])

    # --- rebalances (on kafka-python's IO thread, inside poll) -------------------------------------------

    def partitions_revoked(self, *, lost: bool) -> None:
        """Commit what is finished; leave everything else to the partitions' next owner, which reads it again
        from the committed offsets (work still being scored finishes and is emitted, possibly twice)."""
        assert self._consumer is not None
        self._checkpoint.revoke_with(self._consumer, lost=lost)  # before the buffer is cleared
        dropped = self._assembler.clear()
        queued = self._judging.drop_queued()
        if dropped or queued:
            _log.info(
                "rebalance: %d buffered traces and %d queued interactions left to the next owner",
                dropped,
                queued,
            )

    def partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """A kept partition is read again from its first offset not committed."""
        assert self._consumer is not None
        self._checkpoint.seek_with(self._consumer, assigned)

    # --- idleness and status -------------------------------------------------------------------------------

    def _idle(self) -> bool:
        timeout = self.settings.idle_timeout_s
        if timeout is None or self.first_assigned_at is None:
            return False
        if self._judging.pending or self._pauser.paused:
            # Busy (or paused, so nothing could be read): idleness starts when the work is done.
            self._busy_at = time.monotonic()
            return False
        since = max(self._last_message or 0.0, self.first_assigned_at, self._busy_at)
        return time.monotonic() - since >= timeout

    def _nothing_left(self) -> bool:
        """After the idle timeout: idle means every partition is read to its end, not a slow first fetch on a
        loaded machine; and a broker that is gone is an error (BrokerUnreachable), never a clean stop."""
        now = time.monotonic()
        if now - self._broker_checked_at >= _BROKER_PROBE_S:
            self._broker_checked_at = now
            check_broker(self.settings.bootstrap_servers, "the stream went idle", 5.0)
        assert self._consumer is not None
        return caught_up(self._consumer)

    @property
    def first_assigned_at(self) -> float | None:
        """When the first partitions were assigned (monotonic). --idle-timeout counts from then: waiting to
        join the group (a dead member's session still holding the partitions) is not idleness."""
        return self._rebalance.first_assigned_at

    def _log_status(self, consumer: KafkaConsumer) -> None:
        left = {f"{tp.topic}[{tp.partition}]": n for tp, n in lag(consumer, ask_broker=True).items()}
        self._status.log(left, self._judging.running, self._judging.queued, self._assembler.buffered_traces)
