"""The held conversations by one of their times, per partition, for what the service asks every tick: which
are due (`due`), and the earliest (`oldest`), at a cost proportional to what changed or became due, not to
how many are held (issue 33: 100,000 open conversations).

An entry is pushed when a conversation's time changes (the tracker sees every change) and checked against
the conversation when read: one since written, saved or forgotten is dropped then (its time reads None, or
another), so nothing else needs to tell the index. Past twice as many entries as held conversations, the
stale ones are dropped all at once. No map of keys to entries: one small tuple an entry (100,000 held).

Everything is kept per partition, so that a revoke forgets a partition at the cost of what it holds, not of
every conversation held (`Partitions`: which keys a partition holds).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

from tracescore.conversations._state import Conversation

__all__ = ["ByTime", "Key", "Partitions"]

Key = tuple[str, str]  # (service, conversation id)
_SLACK = 1_000  # stale entries tolerated beyond twice the held count before a rebuild


class ByTime:
    """`time_of(conversation)`: its time in this index (ms), None while it is not in it."""

    def __init__(self, time_of: Callable[[Conversation], int | None]) -> None:
        self.time_of = time_of
        self._heaps: dict[int, list[tuple[int, Key]]] = {}
        self._due: dict[int, dict[Key, int]] = {}  # partition -> key -> time: taken from its heap, reached
        self._size = 0  # entries in the heaps
        self._reached = 0  # entries in `_due`

    def changed(
        self, conversation: Conversation, before: int | None, held: Mapping[Key, Conversation]
    ) -> None:
        """`conversation` changed (or was restored) from `before`, its time before (None: it had none)."""
        at = self.time_of(conversation)
        if at is None or at == before:
            return  # its entry is in the index already, or due to be (a written one changed again: a new one)
        heapq.heappush(self._heaps.setdefault(conversation.partition, []), (at, conversation.key))
        self._size += 1
        if self._size + self._reached > 2 * len(held) + _SLACK:
            self._trim(held)

    def oldest(self, partition: int, held: Mapping[Key, Conversation]) -> float:
        """The earliest time on `partition` (ms; infinity: none). Not with `due` (which takes entries out)."""
        heap = self._heaps.get(partition, [])
        while heap:
            at, key = heap[0]
            if self._live(held.get(key), partition, at):
                return at
            self._pop(heap)
        return float("inf")

    def partitions(self) -> list[int]:
        return list(self._heaps)

    def due(
        self, now_of: Callable[[int], int], after_ms: float, held: Mapping[Key, Conversation]
    ) -> list[Conversation]:
        """The conversations whose time is at least `after_ms` before their partition's `now_of` (in no set
        order). Taken out of their heaps, they are looked at again each call until they leave the index."""
        for partition, heap in self._heaps.items():
            upto = now_of(partition) - after_ms
            reached = self._due.setdefault(partition, {})
            while heap and heap[0][0] <= upto:
                at, key = self._pop(heap)
                if self._live(held.get(key), partition, at):
                    self._reached += key not in reached
                    reached[key] = at
        out = []
        for partition, reached in self._due.items():
            now = now_of(partition)
            for key, at in list(reached.items()):
                conversation = held.get(key)
                if conversation is None or not self._live(conversation, partition, at):
                    self._unreach(reached, key)  # its newer entry, if it changed, is in the heap
                elif now - at < after_ms:  # its partition's time went back (a rebalance)
                    self._unreach(reached, key)
                    heapq.heappush(self._heaps.setdefault(partition, []), (at, key))
                    self._size += 1
                else:
                    out.append(conversation)
        return out

    def forget(self, key: Key, partition: int) -> None:
        """A conversation no longer held (its entries are dropped when read)."""
        reached = self._due.get(partition)
        if reached is not None and key in reached:
            self._unreach(reached, key)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        """Partitions no longer owned: their entries dropped, at no cost for the other partitions'."""
        for partition in partitions:
            self._size -= len(self._heaps.pop(partition, ()))
            self._reached -= len(self._due.pop(partition, ()))

    def _unreach(self, reached: dict[Key, int], key: Key) -> None:
        del reached[key]
        self._reached -= 1

    def _live(self, conversation: Conversation | None, partition: int, at: int) -> bool:
        """The entry (at, its key) on `partition` is the held conversation's current one."""
        return (
            conversation is not None
            and conversation.partition == partition
            and self.time_of(conversation) == at
        )

    def _pop(self, heap: list[tuple[int, Key]]) -> tuple[int, Key]:
        self._size -= 1
        return heapq.heappop(heap)

    def _trim(self, held: Mapping[Key, Conversation]) -> None:
        for partition, reached in self._due.items():
            live = {k: at for k, at in reached.items() if self._live(held.get(k), partition, at)}
            reached.clear()
            reached.update(live)
        for partition, heap in self._heaps.items():
            reached = self._due.get(partition, {})
            kept = {k: at for at, k in heap if k not in reached and self._live(held.get(k), partition, at)}
            heap[:] = [(at, key) for key, at in kept.items()]
            heapq.heapify(heap)
        self._size = sum(map(len, self._heaps.values()))
        self._reached = sum(map(len, self._due.values()))


class Partitions:
    """The keys held per partition: a revoke forgets a partition's keys at the cost of those keys."""

    def __init__(self) -> None:
        self._keys: dict[int, set[Key]] = {}

    def add(self, partition: int, key: Key) -> None:
        self._keys.setdefault(partition, set()).add(key)

    def discard(self, partition: int, key: Key) -> None:
        keys = self._keys.get(partition)
        if keys is not None:
            keys.discard(key)

    def pop(self, partitions: Iterable[int]) -> list[Key]:
        """The keys of `partitions`, no longer kept here."""
        return [key for partition in partitions for key in self._keys.pop(partition, ())]
