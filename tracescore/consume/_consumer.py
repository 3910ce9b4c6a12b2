"""The scoring service's loop, on one thread that owns every Kafka call:

    poll -> decode -> assemble traces -> extract interactions -> sample -> submit to the judges
    ... judges run on their own loop (ScoringWorker) while this thread keeps polling ...
    collect results -> emit (KafkaEvaluationSink) -> acknowledged -> release offsets -> commit

No barrier between batches: up to `max_in_flight` interactions are scored at once whatever batch they came
from; past that the partitions are paused (polling goes on, so the group never thinks the member dead).
At-least-once: a partition commits only up to its first message whose trace is still buffered, being scored,
or has outputs Kafka has not acknowledged (OffsetTracker), so a crash replays exactly the unfinished work.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from tracescore import semconv
from tracescore._kafka import (
    LogOnce,
    RebalanceListener,
    caught_up,
    check_broker,
    ensure_topics,
    lag,
    wait_for_partitions,
)
from tracescore.consume._assemble import TraceAssembler
from tracescore.consume._cascade import LockedPolicy, Scored, Scorer
from tracescore.consume._clients import connect
from tracescore.consume._decode import NotOtlp, decode_message
from tracescore.consume._offsets import OffsetTracker
from tracescore.consume._revise import Revision
from tracescore.consume._scoring import ScoringWorker
from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._status import ConsumerStats, StatusLine
from tracescore.emit import (
    EVALUATION_SPANS_HEADER,
    EvaluationMetrics,
    EvaluationRecord,
    KafkaEvaluationSink,
    KafkaOutputSettings,
    Output,
    RecordSink,
)
from tracescore.extract import Skip, extract
from tracescore.model import RagSpan, Trace
from tracescore.sample import AlwaysSample, Sampler, SamplingPolicy, SkipReason
from tracescore.score import MetricResult, MetricStatus
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric

__all__ = ["ConsumerStats", "EvaluationConsumer", "OutputNotAcknowledged"]

_log = logging.getLogger("tracescore.consume")
_BUSY_POLL_MS = 20  # while judges run, poll briefly so finished results are emitted promptly


class OutputNotAcknowledged(RuntimeError):
    """Kafka did not acknowledge an output after its retries; offsets of that work were not committed and
    it will be read again by whoever owns the partition next."""


@dataclass
class _Work:
    """What one released trace (or one dead letter) still waits for before its offsets may be committed."""

    offsets: dict[Any, int]
    generation: int
    scoring: int = 0
    outputs: list[Output] = field(default_factory=list)
    records: list[EvaluationRecord] = field(default_factory=list)


@dataclass
class _Scoring:
    work: _Work
    interaction: RagSpan
    started: float
    started_ns: int
    revision: Revision


class EvaluationConsumer:
    """A member of a Kafka consumer group that scores the RAG interactions in the traces it reads. Scale out
    by starting more members: the Collector and tracescore's exporter key messages by trace id, so one member
    sees all of a trace."""

    def __init__(
        self,
        settings: ConsumerSettings,
        *,
        judge: Judge,
        metrics: Sequence[Metric],
        sampler: Sampler | None = None,
        policy: SamplingPolicy | None = None,
        llm_judge: Judge | None = None,
        on_evaluation: Callable[[EvaluationRecord], object] | None = None,
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
        # With a policy, it admits instead of the sampler; with an LLM judge too, the cascade: `judge`
        # (the offline judge) scores every admitted interaction, the LLM judge those the policy escalates.
        self._policy = LockedPolicy(policy) if policy is not None else None
        self._scorer = Scorer(judge, metrics, llm_judge=llm_judge, policy=self._policy)
        self._on_evaluation = on_evaluation
        self._metrics_out = metrics_out or EvaluationMetrics()
        self._sinks = tuple(sinks)
        self._consumer = consumer
        self._producer = producer
        self._assembler = TraceAssembler(settings.assembly)
        self._offsets = OffsetTracker()
        self._rewind: dict[Hashable, int] = {}  # revoked partition -> where to resume if it comes back
        self._status = StatusLine(self.stats, settings.status_interval_s)
        self._queue: deque[tuple[_Work, Revision, tuple[str, ...] | None]] = deque()
        self._scoring: dict[Future[Scored], _Scoring] = {}
        self._settling: list[_Work] = []
        self._log_once = LogOnce(_log)
        self._paused = False
        self._stopping = False
        self._last_commit = 0.0
        self._rebalance = RebalanceListener(
            _log,
            assigned=self.partitions_assigned,
            revoked=lambda _: self.partitions_revoked(lost=False),
            lost=lambda _: self.partitions_revoked(lost=True),
        )
        self._broker_checked_at = 0.0
        self._busy_at = 0.0  # last time the loop had work in hand, for --idle-timeout

    # --- lifecycle ---------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking new work, finish what is being scored (up to `drain_timeout_s`), commit and return
        from run(). Safe from a signal handler."""
        self._stopping = True

    def run(self) -> ConsumerStats:
        self._connect()
        self._ensure_topics()
        assert self._consumer is not None and self._producer is not None
        sink = KafkaEvaluationSink(
            self._producer,
            KafkaOutputSettings(
                evaluations_topic=self.settings.evaluations_topic,
                dlq_topic=self.settings.dlq_topic,
                spans_topic=self.settings.spans_out_topic,
                max_message_bytes=self.settings.max_message_bytes,
            ),
        )
        self._sink = sink
        worker = ScoringWorker()
        self._worker = worker
        self._consumer.subscribe([self.settings.topic], listener=self._rebalance)
        last_message: float | None = None
        finishing: str | None = None  # why the loop is winding down: idle, max_records, stop
        drain_deadline = float("inf")
        try:
            while True:
                if self._stopping and finishing is None:
                    finishing, drain_deadline = "stop", time.monotonic() + self.settings.drain_timeout_s
                    self._queue.clear()  # not started: left uncommitted, read again after a restart
                    _log.info("stopping: finishing %d interactions being scored", len(self._scoring))
                busy = bool(self._scoring or self._queue or self._settling)
                if finishing is None:
                    polled = self._consumer.poll(
                        timeout_ms=_BUSY_POLL_MS if busy else self.settings.poll_timeout_ms
                    )
                    batch = [m for messages in polled.values() for m in messages]
                else:
                    batch = []
                    self._wait_briefly(busy)
                if batch:
                    self._take(batch)
                    # After taking it: decoding a large batch is not time without messages.
                    last_message = time.monotonic()
                elif finishing is None and self._idle_for(last_message) and self._nothing_left():
                    finishing = "idle"
                    _log.info(
                        "no message for %.1fs; finishing the buffered traces", self.settings.idle_timeout_s
                    )
                    self._release(self._assembler.release_all())
                if finishing is None:
                    self._release(self._assembler.ready())
                if finishing != "stop":
                    self._submit()
                self._collect()
                self._settle()
                if finishing is None:
                    self._backpressure()
                self._maybe_commit(force=False)
                if self._status.due():
                    self._log_status()
                if (
                    finishing is None
                    and self.settings.max_records
                    and self.stats.handled >= self.settings.max_records
                ):
                    finishing = "max_records"
                if finishing is not None and not (
                    self._scoring or self._settling or (finishing != "stop" and self._queue)
                ):
                    break
                if finishing == "stop" and time.monotonic() > drain_deadline:
                    _log.warning(
                        "drain timeout: %d interactions still being scored are left to be read again",
                        len(self._scoring),
                    )
                    break
        finally:
            worker.close()
            if self._policy is not None:
                self._policy.save()  # the cascade's learned suspicion models, when a state path is set
            self._finish_outputs()
            self._maybe_commit(force=True)
            self._producer.close(timeout=self.settings.ack_timeout_s)
            self._consumer.close(autocommit=False)
            for extra in self._sinks:
                extra.close()
            self.stats.truncated_outputs = sink.truncated
        return self.stats

    def partitions_revoked(self, *, lost: bool) -> None:
        """Commit what is finished; leave everything else to the partitions' next owner, which reads it again
        from the committed offsets (work still being scored finishes and is emitted, possibly twice).

        `lost`: the member was removed from the group (session expired), so a commit would be refused, and
        kafka-python starts every partition it gets back from the group's committed offset."""
        committing = {} if lost else self._offsets.committable(self._assembler.low_watermarks())
        dropped = self._assembler.clear()
        queued = len(self._queue)
        self._queue.clear()
        rewind = self._offsets.reset()
        self._rewind = {} if lost else rewind
        if committing:
            self._commit_on_revoke(committing)
        if dropped or queued:
            _log.info(
                "rebalance: %d buffered traces and %d queued interactions left to the next owner",
                dropped,
                queued,
            )

    def _commit_on_revoke(self, offsets: dict[Hashable, int]) -> None:
        """Commit finished work before the group rejoins, so the next owner does not read it again.

        The rebalance listener runs on kafka-python's IO thread, where a blocking commit raises (and the
        error, out of poll, stopped the member): the commit is sent without waiting. Its response arrives
        before the new assignment (same connection, in order), and a kept partition then resumes after it."""
        assert self._consumer is not None

        def committed(_: object) -> None:
            for tp, offset in offsets.items():
                if tp in self._rewind:
                    self._rewind[tp] = max(self._rewind[tp], offset)

        def not_committed(exc: object) -> None:
            # Nothing is lost (the work is read again), but say why its outputs appear twice.
            _log.warning("offsets not committed before the rebalance (%s); that work will be read again", exc)

        try:
            future = self._consumer.commit_async(
                offsets={tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}
            )
            future.add_callback(committed)
            future.add_errback(not_committed)
        except KafkaError as exc:
            not_committed(exc)

    def partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """A partition kept through the rebalance keeps kafka-python's fetch position, past the messages
        whose work was dropped on revoke: read it again from the first offset not committed."""
        rewind, self._rewind = self._rewind, {}
        assert self._consumer is not None
        for tp in assigned:
            if tp in rewind:
                self._consumer.seek(tp, rewind[tp])

    # --- the steps -----------------------------------------------------------------------------------------

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        released: list[Trace] = []
        for message in batch:
            self.stats.messages += 1
            tp = TopicPartition(message.topic, message.partition)
            self._offsets.read(tp, message.offset)
            if any(key == EVALUATION_SPANS_HEADER for key, _ in message.headers or ()):
                self.stats.assembly["evaluation_span_messages"] += 1  # ours, read back: never decoded
                continue
            try:
                spans = decode_message(message.value)
            except NotOtlp as exc:
                self._dead_letter(message, tp, exc)
                continue
            self.stats.spans += len(spans)
            # Evaluation spans written by an older version or another producer, without our header.
            ours = [s for s in spans if s.scope_name == semconv.EVALUATOR_SCOPE]
            if ours:
                self.stats.assembly["evaluation_spans"] += len(ours)
                spans = [s for s in spans if s.scope_name != semconv.EVALUATOR_SCOPE]
            released += self._assembler.add(spans, tp, message.offset, len(message.value or b""))
        self._release(released)

    def _release(self, traces: list[Trace]) -> None:
        for trace in traces:
            self.stats.traces += 1
            found = extract(trace)
            # A trace rebuilt by late spans: only what changed is scored again, as a revision.
            revisions, skips = self._assembler.revise(trace, found.interactions, found.skips)
            for skip in skips:
                self._skip(skip)
            wanted: list[tuple[Revision, tuple[str, ...] | None]] = []
            for revision in revisions:
                self.stats.rag_spans += 1
                admitted, metrics = self._admit(revision.interaction)
                if admitted:
                    wanted.append((revision, metrics))
                else:
                    self.stats.sampled_out += 1
            if wanted:
                work = _Work(dict(trace.offsets), self._offsets.hold(trace.offsets), scoring=len(wanted))
                self._queue.extend((work, revision, metrics) for revision, metrics in wanted)
        self.stats.assembly.update(self._assembler.counts)
        self._assembler.counts.clear()

    def _admit(self, interaction: RagSpan) -> tuple[bool, tuple[str, ...] | None]:
        if self._policy is None:
            return self._sampler.should_sample(interaction), None
        decision = self._policy.admit(interaction)
        if decision.skip is not None:
            self.stats.sampling[decision.skip.value] += 1
            self._metrics_out.skipped(
                decision.skip.value, interaction.span.service_name, interaction.span.scope_name
            )
            return False, None
        return True, decision.metrics

    def _submit(self) -> None:
        while self._queue and len(self._scoring) < self.settings.max_in_flight:
            work, revision, metrics = self._queue.popleft()
            interaction = revision.interaction
            future = self._worker.submit(self._scorer.score(interaction, metrics))
            self._scoring[future] = _Scoring(work, interaction, time.monotonic(), time.time_ns(), revision)

    def _collect(self) -> None:
        for future in [f for f in self._scoring if f.done()]:
            scoring = self._scoring.pop(future)
            self._status.judged(time.monotonic() - scoring.started)
            scored = self._results(future, scoring.interaction)
            self.stats.scored += 1
            self.stats.judge_errors += sum(r.status is MetricStatus.ERROR for r in scored.results)
            if scored.selection is not None:
                self.stats.escalated[scored.selection] += 1
            if scored.escalation is not None:
                self._metrics_out.escalation(scored.escalation, scoring.interaction.span.service_name)
                if scored.escalation == SkipReason.BUDGET:
                    self.stats.sampling[scored.escalation] += 1

            def selection(result: MetricResult, scored: Scored = scored) -> str | None:
                return scored.selection if result.judge == scored.llm_judge else None

            records, outputs = self._sink.write(
                scoring.interaction,
                scored.results,
                scoring.started_ns,
                selection,
                scored.weighting,
                scoring.revision.revision,
                scoring.revision.supersedes,
            )
            work = scoring.work
            work.records += records
            work.outputs += outputs
            work.scoring -= 1
            if work.scoring == 0:
                self._settling.append(work)

    def _settle(self) -> None:
        """Work whose outputs are all acknowledged releases its offsets and reaches the other sinks."""
        still = []
        for work in self._settling:
            if not self._acknowledged(work):
                still.append(work)
                continue
            self._offsets.release(work.offsets, work.generation)
            self.stats.evaluations += len(work.records)
            for record in work.records:
                self._metrics_out.evaluated(record)
                self._status.recorded(record)
                if self._on_evaluation is not None:
                    self._on_evaluation(record)
            if work.records:
                for extra in self._sinks:
                    extra.send(work.records)
        self._settling = still

    def _acknowledged(self, work: _Work) -> bool:
        for index, output in enumerate(work.outputs):
            if not output.done:
                return False
            if output.error is None:
                continue
            if output.too_large and output.fallback is not None:
                _log.warning("Kafka rejected %s as too large; sending a smaller record instead", output.what)
                work.outputs[index] = output.fallback()
                return False
            if output.too_large and output.droppable:
                _log.warning(
                    "Kafka rejected %s as too large; it is dropped (the record carries the score)",
                    output.what,
                )
                work.outputs[index] = Output(_Acked(), output.what)
                continue
            raise OutputNotAcknowledged(
                f"Kafka did not acknowledge {output.what} ({output.error!r}); its input offsets were not "
                "committed and will be read again"
            )
        return True

    def _finish_outputs(self) -> None:
        """On the way out: wait (bounded) for the acknowledgements of work already emitted, so its offsets
        can be committed; anything not acknowledged stays uncommitted."""
        if not self._settling or self._producer is None:
            return
        self._producer.flush(timeout=self.settings.ack_timeout_s)
        try:
            self._settle()
        except OutputNotAcknowledged as exc:
            _log.warning("%s", exc)

    def _maybe_commit(self, force: bool) -> None:
        if self._consumer is None:
            return
        now = time.monotonic()
        if not force and now - self._last_commit < self.settings.commit_interval_s:
            return
        self._last_commit = now
        offsets = self._offsets.committable(self._assembler.low_watermarks())
        if not offsets:
            return
        try:
            self._consumer.commit(offsets={tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
            self._offsets.committed(offsets)
        except CommitFailedError as exc:
            # The group rebalanced under us: the partitions' new owner re-reads from the last commit, so
            # outputs may appear twice, never zero times.
            _log.warning(
                "offsets not committed, the group rebalanced (%s); that work will be read again", exc
            )
        except KafkaError as exc:
            _log.warning("offsets not committed (%s); retrying at the next commit", exc)

    def _backpressure(self) -> None:
        assert self._consumer is not None
        pending = len(self._scoring) + len(self._queue)
        if not self._paused and pending >= self.settings.max_in_flight:
            self._paused = True
            self.stats.pauses += 1
            _log.debug("pausing partitions: %d interactions pending", pending)
        elif self._paused and pending <= self.settings.max_in_flight // 2:
            self._paused = False
            self._consumer.resume(*self._consumer.assignment())
        if self._paused:
            # Re-applied every loop: a rebalance gives back partitions unpaused.
            self._consumer.pause(*self._consumer.assignment())

    # --- helpers -------------------------------------------------------------------------------------------

    def _results(self, future: Future[Scored], interaction: RagSpan) -> Scored:
        try:
            return future.result()
        except BaseException as exc:  # a judge bug or a cancelled task must not stop the service
            reason = f"scoring failed: {type(exc).__name__}: {exc}"
            _log.error("%s (trace %s)", reason, interaction.span.trace_id)
            return Scored([
                MetricResult(
                    metric=m.name, score=None, status=MetricStatus.ERROR, reason=reason,
                    judge=self._judge.name, details={"error_type": type(exc).__name__},
                )
                for m in self._metrics
            ])  # fmt: skip

    def _dead_letter(self, message: ConsumerRecord, tp: TopicPartition, error: NotOtlp) -> None:
        self.stats.dead_letters += 1
        self._metrics_out.dead_lettered()
        _log.warning(
            "dead-lettered %s[%d]@%d to %s: %s",
            message.topic, message.partition, message.offset, self.settings.dlq_topic, error,
        )  # fmt: skip
        output = self._sink.dead_letter(
            message.topic, message.partition, message.offset, message.key, message.value,
            list(message.headers or ()), str(error),
        )  # fmt: skip
        offsets = {tp: message.offset}
        self._settling.append(_Work(offsets, self._offsets.hold(offsets), outputs=[output]))

    def _skip(self, skip: Skip) -> None:
        service = skip.span.service_name if skip.span else "unknown_service"
        scope = (skip.span.scope_name or "(no scope)") if skip.span else "(no scope)"
        source = (service, scope, skip.reason)
        self.stats.skipped[skip.reason] += 1
        self.stats.skipped_by_source[source] += 1
        self._metrics_out.skipped(skip.reason, service, scope)
        # Once per (service, scope, reason), so a user sees at once why their traffic is not scored without a
        # line per trace; the counts carry the rest.
        logged = self._log_once(
            source,
            "not scored (%s) from %s/%s: %s [logged once]",
            *(skip.reason, service, scope, skip.detail),
            level=logging.INFO if skip.expected else logging.WARNING,
        )
        if not logged:
            _log.debug("not scored (%s): %s", skip.reason, skip.detail)

    def _log_status(self) -> None:
        assert self._consumer is not None
        left = {f"{tp.topic}[{tp.partition}]": n for tp, n in lag(self._consumer, ask_broker=True).items()}
        self._status.log(left, len(self._scoring), len(self._queue), self._assembler.buffered_traces)

    def _wait_briefly(self, busy: bool) -> None:
        if busy:
            time.sleep(_BUSY_POLL_MS / 1000)

    def _idle_for(self, last_message: float | None) -> bool:
        timeout = self.settings.idle_timeout_s
        if timeout is None or self.first_assigned_at is None:
            return False
        if self._scoring or self._queue or self._paused:
            # Busy (or paused, so nothing could be read): idleness starts when the work is done.
            self._busy_at = time.monotonic()
            return False
        since = max(last_message or 0.0, self.first_assigned_at, self._busy_at)
        return time.monotonic() - since >= timeout

    def _nothing_left(self) -> bool:
        """After the idle timeout: idle means every partition is read to its end, not a slow first fetch on a
        loaded machine; and a broker that is gone is an error (BrokerUnreachable), never a clean stop. The
        broker is probed at most once every 5 s."""
        now = time.monotonic()
        if now - self._broker_checked_at >= 5.0:
            self._broker_checked_at = now
            self._check_broker("the stream went idle")
        return self._caught_up()

    def _caught_up(self) -> bool:
        """Every assigned partition's fetch position has reached its high watermark (both known)."""
        assert self._consumer is not None
        return caught_up(self._consumer)

    @property
    def first_assigned_at(self) -> float | None:
        """When the first partitions were assigned (monotonic). --idle-timeout counts from then: waiting to
        join the group (a dead member's session still holding the partitions) is not idleness."""
        return self._rebalance.first_assigned_at

    def _connect(self) -> None:
        self._consumer, self._producer = connect(self.settings, self._consumer, self._producer)

    def _check_broker(self, when: str, wait_s: float = 5.0) -> None:
        check_broker(self.settings.bootstrap_servers, when, wait_s)

    def _ensure_topics(self) -> None:
        s = self.settings
        ensure_topics(s.connection(), {s.topic, s.evaluations_topic, s.dlq_topic, s.spans_out_topic})
        wait_for_partitions(s.client_config(), [s.topic], timeout_s=s.connect_timeout_s)


class _Acked:
    """An output counted as settled (dropped with a warning)."""

    is_done = True

    def failed(self) -> bool:
        return False
