"""What the consumer may commit: the work each message started, its acknowledgements, and the commits.

A released trace (or a dead letter) becomes one `Work`: it holds the lowest offset of each partition it came
from until it is scored and Kafka acknowledged every output. `Checkpoint` decides what to commit (never past
held work, see OffsetTracker), commits finished work when partitions are revoked, and says where to seek a
partition that comes back. The decisions are plain methods; the few Kafka calls are the `*_with` methods.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata

from tracescore.consume._offsets import OffsetTracker
from tracescore.emit import Output
from tracescore.model import EvaluationRecord

__all__ = ["Checkpoint", "OutputNotAcknowledged", "Work"]

_log = logging.getLogger("tracescore.consume")


class OutputNotAcknowledged(RuntimeError):
    """Kafka did not acknowledge an output after its retries; offsets of that work were not committed and
    it will be read again by whoever owns the partition next."""


@dataclass
class Work:
    """What one released trace (or one dead letter) still waits for before its offsets may be committed."""

    offsets: dict[Any, int]
    generation: int
    scoring: int = 0
    outputs: list[Output] = field(default_factory=list)
    records: list[EvaluationRecord] = field(default_factory=list)


class Checkpoint:
    """Owned by the Kafka thread. `also_held` gives the trace buffer's lowest offset per partition (messages
    of traces not yet released); `clock` is monotonic seconds."""

    def __init__(
        self,
        also_held: Callable[[], Mapping[Hashable, int]],
        commit_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._also_held = also_held
        self._interval_s = commit_interval_s
        self._clock = clock
        self._offsets = OffsetTracker()
        self._settling: list[Work] = []
        self._rewind: dict[Hashable, int] = {}  # revoked partition -> where to resume if it comes back
        self._last_commit = 0.0

    # --- work --------------------------------------------------------------------------------------------

    def read(self, partition: Hashable, offset: int) -> None:
        self._offsets.read(partition, offset)

    def hold(
        self, offsets: Mapping[Hashable, int], *, scoring: int = 0, outputs: Iterable[Output] = ()
    ) -> Work:
        """Work that holds `offsets` (partition -> lowest offset) back until it is settled. With nothing left
        to score (a dead letter) it waits only for its outputs' acknowledgements."""
        work = Work(dict(offsets), self._offsets.hold(offsets), scoring=scoring, outputs=list(outputs))
        if scoring == 0:
            self._settling.append(work)
        return work

    def scored(self, work: Work, records: list[EvaluationRecord], outputs: list[Output]) -> None:
        """One interaction of `work` was scored and its outputs sent."""
        work.records += records
        work.outputs += outputs
        work.scoring -= 1
        if work.scoring == 0:
            self._settling.append(work)

    @property
    def settling(self) -> int:
        """Work scored whose outputs Kafka has not all acknowledged yet."""
        return len(self._settling)

    def settle(self) -> Iterator[Work]:
        """Yields (once each) the work whose outputs are all acknowledged, its offsets finished. Raises
        OutputNotAcknowledged when Kafka refused an output that may not be dropped."""
        for work in list(self._settling):
            if _acknowledged(work):
                self._settling.remove(work)
                self._offsets.finish(work.offsets, work.generation)
                yield work

    # --- commits -----------------------------------------------------------------------------------------

    def due(self, *, force: bool = False) -> dict[Hashable, int]:
        """Offsets to commit now: every `commit_interval_s` (or forced), only partitions that moved."""
        now = self._clock()
        if not force and now - self._last_commit < self._interval_s:
            return {}
        self._last_commit = now
        return self._offsets.committable(self._also_held())

    def committed(self, offsets: Mapping[Hashable, int]) -> None:
        self._offsets.committed(offsets)

    def committed_on_revoke(self, offsets: Mapping[Hashable, int]) -> None:
        """The revoke's commit answered: a partition that comes back resumes after it."""
        for partition, offset in offsets.items():
            if partition in self._rewind:
                self._rewind[partition] = max(self._rewind[partition], offset)

    def revoke(self, *, lost: bool) -> dict[Hashable, int]:
        """Partitions revoked: returns the finished work to commit now and forgets every partition; work
        in flight keeps running but finishes nothing. Call before the trace buffer is cleared.

        `lost`: the member was removed from the group (session expired), so a commit would be refused, and
        kafka-python starts every partition it gets back from the group's committed offset."""
        committing = {} if lost else self._offsets.committable(self._also_held())
        rewind = self._offsets.reset()
        self._rewind = {} if lost else rewind
        return committing

    def seeks(self, assigned: Iterable[Hashable]) -> dict[Hashable, int]:
        """A partition kept through the rebalance keeps kafka-python's fetch position, past the messages
        whose work was dropped on revoke: where to read it again (the first offset not committed)."""
        rewind, self._rewind = self._rewind, {}
        return {tp: rewind[tp] for tp in assigned if tp in rewind}

    # --- the Kafka calls ---------------------------------------------------------------------------------

    def commit_with(self, consumer: KafkaConsumer, *, force: bool = False) -> None:
        offsets = self.due(force=force)
        if not offsets:
            return
        try:
            consumer.commit(offsets=_metadata(offsets))
            self.committed(offsets)
        except CommitFailedError as exc:
            # The group rebalanced under us: the partitions' new owner re-reads from the last commit, so
            # outputs may appear twice, never zero times.
            _log.warning(
                "offsets not committed, the group rebalanced (%s); that work will be read again", exc
            )
        except KafkaError as exc:
            _log.warning("offsets not committed (%s); retrying at the next commit", exc)

    def revoke_with(self, consumer: KafkaConsumer, *, lost: bool) -> None:
        """Commit finished work before the group rejoins, so the next owner does not read it again.

        The rebalance listener runs on kafka-python's IO thread, where a blocking commit raises (and the
        error, out of poll, stopped the member): the commit is sent without waiting. Its response arrives
        before the new assignment (same connection, in order), and a kept partition then resumes after it."""
        offsets = self.revoke(lost=lost)
        if not offsets:
            return

        def not_committed(exc: object) -> None:
            # Nothing is lost (the work is read again), but say why its outputs appear twice.
            _log.warning("offsets not committed before the rebalance (%s); that work will be read again", exc)

        try:
            future = consumer.commit_async(offsets=_metadata(offsets))
            future.add_callback(lambda _: self.committed_on_revoke(offsets))
            future.add_errback(not_committed)
        except KafkaError as exc:
            not_committed(exc)

    def seek_with(self, consumer: KafkaConsumer, assigned: Iterable[Hashable]) -> None:
        for tp, offset in self.seeks(assigned).items():
            consumer.seek(tp, offset)


def _metadata(offsets: Mapping[Hashable, int]) -> dict[Any, OffsetAndMetadata]:
    return {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}


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
