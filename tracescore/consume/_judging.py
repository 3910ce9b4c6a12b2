"""Interactions waiting for the judges and being judged: a queue, then at most `max_in_flight` futures on the
scoring worker's loop. A judge that fails (or a cancelled task) gives error results, never an exception."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Collection, Hashable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass

from tracescore.consume._checkpoint import Work
from tracescore.consume._revise import Revision
from tracescore.consume._scorer import Scored, Scorer
from tracescore.consume._scoring import ScoringWorker
from tracescore.model import Interaction, MetricResult, MetricStatus

__all__ = ["Judged", "Judging"]

_log = logging.getLogger("tracescore.consume")


@dataclass
class Judged:
    """An interaction handed to the judges: its message's work, its revision, when it started, and its
    results once scored (not consume._revise.JudgedReading, what an earlier reading judged)."""

    work: Work
    revision: Revision
    started: float  # monotonic, for the latency
    started_ns: int  # wall clock, for the evaluation span
    scored: Scored | None = None

    @property
    def interaction(self) -> Interaction:
        return self.revision.interaction


class Judging:
    def __init__(self, scorer: Scorer, max_in_flight: int) -> None:
        self.scorer = scorer
        self.max_in_flight = max_in_flight
        self._queue: deque[tuple[Work, Revision, tuple[str, ...] | None]] = deque()
        self._running: dict[Future[Scored], Judged] = {}
        self.dropped = 0  # results of work handed over on a rebalance, not emitted

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def running(self) -> int:
        return len(self._running)

    @property
    def pending(self) -> int:
        return len(self._queue) + len(self._running)

    def queue(self, work: Work, revision: Revision, metrics: tuple[str, ...] | None) -> None:
        self._queue.append((work, revision, metrics))

    def drop_queued(self) -> int:
        """Forget what was not started (left uncommitted: read again). Returns how many."""
        dropped = len(self._queue)
        self._queue.clear()
        return dropped

    def drop_unstarted(self) -> int:
        """Forget the traces none of whose interactions went to the judges (left uncommitted: read again);
        the rest of a trace already at the judges stays queued, so it finishes whole and nothing of it is
        scored twice. Returns how many interactions were dropped."""
        before = len(self._queue)
        self._queue = deque(entry for entry in self._queue if entry[0].started)
        return before - len(self._queue)

    def submit(self, worker: ScoringWorker) -> None:
        while self._queue and len(self._running) < self.max_in_flight:
            self._start(worker, *self._queue.popleft())

    def _start(
        self, worker: ScoringWorker, work: Work, revision: Revision, metrics: tuple[str, ...] | None
    ) -> None:
        future = worker.submit(self.scorer.score(revision.interaction, metrics))
        work.started = True
        self._running[future] = Judged(work, revision, time.monotonic(), time.time_ns())

    # --- partitions revoked ------------------------------------------------------------------------------

    def revoke(self, partitions: Collection[Hashable], worker: ScoringWorker) -> list[Future[Scored]]:
        """Partitions about to be revoked: their traces not started stay unscored (the checkpoint hands them
        over); the rest of a trace already at the judges starts now, so the trace finishes whole. Returns
        the judge calls to wait for."""
        kept: deque[tuple[Work, Revision, tuple[str, ...] | None]] = deque()
        for entry in self._queue:
            work = entry[0]
            if not work.touches(partitions):
                kept.append(entry)
            elif work.started:
                self._start(worker, *entry)
        self._queue = kept
        return [f for f, judged in self._running.items() if judged.work.touches(partitions)]

    def finished(self) -> Iterator[Judged]:
        """Each judged interaction once, with its results; those of work handed over are dropped (its
        partition's next owner scores it)."""
        for future in [f for f in self._running if f.done()]:
            judged = self._running.pop(future)
            if judged.work.handed_over:
                self.dropped += 1
                continue
            judged.scored = self._results(future, judged.interaction)
            yield judged

    def _results(self, future: Future[Scored], interaction: Interaction) -> Scored:
        try:
            return future.result()
        except BaseException as exc:  # a judge bug or a cancelled task must not stop the service
            reason = f"scoring failed: {type(exc).__name__}: {exc}"
            _log.error("%s (trace %s)", reason, interaction.span.trace_id)
            return Scored([
                MetricResult(
                    metric=m.name, score=None, status=MetricStatus.ERROR, reason=reason,
                    judge=self.scorer.judge.name, details={"error_type": type(exc).__name__},
                )
                for m in self.scorer.metrics
            ])  # fmt: skip
