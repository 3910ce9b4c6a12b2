"""Interactions waiting for the judges and being judged: a queue, then at most `max_in_flight` futures on the
scoring worker's loop. A judge that fails (or a cancelled task) gives error results, never an exception."""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass

from tracescore.consume._checkpoint import Work
from tracescore.consume._revise import Revision
from tracescore.consume._scorer import ScoredInteraction, Scorer
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
    scored: ScoredInteraction | None = None

    @property
    def interaction(self) -> Interaction:
        return self.revision.interaction


class Judging:
    def __init__(self, scorer: Scorer, max_in_flight: int) -> None:
        self.scorer = scorer
        self.max_in_flight = max_in_flight
        self._queue: deque[tuple[Work, Revision, tuple[str, ...] | None]] = deque()
        self._running: dict[Future[ScoredInteraction], Judged] = {}

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

    def submit(self, worker: ScoringWorker) -> None:
        while self._queue and len(self._running) < self.max_in_flight:
            work, revision, metrics = self._queue.popleft()
            future = worker.submit(self.scorer.score(revision.interaction, metrics))
            self._running[future] = Judged(work, revision, time.monotonic(), time.time_ns())

    def finished(self) -> Iterator[Judged]:
        """Each judged interaction once, with its results."""
        for future in [f for f in self._running if f.done()]:
            judged = self._running.pop(future)
            judged.scored = self._results(future, judged.interaction)
            yield judged

    def _results(self, future: Future[ScoredInteraction], interaction: Interaction) -> ScoredInteraction:
        try:
            return future.result()
        except BaseException as exc:  # a judge bug or a cancelled task must not stop the service
            reason = f"scoring failed: {type(exc).__name__}: {exc}"
            _log.error("%s (trace %s)", reason, interaction.span.trace_id)
            return ScoredInteraction([
                MetricResult(
                    metric=m.name, score=None, status=MetricStatus.ERROR, reason=reason,
                    judge=self.scorer.judge.name, details={"error_type": type(exc).__name__},
                )
                for m in self.scorer.metrics
            ])  # fmt: skip
