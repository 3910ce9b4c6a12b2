"""Which offset each partition may commit: never past a message whose work is not finished.

A message is finished when its spans were buffered and every trace they belong to was read, scored and its
outputs acknowledged by Kafka (or it was dead-lettered and the dead letter acknowledged). Work in flight
holds the lowest offset of each partition it came from; the trace buffer holds its own (passed in as
`also_held`). A partition commits up to min(next offset read, lowest offset held) — the highest offset
below which every output is acknowledged. What lies between that offset and the next offset read is told
apart by the commit's handover (consume/_handover.py), not here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Mapping

__all__ = ["OffsetTracker"]


class OffsetTracker:
    """Not thread-safe: the Kafka thread owns it. `generation` changes on every reset (the member lost the
    group), so work started before it cannot finish holds of a later assignment."""

    def __init__(self) -> None:
        self.generation = 0
        self._read_up_to: dict[Hashable, int] = {}
        self._read_from: dict[Hashable, int] = {}
        self._holds: dict[Hashable, Counter[int]] = {}
        self._committed: dict[Hashable, int] = {}
        self._finished: set[Hashable] = set()  # partitions where some held work finished

    def read(self, partition: Hashable, offset: int) -> None:
        self._read_up_to[partition] = offset + 1
        self._read_from.setdefault(partition, offset)

    def read_up_to(self, partition: Hashable) -> int | None:
        return self._read_up_to.get(partition)

    def hold(self, offsets: Mapping[Hashable, int]) -> int:
        """Hold `offsets` (partition -> lowest offset) until `finish`; returns the generation to pass it."""
        for partition, offset in offsets.items():
            self._holds.setdefault(partition, Counter())[offset] += 1
        return self.generation

    def finish(self, offsets: Mapping[Hashable, int], generation: int) -> None:
        if generation != self.generation:
            return  # held before the member lost the group: those partitions restart from committed offsets
        for partition, offset in offsets.items():
            held = self._holds.get(partition)
            if held is not None and held[offset] > 0:
                held[offset] -= 1
                self._finished.add(partition)
                if held[offset] == 0:
                    del held[offset]

    def committable(
        self,
        also_held: Mapping[Hashable, int],
        partitions: Collection[Hashable] | None = None,
        every: bool = False,
    ) -> dict[Hashable, tuple[int, int]]:
        """Per partition read (of `partitions`, default all): (offset to commit, next offset read), where
        something is finished: below the offset, or between it and the next offset read (held work that
        finished). A partition where nothing finished commits nothing (it would only restate the group's
        offset, or create one for a group that never committed), unless `every`: a member giving its
        partitions up hands over what it read even then."""
        out = {}
        for partition, up_to in self._read_up_to.items():
            if partitions is not None and partition not in partitions:
                continue
            offset = min(up_to, also_held.get(partition, up_to))
            held = self._holds.get(partition)
            if held:
                offset = min(offset, min(held))
            if every or offset > self._read_from[partition] or partition in self._finished:
                out[partition] = (offset, up_to)
        return out

    def committed(self, offsets: Mapping[Hashable, int]) -> None:
        self._committed.update(offsets)

    def forget(self, partitions: Collection[Hashable]) -> dict[Hashable, int]:
        """Partitions revoked: forget them. Returns, per partition read since, the first offset not known to
        be committed: where reading resumes if the partition comes back."""
        rewind = {}
        for partition in list(self._read_from):
            if partition in partitions:
                rewind[partition] = self._committed.get(partition, self._read_from[partition])
        for state in (self._read_up_to, self._read_from, self._holds, self._committed):
            for partition in [p for p in state if p in partitions]:
                del state[partition]
        self._finished -= set(partitions)
        return rewind

    def reset(self) -> dict[Hashable, int]:
        """Every partition gone at once (the member lost the group): forget everything; work in flight
        keeps running but finishes nothing."""
        self.generation += 1
        return self.forget(set(self._read_from) | set(self._holds))

    @property
    def holding(self) -> int:
        return sum(sum(c.values()) for c in self._holds.values())
