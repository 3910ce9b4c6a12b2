"""The held conversations by one of their times, per partition, for what the service asks every tick: which
are due (`due`), and the earliest (`oldest`), at a cost proportional to what changed or became due, not to
how many are held (issue 33: 100,000 open conversations).

An entry is pushed when a conversation's time changes (the tracker sees every change) and checked against
the conversation when read: one since written, saved or forgotten is dropped then (its time reads None, or
another), so nothing else needs to tell the index. Past twice as many entries as held conversations, the
stale ones are dropped all at once. No map of keys to entries: one small tuple an entry (100,000 held).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

from tracescore.conversations._state import Conversation

__all__ = ["ByTime", "Key"]

Key = tuple[str, str]  # (service, conversation id)
_SLACK = 1_000  # stale entries tolerated beyond twice the held count before a rebuild


class ByTime:
    """`time_of(conversation)`: its time in this index (ms), None while it is not in it."""

    def __init__(self, time_of: Callable[[Conversation], int | None]) -> None:
        self.time_of = time_of
        self._heaps: dict[int, list[tuple[int, Key]]] = {}
        self._due: dict[Key, tuple[int, int]] = {}  # key -> (partition, time): taken from its heap, reached
        self._size = 0  # entries in the heaps

    def changed(
        self, conversation: Conversation, before: int | None, held: Mapping[Key, Conversation]
    ) -> None:
        """`conversation` changed (or was restored) from `before`, its time before (None: it had none)."""
        at = self.time_of(conversation)
        if at is None or at == before:
            return  # its entry is in the index already, or due to be (a written one changed again: a new one)
        heapq.heappush(self._heaps.setdefault(conversation.partition, []), (at, conversation.key))
        self._size += 1
        if self._size + len(self._due) > 2 * len(held) + _SLACK:
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
            while heap and heap[0][0] <= upto:
                at, key = heap[0]
                if self._live(held.get(key), partition, at):
                    heapq.heappop(heap)
                    self._size -= 1
                    self._due[key] = (partition, at)
                else:
                    self._pop(heap)
        out = []
        for key, (partition, at) in list(self._due.items()):
            conversation = held.get(key)
            if conversation is None or not self._live(conversation, partition, at):
                del self._due[key]  # its newer entry, if it changed, is in the heap
            elif now_of(partition) - at < after_ms:  # its partition's time went back (a rebalance)
                del self._due[key]
                heapq.heappush(self._heaps.setdefault(partition, []), (at, key))
                self._size += 1
            else:
                out.append(conversation)
        return out

    def forget(self, key: Key) -> None:
        """A conversation no longer held (its entries are dropped when read)."""
        self._due.pop(key, None)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        gone = set(partitions)
        for partition in gone:
            self._size -= len(self._heaps.pop(partition, []))
        for key in [k for k, (p, _) in self._due.items() if p in gone]:
            self.forget(key)

    def _live(self, conversation: Conversation | None, partition: int, at: int) -> bool:
        """The entry (at, its key) on `partition` is the held conversation's current one."""
        return (
            conversation is not None
            and conversation.partition == partition
            and self.time_of(conversation) == at
        )

    def _pop(self, heap: list[tuple[int, Key]]) -> None:
        heapq.heappop(heap)
        self._size -= 1

    def _trim(self, held: Mapping[Key, Conversation]) -> None:
        self._due = {k: (p, at) for k, (p, at) in self._due.items() if self._live(held.get(k), p, at)}
        for partition, heap in self._heaps.items():
            kept = {k: at for at, k in heap if k not in self._due and self._live(held.get(k), partition, at)}
            heap[:] = [(at, key) for key, at in kept.items()]
            heapq.heapify(heap)
        self._size = sum(map(len, self._heaps.values()))
