"""What the consumer may commit: the work each message started, its acknowledgements, and the commits.

A released trace (or a dead letter) becomes one `Work`: it holds the lowest offset of each partition it came
from until it is scored and Kafka acknowledged every output. `Checkpoint` decides what to commit (never past
held work, see OffsetTracker) with the handover that tells the next owner which traces after that offset are
unfinished (see consume/_handover.py), hands the unfinished work of revoked partitions over, and says where
this member would read again a partition given back (when the group's committed offset cannot be read). The
decisions are plain methods; the few Kafka calls are the `*_with` methods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka import KafkaConsumer
from kafka.errors import (
    CommitFailedError,
    KafkaError,
    KafkaTimeoutError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
)
from kafka.structs import OffsetAndMetadata

from tracescore.consume._handover import Handover
from tracescore.consume._offsets import OffsetTracker
from tracescore.emit import Output
from tracescore.model import EvaluationRecord

__all__ = ["Buffered", "Checkpoint", "OutputNotAcknowledged", "Work"]

_log = logging.getLogger("tracescore.consume")

Commits = dict[Any, OffsetAndMetadata]


class OutputNotAcknowledged(RuntimeError):
    """Kafka did not acknowledge an output after its retries; offsets of that work were not committed and
    it will be read again by whoever owns the partition next."""


class Buffered(Protocol):
    """What the checkpoint needs of the trace buffer (TraceAssembler)."""

    def low_watermarks(self) -> Mapping[Hashable, int]: ...

    def traces_on(self, partitions: Collection[Hashable]) -> Mapping[Hashable, list[str]]: ...


@dataclass(eq=False)  # identity: a member of the checkpoint's open set
class Work:
    """What one released trace (or one dead letter, `trace_id` None) still waits for before its offsets may
    be committed. `handed_over`: its partition was revoked first; its results are dropped, the next owner
    scores it."""

    offsets: dict[Any, int]
    generation: int
    trace_id: str | None = None
    scoring: int = 0
    outputs: list[Output] = field(default_factory=list)
    records: list[EvaluationRecord] = field(default_factory=list)
    started: bool = False  # an interaction of it went to the judges
    handed_over: bool = False

    def touches(self, partitions: Collection[Hashable]) -> bool:
        return any(p in partitions for p in self.offsets)


class Checkpoint:
    """Owned by the Kafka thread (or by the rebalance listener, while that thread waits inside poll).
    `buffered` is the trace buffer; `handovers`, per partition, the handover its committed offset carried
    when this member got it (shared with the Pipeline, which reads by it); `clock` is monotonic seconds."""

    def __init__(
        self,
        buffered: Buffered,
        commit_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        handovers: dict[Hashable, Handover] | None = None,
    ) -> None:
        self._buffered = buffered
        self._interval_s = commit_interval_s
        self._clock = clock
        self.handovers = handovers if handovers is not None else {}
        self._offsets = OffsetTracker()
        self._open: set[Work] = set()
        self._settling: list[Work] = []
        self._last: dict[Hashable, OffsetAndMetadata] = {}  # committed, or being committed
        self._rewind: dict[Hashable, int] = {}  # revoked partition -> where to resume if it comes back
        self._last_commit = 0.0
        # Since when the group refuses commits for a rebalance (None: it takes them): said once, not per try.
        self._refused_since: float | None = None
        self._refusals = 0

    # --- work --------------------------------------------------------------------------------------------

    def read(self, partition: Hashable, offset: int) -> None:
        self._offsets.read(partition, offset)

    def hold(
        self,
        offsets: Mapping[Hashable, int],
        *,
        trace_id: str | None = None,
        scoring: int = 0,
        outputs: Iterable[Output] = (),
    ) -> Work:
        """Work that holds `offsets` (partition -> lowest offset) back until it is settled. With nothing left
        to score (a dead letter) it waits only for its outputs' acknowledgements."""
        work = Work(
            dict(offsets), self._offsets.hold(offsets), trace_id, scoring=scoring, outputs=list(outputs)
        )
        self._open.add(work)
        if scoring == 0:
            self._settling.append(work)
        return work

    def scored(self, work: Work, records: list[EvaluationRecord], outputs: list[Output]) -> None:
        """One interaction of `work` was scored and its outputs sent."""
        work.records += records
        work.outputs += outputs
        work.scoring -= 1
        if work.scoring == 0 and not work.handed_over:
            self._settling.append(work)

    @property
    def settling(self) -> int:
        """Work scored whose outputs Kafka has not all acknowledged yet."""
        return len(self._settling)

    def settling_on(self, partitions: Collection[Hashable]) -> bool:
        return any(work.touches(partitions) for work in self._settling)

    def settle(self) -> Iterator[Work]:
        """Yields (once each) the work whose outputs are all acknowledged, its offsets finished. Raises
        OutputNotAcknowledged when Kafka refused an output that may not be dropped."""
        for work in list(self._settling):
            if _acknowledged(work):
                self._settling.remove(work)
                self._open.discard(work)
                self._offsets.finish(work.offsets, work.generation)
                yield work

    # --- commits -----------------------------------------------------------------------------------------

    def due(
        self, *, force: bool = False, final: bool = False, partitions: Collection[Hashable] | None = None
    ) -> Commits:
        """Offsets to commit now: every `commit_interval_s` (or forced), only partitions whose offset or
        handover changed. `final`: the partitions are being given up (a rebalance, a stop), so the commit
        says which traces after the offset are unfinished; periodic commits only pass on a handover this
        member was given (naming its own traces costs a hash per buffered trace, worth it once per rebalance,
        not every second: after a crash, what finished after the last commit's offset is read again)."""
        now = self._clock()
        if not (force or final) and now - self._last_commit < self._interval_s:
            return {}
        self._last_commit = now
        # A final commit is made even where nothing finished: its handover lets the next owner release the
        # traces read here without a new grace period (a storm of rebalances would otherwise hold them).
        candidates = self._offsets.committable(self._buffered.low_watermarks(), partitions, every=final)
        if not candidates:
            return {}
        unfinished, dead_letters = self._unfinished(candidates) if final else ({}, {})
        out: Commits = {}
        for partition, (offset, read_up_to) in candidates.items():
            earlier = self.handovers.get(partition)
            if final:
                # A dead letter not acknowledged yet is read (and dead-lettered) again by the next owner.
                until = max(offset, min(read_up_to, dead_letters.get(partition, read_up_to)))
                left = unfinished.get(partition, []) if until > offset else None
                handover = Handover.build(until, left, earlier)
            else:
                handover = Handover.build(offset, None, earlier)
            commit = OffsetAndMetadata(offset, handover.encode() if handover else "", -1)
            if self._last.get(partition) != commit:
                out[partition] = commit
        return out

    def _unfinished(
        self, partitions: Collection[Hashable]
    ) -> tuple[dict[Hashable, list[str]], dict[Hashable, int]]:
        """Per partition: the traces not finished (buffered, or released and not settled), and the lowest
        offset of a dead letter not settled."""
        traces = {p: list(ids) for p, ids in self._buffered.traces_on(partitions).items()}
        dead_letters: dict[Hashable, int] = {}
        for work in self._open:
            for partition, offset in work.offsets.items():
                if partition not in partitions:
                    continue
                if work.trace_id is None:
                    dead_letters[partition] = min(offset, dead_letters.get(partition, offset))
                else:
                    traces.setdefault(partition, []).append(work.trace_id)
        return traces, dead_letters

    def committed(self, commits: Mapping[Hashable, OffsetAndMetadata]) -> None:
        self._last.update(commits)
        self._offsets.committed({p: c.offset for p, c in commits.items()})

    def committed_on_revoke(self, commits: Mapping[Hashable, OffsetAndMetadata]) -> None:
        """The revoke's commit answered: a partition that comes back resumes after it."""
        for partition, commit in commits.items():
            if partition in self._rewind:
                self._rewind[partition] = max(self._rewind[partition], commit.offset)

    def revoke(
        self, partitions: Collection[Hashable], *, lost: bool, final: bool = True
    ) -> tuple[Commits, list[Work]]:
        """`partitions` revoked (`lost`: the member was removed from the group, every partition at once):
        returns what to commit now (each with its handover) and the open work handed over, and forgets the
        partitions. Call before the trace buffer forgets them.

        Handed over: every unfinished work touching them. Its results are dropped when they come; its holds
        on partitions kept are released (a trace split over partitions is read by the new owner of each).
        When lost, a commit would be refused, and kafka-python starts every partition it gets back from the
        group's committed offset. Not `final` (the member stops on an error): only finished work is
        committed, without a handover."""
        partitions = set(partitions)
        committing = {} if lost else self.due(force=True, final=final, partitions=partitions)
        handed = [work for work in self._open if lost or work.touches(partitions)]
        for work in handed:
            work.handed_over = True
            self._open.discard(work)
            if work in self._settling:
                self._settling.remove(work)
            if not lost:
                kept = {p: o for p, o in work.offsets.items() if p not in partitions}
                self._offsets.finish(kept, work.generation)
        if lost:
            self._offsets.reset()
            self._rewind = {}
            self.handovers.clear()
            self._last.clear()
        else:
            self._rewind = self._offsets.forget(partitions)
            for partition in partitions:
                self.handovers.pop(partition, None)
                self._last.pop(partition, None)
        return committing, handed

    def seeks(self, assigned: Iterable[Hashable]) -> dict[Hashable, int]:
        """Where this member would read again the partitions it revoked last and is given back (the first
        offset it knows committed), once. The group's committed offset comes first (another member may have
        read and committed past it since); this is for when that cannot be read."""
        rewind, self._rewind = self._rewind, {}
        return {tp: rewind[tp] for tp in assigned if tp in rewind}

    # --- the Kafka calls ---------------------------------------------------------------------------------

    def commit_with(
        self,
        consumer: KafkaConsumer,
        *,
        force: bool = False,
        final: bool = False,
        timeout_s: float | None = None,
        stopping: str | None = None,
    ) -> bool:
        """Commit what is due, waiting up to `timeout_s` (None: the client's request timeout); False when the
        group refused it because it is rebalancing (it takes the commit once the member polled through the
        rebalance). `stopping`: the last commit of a stop (none follows to retry), and the limit it waits
        within, in words."""
        commits = self.due(force=force, final=final)
        if not commits:
            return True
        timeout_ms = None if timeout_s is None else max(1, int(timeout_s * 1000))
        try:
            try:
                consumer.commit(offsets=commits, timeout_ms=timeout_ms)
            except OffsetMetadataTooLargeError:
                _log.warning(
                    "the broker refused the commit's handover (offset.metadata.max.bytes below 4096?): "
                    "committing without it, so a rebalance may score some traces twice"
                )
                commits = {p: OffsetAndMetadata(c.offset, "", -1) for p, c in commits.items()}
                consumer.commit(offsets=commits, timeout_ms=timeout_ms)
            self.committed(commits)
            self._rebalance_over()
        except RebalanceInProgressError as exc:
            self._rebalance_refused(exc)
            return False
        except CommitFailedError as exc:
            # The group rebalanced under us: the partitions' new owner re-reads from the last commit, so
            # outputs may appear twice, never zero times.
            _log.warning(
                "offsets not committed, the group rebalanced (%s); that work will be read again", exc
            )
        except KafkaError as exc:
            if stopping is not None:
                _log.warning(
                    "stopped without committing %s (%s): whoever reads these partitions next (this member "
                    "restarted, or another) starts from the offsets committed before, so the traces read "
                    "since are read and scored again (at least once)",
                    _describe(commits), _why(exc, stopping),
                )  # fmt: skip
            else:
                _log.warning("offsets not committed (%s); retrying at the next commit", exc)
        return True

    def _rebalance_refused(self, exc: RebalanceInProgressError) -> None:
        # Retried at every commit interval while the group rebalances: a member killed without leaving the
        # group holds the rebalance up to the session timeout (45 s), which logged a line a second.
        self._refusals += 1
        if self._refused_since is None:
            self._refused_since = self._clock()
            _log.info(
                "offsets not committed yet, the group is rebalancing (%s); retried until it ends, said once "
                "it does. A member that stopped without leaving the group (killed, its node lost) holds the "
                "rebalance up to the session timeout (--session-timeout-ms)",
                exc,
            )

    def _rebalance_over(self) -> None:
        if self._refused_since is not None:
            _log.info(
                "offsets committed again: the group refused %d commits while it rebalanced, for %.0f s",
                self._refusals,
                self._clock() - self._refused_since,
            )
            self._refused_since, self._refusals = None, 0

    def revoke_with(
        self, consumer: KafkaConsumer, partitions: Collection[Hashable], *, lost: bool, final: bool = True
    ) -> list[Work]:
        """Commit, before the partitions go, what was finished and the handover of what was not; returns the
        work handed over.

        The rebalance listener runs on kafka-python's IO thread, where a blocking commit raises: the commit
        is sent without waiting. It goes out before the group is joined again (same connection, in order),
        so the partitions' next owner reads it; a partition kept through an eager rebalance resumes after it.
        """
        commits, handed = self.revoke(partitions, lost=lost, final=final)
        if not commits:
            return handed

        def not_committed(exc: object) -> None:
            # Nothing is lost (the work is read again), but say why its outputs appear twice.
            _log.warning("offsets not committed before the rebalance (%s); that work will be read again", exc)

        try:
            future = consumer.commit_async(offsets=commits)
            future.add_callback(lambda _: self.committed_on_revoke(commits))
            future.add_errback(not_committed)
        except KafkaError as exc:
            not_committed(exc)
        return handed


def _describe(commits: Mapping[Hashable, OffsetAndMetadata]) -> str:
    """`spans[0] up to offset 12, spans[3] up to offset 40`: the offsets of a commit, for a log line."""
    return ", ".join(
        sorted(f"{getattr(tp, 'topic', tp)}[{getattr(tp, 'partition', '?')}] up to offset {c.offset}"
               for tp, c in commits.items())
    )  # fmt: skip


def _why(exc: KafkaError, limit: str) -> str:
    if isinstance(exc, KafkaTimeoutError):
        return f"no answer from the broker within {limit}"
    return f"{type(exc).__name__}: {exc}"


def _acknowledged(work: Work) -> bool:
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
                "Kafka rejected %s as too large; it is dropped (the record carries the score)", output.what
            )
            work.outputs[index] = Output(_Acked(), output.what)
            continue
        raise OutputNotAcknowledged(
            f"Kafka did not acknowledge {output.what} ({output.error!r}); its input offsets were not "
            "committed and will be read again"
        )
    return True


class _Acked:
    """An output counted as settled (dropped with a warning)."""

    is_done = True

    def failed(self) -> bool:
        return False
