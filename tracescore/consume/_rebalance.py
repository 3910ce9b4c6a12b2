"""What a member does when the group moves partitions: nothing scored twice, nothing left behind.

On revoke (kafka-python's IO thread, while the Kafka thread waits inside poll, so the loop's parts are
ours): the judge calls already running on the revoked partitions finish, with the rest of their traces,
up to a deadline; their outputs are sent and acknowledged; then one commit per partition carries the
offset and the handover (consume/_handover.py): which traces after that offset are still unfinished. Those
(buffered, queued, or still at the judges at the deadline) are handed over: their results here are dropped,
the next owner scores them. On assignment, the handover each new partition's committed offset carries is
read before any of its messages is taken, so the traces already scored are skipped; an eager member reads
every partition it is given from that committed offset, not from the position kafka-python kept.

A member that crashes commits nothing more: its partitions' next owner reads from its last commit, and the
handover that commit carried, so what was scored since that commit (at most `commit_interval_s` of work,
plus outputs not yet acknowledged) is scored again: at least once.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Collection, Hashable, Sequence

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from tracescore._kafka import committed_offsets
from tracescore._plural import counted
from tracescore.consume._assemble import TraceAssembler
from tracescore.consume._checkpoint import Checkpoint, OutputNotAcknowledged
from tracescore.consume._handover import Handover
from tracescore.consume._judging import Judging
from tracescore.consume._outputs import Outputs
from tracescore.consume._scoring import ScoringWorker
from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._stopping import Wait

__all__ = ["Rebalance"]

_log = logging.getLogger("tracescore.consume")


class Rebalance:
    """`consumer` gives the connected KafkaConsumer; `start()` hands over the run's outputs and scoring
    worker (before it, and once `closing()` was called, a revoke finishes nothing: it only commits)."""

    def __init__(
        self,
        settings: ConsumerSettings,
        checkpoint: Checkpoint,
        assembler: TraceAssembler,
        judging: Judging,
        consumer: Callable[[], KafkaConsumer],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._checkpoint = checkpoint
        self._assembler = assembler
        self._judging = judging
        self._consumer = consumer
        self._clock = clock
        self._outputs: Outputs | None = None
        self._worker: ScoringWorker | None = None
        self._to_read: set[TopicPartition] = set()  # assigned: their handovers not read yet
        # Eager: assigned partitions paused until sought to the group's committed offset, each with where this
        # member would read it again were that offset unknown (None: where kafka-python is).
        self._held: dict[TopicPartition, int | None] = {}
        self._hand_over = True  # False once the member stops on an error: it vouches for finished work only
        self._left = False  # the stop's last commit was made (or said why not): closing commits nothing more
        self.error: BaseException | None = None  # raised by the loop after poll, not inside kafka-python

    def start(self, outputs: Outputs, worker: ScoringWorker) -> None:
        self._outputs, self._worker = outputs, worker

    def closing(self, *, failed: bool) -> None:
        self._outputs = self._worker = None
        self._hand_over = not failed

    @property
    def eager(self) -> bool:
        return self._settings.rebalance_protocol == "eager"

    # --- kafka-python's callbacks ------------------------------------------------------------------------

    def revoked(self, partitions: Collection[TopicPartition], *, lost: bool) -> None:
        if not partitions or self._left:
            return  # an eager member's first join revokes nothing; a stop made its last commit already
        try:
            self._revoke(set(partitions), lost=lost)
        except Exception as exc:  # raised from the loop: out of poll, kafka-python would wrap it
            self.error = exc

    def assigned(self, partitions: Sequence[TopicPartition]) -> None:
        if self.eager and partitions:
            # An eager rebalance revoked everything, but kafka-python keeps the fetch position of a partition
            # it had before: past the work handed over on revoke, or behind what another member read and
            # committed meanwhile (in a generation this member's client never completed: its JoinGroup,
            # answered while the member was not polling, is sent again). Only the group's committed offset
            # says where to read; it is read after poll (read_handovers), so the partitions wait paused.
            fallback = self._checkpoint.seeks(partitions)
            self._consumer().pause(*partitions)
            self._held.update({tp: fallback.get(tp) for tp in partitions})
        self._to_read |= set(partitions)

    # --- the Kafka thread, after poll --------------------------------------------------------------------

    def read_handovers(self, within_s: float) -> None:
        """The handover of each partition assigned since the last call, from its committed offset: before
        any message of it is taken (the poll that assigned it may have returned some already). All of them
        in one request to the group's coordinator (not a round trip each), within `within_s`: a broker that
        does not answer costs that once, not kafka-python's 30 s."""
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        consumer = self._consumer()
        deadline = self._clock() + within_s
        while self._to_read:  # any assigned while the request waited: read next, within the same deadline
            to_read, self._to_read = sorted(self._to_read), set()
            left_ms = max(1, int(1000 * (deadline - self._clock())))
            try:
                found = committed_offsets(consumer, to_read, left_ms)
            except KafkaError as exc:
                for tp in to_read:
                    _log.warning(
                        "cannot read %s[%d]'s committed offset (%s): every message after it is read "
                        "as new, so some traces may be scored twice",
                        tp.topic,
                        tp.partition,
                        exc,
                    )
                    self._release(consumer, tp, None)
                continue
            for tp, committed in found.items():
                self._release(consumer, tp, committed.offset if committed is not None else None)
                self._take_handover(tp, committed)

    def _take_handover(self, tp: TopicPartition, committed: OffsetAndMetadata | None) -> None:
        try:
            handover = Handover.decode(committed.metadata if committed is not None else None)
        except ValueError as exc:
            _log.warning(
                "%s[%d]'s committed offset carries a handover that cannot be read (%s): every "
                "message after it is read as new",
                tp.topic,
                tp.partition,
                exc,
            )
            return
        if handover is not None:
            self._checkpoint.handovers[tp] = handover

    def _release(self, consumer: KafkaConsumer, tp: TopicPartition, committed: int | None) -> None:
        """An eager member's partition held since its assignment is read from the group's committed offset
        (unknown: from this member's own last commit, or where it first read the partition)."""
        if tp not in self._held:
            return
        fallback = self._held.pop(tp)
        offset = committed if committed is not None else fallback
        if tp in consumer.assignment():
            if offset is not None:
                consumer.seek(tp, offset)
            consumer.resume(tp)

    def commit_before_leaving(self, wait: Wait) -> None:
        """The last commit of a member that stops, with its handover, within `wait` (its share of the stop
        budget: a broker gone must not hold the stop for the client's 30 s request timeout). A group that is
        rebalancing (a member just joined) refuses commits; the member then polls through the rebalance
        (what it fetches meanwhile is not taken, nor committed) and commits again, up to the same deadline:
        otherwise the partitions' next owner would score again all it did since its last commit. What is not
        committed is said in one line: it is read again after a restart (at least once)."""
        try:
            self._commit_before_leaving(wait)
        finally:
            # Polling through a rebalance above revokes as usual; closing the consumer after would revoke
            # again, and say a second time what was not committed.
            self._left = True

    def _commit_before_leaving(self, wait: Wait) -> None:
        consumer = self._consumer()
        deadline = self._clock() + wait.s
        while not self._checkpoint.commit_with(
            consumer, final=self._hand_over, timeout_s=max(0.0, deadline - self._clock()), stopping=str(wait)
        ):
            if self._clock() >= deadline:
                _log.warning(
                    "the group was still rebalancing after %s: stopped without the last commit; whoever "
                    "reads these partitions next starts from the offsets committed before, so the traces "
                    "read since are read and scored again (at least once)",
                    wait,
                )
                return
            try:
                consumer.poll(timeout_ms=100)
            except KafkaError as exc:
                _log.warning(
                    "stopped without the last commit (%s): what was read since the commit before is "
                    "read and scored again (at least once)",
                    exc,
                )
                return

    def leave_group(self, wait: Wait) -> None:
        """Close the consumer, leaving the group within `wait` (the stop budget's last share): a broker gone
        must not hold the stop, nor turn it into an error."""
        try:
            self._consumer().close(autocommit=False, timeout_ms=max(1, int(wait.s * 1000)))
        except KafkaError as exc:
            _log.info(
                "left without the broker's answer (%s): the group gives these partitions to its other "
                "members after --session-timeout-ms",
                exc,
            )

    @property
    def revoke_limit_s(self) -> float:
        """How long a revoke may wait for judge calls: `revoke_timeout_s`, and at most a third of the session
        (no heartbeat is sent meanwhile; the acknowledgements of what was sent may take it up to half)."""
        return min(self._settings.revoke_timeout_s, self._settings.session_timeout_ms / 3000)

    # --- revoke ------------------------------------------------------------------------------------------

    def _revoke(self, partitions: set[TopicPartition], *, lost: bool) -> None:
        _log.info("%s partitions: %s", "lost" if lost else "revoked", _names(partitions))
        self._to_read -= partitions
        for tp in partitions:
            self._held.pop(tp, None)
        if not lost and self._outputs is not None and self._worker is not None:
            self._finish(partitions, self._outputs, self._worker)
        handed = self._checkpoint.revoke_with(self._consumer(), partitions, lost=lost, final=self._hand_over)
        if lost:
            self._judging.drop_queued()
            dropped = self._assembler.clear()
        else:
            dropped = self._assembler.revoke(partitions, [w.trace_id for w in handed if w.trace_id])
        started = sum(w.started for w in handed)
        if dropped or handed:
            _log.info(
                "rebalance: %s and %d released (%d of them at the judges) left to the next owner of %s%s",
                counted(dropped, "buffered trace"), len(handed), started, _names(partitions),
                " (this member lost the group: nothing committed)" if lost else "",
            )  # fmt: skip

    def _finish(self, partitions: set[TopicPartition], outputs: Outputs, worker: ScoringWorker) -> None:
        """Judge calls running on `partitions` (and the rest of their traces) finish, up to the deadline:
        what they cost is not paid twice. Then the outputs already sent are acknowledged, up to half the
        session timeout: a record sent cannot be taken back, so work handed over with its outputs in flight
        would be written again by the next owner. While this waits the member sends no heartbeat."""
        started = self._clock()
        limit = self.revoke_limit_s
        deadline = started + limit
        running = self._judging.revoke(partitions, worker)
        while running and self._clock() < deadline:
            concurrent.futures.wait(
                running, timeout=deadline - self._clock(), return_when=concurrent.futures.FIRST_COMPLETED
            )
            for judged in self._judging.finished():
                outputs.write(judged)
            running = [f for f in running if not f.done()]
        if running:
            _log.warning(
                "rebalance: %s on %s still running after %.1fs; the next owner scores them again",
                counted(len(running), "judge call"), _names(partitions), limit,
            )  # fmt: skip
        if self._checkpoint.settling_on(partitions):
            # Not bounded by what the judges left of the deadline: a result that came just before it would
            # otherwise be both written here and handed over.
            acks_limit = self._settings.session_timeout_ms / 2000
            try:
                outputs.flush(max(0.0, started + acks_limit - self._clock()))
            except KafkaError as exc:
                _log.warning(
                    "rebalance: outputs sent on %s not acknowledged by Kafka after %.1fs (%s); their traces "
                    "are handed over, so their records may be written twice",
                    _names(partitions), acks_limit, exc,
                )  # fmt: skip
        try:
            outputs.settle()
        except OutputNotAcknowledged as exc:
            self.error = exc


def _names(partitions: Collection[Hashable]) -> str:
    return ", ".join(
        sorted(f"{tp.topic}[{tp.partition}]" for tp in partitions if isinstance(tp, TopicPartition))
    )
