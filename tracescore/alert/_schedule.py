"""Which routes a tick of the evaluator evaluates: those fed (or read) since their last evaluation, and those
whose next-due time has passed.

A route's next-due time is the earliest its evaluation could say or change anything with no new answer
(a window entry ageing out, a silence reaching its page point, a reminder due...; alert/_evaluator.py
computes it from the state its last evaluation left, `now` when the next tick must evaluate it again
whatever happens; once per tick, not once per evaluation: a busy route is evaluated on each answer). Until
then evaluating it again does nothing, so a tick of 10,000 quiet routes costs what changed and what is due,
not 10,000 evaluations. A due time is on the clock, or, for a streamed evaluator's no-data part, on the
stream time of the route's partition (how far its records are read).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime

from tracescore.alert._notification import AlertKey

__all__ = ["Due", "Schedule"]

# A route's next due times: on the clock, and on its partition's stream time as (partition, time); None: not
# on that account. The function giving them gives None for a key no longer held.
Due = tuple[datetime | None, tuple[int, datetime] | None]

_serials = itertools.count()  # ties in a heap never compare keys


class _Timeline:
    """Keys due at a time each: a dict of their times and a heap to find the earliest."""

    def __init__(self) -> None:
        self._due: dict[AlertKey, datetime] = {}
        self._heap: list[tuple[datetime, int, AlertKey]] = []

    def __bool__(self) -> bool:
        return bool(self._due)

    def set(self, key: AlertKey, due: datetime) -> None:
        if self._due.get(key) == due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, next(_serials), key))
        # A key set again before it was due leaves its old entry behind: rebuilt once those dominate.
        if len(self._heap) > 2 * len(self._due) + 1024:
            self._heap = [(at, next(_serials), k) for k, at in self._due.items()]
            heapq.heapify(self._heap)

    def forget(self, key: AlertKey) -> None:
        self._due.pop(key, None)

    def pop(self, up_to: datetime) -> Iterator[AlertKey]:
        """The keys due at or before `up_to`, forgotten."""
        heap, due = self._heap, self._due
        while heap and heap[0][0] <= up_to:
            at, _, key = heapq.heappop(heap)
            if due.get(key) == at:
                del due[key]
                yield key


class Schedule:
    def __init__(self, due_of: Callable[[AlertKey], Due | None]) -> None:
        self._due_of = due_of
        self._fed: set[AlertKey] = set()
        self._evaluated: set[AlertKey] = set()  # since the last tick: their due times to compute
        self._clock = _Timeline()
        self._read: dict[int, _Timeline] = {}  # per partition, on its stream time
        self._partition: dict[AlertKey, int] = {}  # of a key due on a stream time

    def feed(self, key: AlertKey) -> None:
        """`key` changed other than by time passing: the next tick evaluates it."""
        self._fed.add(key)

    def evaluated(self, key: AlertKey) -> None:
        """`key` was evaluated: its due times are computed at the next tick (`due_of`)."""
        self._fed.discard(key)
        self._evaluated.add(key)

    def _settle(self) -> None:
        for key in self._evaluated:
            if key in self._fed:
                continue  # fed since: evaluated whatever its due times
            due = self._due_of(key)
            self._set(key, *(due or (None, None)))
        self._evaluated.clear()

    def _set(self, key: AlertKey, due: datetime | None, read_due: tuple[int, datetime] | None) -> None:
        if due is None:
            self._clock.forget(key)
        else:
            self._clock.set(key, due)
        partition = self._partition.pop(key, None)
        if partition is not None:
            self._read[partition].forget(key)
        if read_due is not None:
            self._partition[key] = read_due[0]
            self._read.setdefault(read_due[0], _Timeline()).set(key, read_due[1])

    def forget(self, key: AlertKey) -> None:
        self._fed.discard(key)
        self._evaluated.discard(key)
        self._set(key, None, None)

    def take(self, now: datetime, read_to: Mapping[int, datetime]) -> set[AlertKey]:
        """The keys to evaluate at `now`, each partition read up to `read_to[partition]`: fed or due. They are
        due no more until evaluated again."""
        self._settle()
        out, self._fed = self._fed, set()
        out.update(self._clock.pop(now))
        for partition, timeline in self._read.items():
            if timeline and (at := read_to.get(partition)) is not None:
                for key in timeline.pop(at):
                    del self._partition[key]
                    out.add(key)
        return out
