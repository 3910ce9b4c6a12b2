"""The scoring service's loop, on one thread that owns every Kafka call; `run()` is the README's flow:

    poll -> decode -> assemble traces -> extract interactions -> sample   (Pipeline, no Kafka call)
         -> score (Judging, on the ScoringWorker's loop while this thread keeps polling)
         -> emit (Outputs, through the sink) -> ack -> commit             (Checkpoint)
    and past `max_in_flight` interactions pending, pause fetching          (Pauser)
    until stop(), the idle timeout or `max_records`                        (Lifecycle)

At-least-once: a partition commits only up to its first message whose trace is still buffered, being scored,
or has outputs Kafka has not acknowledged, so a crash replays the unfinished work; each commit says which
traces after it are unfinished, so the next owner skips those already scored (Rebalance, _handover.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaConnectionError, KafkaError

from tracescore._kafka import (
    GroupProtocolMismatch,
    RebalanceListener,
    caught_up,
    check_broker,
    lag,
    protocol_checked,
)
from tracescore._plural import counted
from tracescore._service import AwaitedInputs, BrokerReach, GroupLook, OverdueExit, Reach, client_id
from tracescore.consume._assemble import TraceAssembler
from tracescore.consume._checkpoint import Checkpoint, OutputNotAcknowledged
from tracescore.consume._clients import connect, subscribe
from tracescore.consume._gc import gc_tuned
from tracescore.consume._judging import Judged, Judging
from tracescore.consume._lifecycle import Lifecycle, RunState
from tracescore.consume._outputs import Outputs, default_sink
from tracescore.consume._pauser import Pauser
from tracescore.consume._pipeline import Admitted, Pipeline
from tracescore.consume._rebalance import Rebalance
from tracescore.consume._scorer import Scorer
from tracescore.consume._scoring import ScoringWorker
from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._shared_policy import SharedPolicy
from tracescore.consume._status import ConsumerStats, StatusLine
from tracescore.consume._stopping import Wait
from tracescore.consume._stream_time import StreamTime
from tracescore.emit import EvaluationMetrics, KafkaEvaluationSink, RecordSink
from tracescore.model import EvaluationRecord
from tracescore.sample import SamplingPolicy
from tracescore.score.judges import Judge
from tracescore.score.metrics import Metric

__all__ = [
    "ConsumerStats", "EvaluationConsumer", "GroupProtocolMismatch", "OutputNotAcknowledged", "RunState",
    "default_sink",
]  # fmt: skip

_log = logging.getLogger("tracescore.consume")
# What a stop that outlives --stop-timeout leaves (`OverdueExit`: the process exits, status OVERDUE_EXIT).
_OVERDUE_LEAVES = (
    "without the stop's last steps (the last commit, leaving the group): whoever reads these partitions next "
    "starts from the offsets committed before, so the traces read since are read and scored again (at least "
    "once, nothing lost), and the group gives them to its other members after --session-timeout-ms"
)
_WAITING_RETRY_MS = 1000  # a member waiting for its topic, the broker gone: how often it looks again
_BUSY_POLL_MS = 20  # while judges run, poll briefly so finished results are emitted promptly


class EvaluationConsumer:
    """A member of a Kafka consumer group that scores the RAG interactions in the traces it reads. Scale out
    by starting more members: the Collector and tracescore's exporter put a trace's spans on the partition its
    trace id key maps to, so one member sees all of a trace.

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
        self._policy = SharedPolicy(policy) if policy is not None else None
        self._on_evaluation = on_evaluation
        self._metrics_out = metrics_out or EvaluationMetrics()
        if self._policy is not None:
            self._metrics_out.observe_lift(self._policy.lift_readings)
        self._sinks = tuple(sinks)
        self._judges = tuple(j for j in (judge, llm_judge) if j is not None)
        self._consumer = consumer
        self._producer = producer
        self._make_sink = sink
        self._make_worker = worker
        self._outputs: Outputs  # made in run(), on the connected producer's sink
        self._reach: BrokerReach  # made in run(), on the connected consumer
        # The assembly's grace and max wait count the stream's time, not how long a batch took to process.
        self._stream_time = stream_time = StreamTime(settings.assembly.grace_s)
        self._assembler = assembler = TraceAssembler(
            settings.assembly, clock=stream_time.now, stamp=stream_time.stamp
        )
        self._checkpoint = checkpoint = Checkpoint(assembler, settings.commit_interval_s)
        self._pipeline = Pipeline(
            assembler, self.stats, policy=self._policy, metrics_out=self._metrics_out,
            handovers=checkpoint.handovers, evidence=settings.conversation_evidence_topic is not None,
            infer_conversations=settings.infer_conversations,
        )  # fmt: skip
        self._judging = Judging(
            Scorer(judge, metrics, llm_judge=llm_judge, policy=self._policy), settings.max_in_flight
        )
        self._rebalancing = Rebalance(settings, checkpoint, assembler, self._judging, self._kafka)
        self._pauser = Pauser(settings.max_in_flight)
        self._status = StatusLine(
            self.stats,
            settings.status_interval_s,
            lift=self._policy.lift_readings if self._policy is not None else None,
        )
        self._inputs: AwaitedInputs | None = None  # subscribed in run()
        # Cooperatively, the group's members counted after each of its generations: an empty assignment
        # starts the idle clock only when they outnumber the partitions (as the services' members). Eagerly,
        # a stable generation's assignment is whole, an empty one too.
        self._members: GroupLook | None = None
        if settings.rebalance_protocol == "cooperative":
            self._members = GroupLook(
                settings.connection(),
                settings.group_id,
                client_id("tracescore consume"),
                stopping=lambda: self._lifecycle.stop_plan.budget.started_at is not None,
            )
        self._rebalance = RebalanceListener(
            _log,
            assigned=self.partitions_assigned,
            revoked=lambda revoked: self.partitions_revoked(revoked, lost=False),
            lost=lambda lost: self.partitions_revoked(lost, lost=True),
            regrouped=None if self._members is None else self._members.changed,
            outnumbered=None if self._members is None else self._members.outnumbered,
        )
        # Where the address came from, said if the broker goes away later, as at the start (`connect`).
        origin = settings.connection().bootstrap_origin
        self._lifecycle = Lifecycle(
            settings, self._judging, self._checkpoint, self._pauser, self.stats,
            assigned_at=lambda: self.first_assigned_at,
            at_end=lambda: caught_up(self._kafka()),
            probe=lambda: check_broker(settings.bootstrap_servers, "the stream went idle", 5.0, origin),
        )  # fmt: skip
        # A wait no signal interrupts (a broker call, a judge call that blocks the scoring loop) does not hold
        # the process past the stop's budget: it exits, as a crash would.
        self._overdue = OverdueExit(
            self._lifecycle.stop_plan.budget, _log, setting="--stop-timeout", leaves=_OVERDUE_LEAVES
        )

    @property
    def state(self) -> RunState:
        return self._lifecycle.state

    def stop(self) -> None:
        """Stop taking new work, finish what is being scored, commit and return from run(), all within
        `stop_timeout_s` (see StopPlan), or exit the process 2 s past it (`OverdueExit`). Safe from a signal
        handler."""
        self._lifecycle.stop()
        self._overdue.arm()

    # --- the loop ----------------------------------------------------------------------------------------

    def run(self) -> ConsumerStats:
        # decoding allocates much; see consume/_gc.py
        with gc_tuned(self.settings.gc_gen0_threshold), self._overdue.running():
            return self._run()

    def _run(self) -> ConsumerStats:
        consumer, producer = self._start()
        self._outputs = Outputs(
            self._make_sink(producer, self.settings), self._checkpoint, self.stats, self._status,
            self._metrics_out, dlq_topic=self.settings.dlq_topic, on_evaluation=self._on_evaluation,
            sinks=self._sinks, judges=self._judges,
        )  # fmt: skip
        worker = self._make_worker()
        self._rebalancing.start(self._outputs, worker)
        if self._pipeline.learner is not None:
            _log.info(
                "infer_conversations auto: a conversation no app named is inferred for a service once a "
                "follow-up of it resends a turn this instance read"
            )
        life = self._lifecycle
        failed = True
        self._reach.start()  # the broker gone: said, in the words of _meanwhile
        try:
            while True:
                life.check_stop()
                polled = self._poll(consumer)
                # before the messages of a partition just assigned
                self._rebalancing.read_handovers(life.stop_plan.broker_call())
                if polled:
                    self._take(polled)  # decode -> assemble -> extract -> sample
                if life.went_idle(bool(polled)):
                    self._queue(self._pipeline.flush())  # the buffered traces, without their grace
                if life.state is RunState.RUNNING:
                    self._queue(self._pipeline.ready())
                self._judging.submit(
                    worker
                )  # score, on the worker's loop (stopping: the rest of started traces)
                self._collect()  # emit
                self._settle()  # ack
                if life.state is RunState.RUNNING:
                    self._pauser.apply(consumer, self._judging.pending, self._checkpoint.handovers)
                    self.stats.pauses = self._pauser.pauses
                self._checkpoint.commit_with(consumer, timeout_s=life.stop_plan.broker_call())  # commit
                if self._status.due():
                    self._log_status(consumer)
                if life.done():
                    break
            failed = False
        finally:
            self._reach.stop()
            self._close(consumer, producer, worker, failed=failed)
        # In its group (a settled generation, empty ones included), and never given a partition.
        joined = self._rebalance.first_assigned_at is not None
        self.stats.given_no_partition = joined and self.stats.partitions_assigned == 0
        return self.stats

    def _close(
        self, consumer: KafkaConsumer, producer: KafkaProducer, worker: ScoringWorker, *, failed: bool
    ) -> None:
        """The stop's steps after the drain, each within its share of the one stop budget (StopPlan; a stop
        for another reason than a signal starts it here)."""
        plan = self._lifecycle.stop_plan
        plan.start()
        if self._inputs is not None:
            self._inputs.close()  # at once: the look for the spans topic not written yet, on its own client
        if self._members is not None:
            self._members.close()
        self._rebalancing.closing(failed=failed)  # the revoke on close commits; nothing is left to score
        with plan.budget.waiting("the judges (cancelling the calls still running)"):
            cancelling = plan.cancelling()
            if not worker.close(cancelling.s):
                self._abandon(cancelling)
        if self._policy is not None:
            self._policy.save()  # the cascade's learned suspicion models, when a state path is set
        self._outputs.finish(plan.acknowledgements())
        if failed:
            commit = plan.last_commit()
            self._checkpoint.commit_with(consumer, force=True, timeout_s=commit.s, stopping=str(commit))
        else:
            self._rebalancing.commit_before_leaving(plan.last_commit())  # with the handover of what is left
        try:
            producer.close(timeout=plan.producer_close().s)
        except KafkaError:  # outputs still unacknowledged (the broker gone): not committed, said above
            _log.info("closed the producer with outputs not acknowledged")
        self._rebalancing.leave_group(plan.leaving())
        with plan.budget.waiting("the sinks (closing them)"):
            self._outputs.close(plan.sinks())  # last, with what the budget has left

    def _abandon(self, cancelling: Wait) -> None:
        """The judges' loop did not end when cancelled: a call blocks it (a metric's async function making a
        blocking call, a judge call stuck in C code) and no wait ends that. The stop goes on without it, so
        its last steps run (the outputs of what was scored, the last commit, leaving the group); what the
        loop was scoring never finishes, so it is not committed and is read again."""
        running = self._judging.running
        _log.warning(
            "stopping: cancelling the judge calls did not end the judges' loop within %s: a call blocks it "
            "(a metric's async function that makes a blocking call, or a call no cancel interrupts); left "
            "behind with %s it was scoring, not committed: the next start reads and scores %s again (at "
            "least once, nothing lost)",
            cancelling,
            counted(running, "interaction"),
            "it" if running == 1 else "them",
        )

    def _connect(self) -> None:
        self._consumer, self._producer = connect(self.settings, self._consumer, self._producer)
        # A broker outage said in the service's words (kafka-python's own lines do not say what it holds).
        self._reach = BrokerReach(
            _log,
            "tracescore consume",
            self.settings.bootstrap_servers,
            Reach([self._consumer]),
            self._meanwhile,
            retry_s=self._consumer.config["reconnect_backoff_max_ms"] / 1000,
        )
        self._metrics_out.observe_broker(lambda: self._reach.unreachable)

    def _meanwhile(self) -> str:
        """What the consumer does while no broker answers (`BrokerReach`)."""
        return (
            f"holds {counted(self._judging.pending, 'interaction')} queued or being scored, "
            f"{counted(self._checkpoint.settling, 'trace')} scored whose outputs wait for the broker and "
            f"{counted(self._assembler.buffered_traces, 'trace')} being assembled, none committed: what it "
            "read since its last commit is read again should it stop before the broker is back"
        )

    def _kafka(self) -> KafkaConsumer:
        assert self._consumer is not None, "not connected"
        return self._consumer

    def _start(self) -> tuple[KafkaConsumer, KafkaProducer]:
        self._connect()
        assert self._producer is not None
        stopping = self._lifecycle.stop_plan.budget
        self._inputs = subscribe(
            self.settings, self._kafka(), self._rebalance, stopping=lambda: stopping.started_at is not None
        )
        return self._kafka(), self._producer

    def _poll(self, consumer: KafkaConsumer) -> list[ConsumerRecord]:
        if self._lifecycle.state is not RunState.RUNNING:
            if self._lifecycle.busy:
                time.sleep(_BUSY_POLL_MS / 1000)
            return []
        timeout_ms = _BUSY_POLL_MS if self._lifecycle.busy else self.settings.poll_timeout_ms
        batch: list[ConsumerRecord] = []
        settings = self.settings
        try:
            if self._inputs is not None:
                self._inputs.look()  # the spans topic, subscribed to once its writer created it
            with protocol_checked(settings.group_id, settings.rebalance_protocol, "--rebalance-protocol"):
                started = time.monotonic()
                polled = consumer.poll(timeout_ms=timeout_ms)
                waited = time.monotonic() - started
            self._rebalance.polled(consumer)  # an empty assignment starts the idle clock when for good
            if self._members is not None:
                self._members()  # counted after a new generation (BROKER_WAIT_S at most)
        except KafkaConnectionError as exc:
            if not self._rebalance.waiting:
                raise
            # Waiting for the spans topic, the member has not joined: kafka-python's poll raises its
            # coordinator lookup's failure then. As for a joined member, a broker gone is waited out, and said
            # (BrokerUnreachable) when the stream goes idle with --idle-timeout.
            _log.debug("no broker while waiting for %s: %s", settings.topic, exc)
            time.sleep(min(timeout_ms, _WAITING_RETRY_MS) / 1000)
            return []
        latest: dict[TopicPartition, float | None] = {}
        for partition, messages in polled.items():
            if messages:
                # A partition's messages come in offset order: its first and last offsets say all it read.
                self._checkpoint.read(partition, messages[0].offset)
                self._checkpoint.read(partition, messages[-1].offset)
                batch += messages
                # Producers' clocks differ: the highest, not the last (-1: no timestamp).
                highest = max([m.timestamp for m in messages])
                latest[partition] = highest / 1000 if highest is not None and highest >= 0 else None
        left = lag(consumer)  # the last fetches' high watermarks: free
        behind = [tp for tp, n in left.items() if n]
        self._stream_time.polled(latest, behind, left.keys(), waited)
        return batch

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        taken = self._pipeline.take(batch)
        self._outputs.dead_letter(taken.dead_letters)
        self._queue(taken.admitted)

    def _queue(self, admitted: list[Admitted]) -> None:
        for trace in admitted:
            evidence = self._outputs.evidence(trace.evidence) if trace.evidence else ()
            work = self._checkpoint.hold(
                trace.offsets, trace_id=trace.trace_id, scoring=len(trace.interactions), outputs=evidence
            )
            for revision, metrics in trace.interactions:
                self._judging.queue(work, revision, metrics)

    def _collect(self) -> None:
        for judged in self._judging.finished():
            self._write(judged)

    def _write(self, judged: Judged) -> None:
        self._outputs.write(judged)

    def _settle(self) -> None:
        self._outputs.settle()

    # --- rebalances (on kafka-python's IO thread, while this thread waits inside poll) ---------------------

    def partitions_revoked(self, revoked: Collection[TopicPartition], *, lost: bool) -> None:
        """Finish (bounded) the judge calls running on `revoked`, commit what is finished and hand the rest
        over to the partitions' next owner (see Rebalance)."""
        self._rebalancing.revoked(revoked, lost=lost)

    def partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        """A partition kept through an eager rebalance is read again from its first offset not committed;
        every assigned partition's handover is read before its messages are taken."""
        self.stats.partitions_assigned += len(assigned)
        self._rebalancing.assigned(assigned)

    # --- status ------------------------------------------------------------------------------------------

    @property
    def first_assigned_at(self) -> float | None:
        """When the first partitions were assigned (monotonic). --idle-timeout counts from then: waiting to
        join the group (a dead member's session still holding the partitions) is not idleness; waiting for a
        spans topic nobody has written yet is, from subscribing."""
        return self._rebalance.idle_from

    def _log_status(self, consumer: KafkaConsumer) -> None:
        # The broker is asked (BROKER_WAIT_S at most) only while running: a stop's budget is for its steps.
        asked = self._lifecycle.state is RunState.RUNNING
        left = {f"{tp.topic}[{tp.partition}]": n for tp, n in lag(consumer, ask_broker=asked).items()}
        self._status.log(left, self._judging.running, self._judging.queued, self._assembler.buffered_traces)
