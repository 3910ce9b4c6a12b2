"""Which offset each partition may commit: never past a message whose work is not finished.

A message is finished when its spans were buffered and every trace they belong to was read, scored and its
outputs acknowledged by Kafka (or it was dead-lettered and the dead letter acknowledged). Work in flight
holds the lowest offset of each partition it came from; the trace buffer holds its own (passed in as
`also_held`). A partition commits up to min(next offset read, lowest offset held) — the highest offset
below which every output is acknowledged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Mapping

__all__ = ["OffsetTracker"]


class OffsetTracker:
    """Not thread-safe: the Kafka thread owns it. `generation` changes on every reset (rebalance), so work
    started before the reset cannot finish holds of the new assignment."""

    def __init__(self) -> None:
        self.generation = 0
        self._read_up_to: dict[Hashable, int] = {}
        self._read_from: dict[Hashable, int] = {}
        self._holds: dict[Hashable, Counter[int]] = {}
        self._committed: dict[Hashable, int] = {}

    def read(self, partition: Hashable, offset: int) -> None:
        self._read_up_to[partition] = offset + 1
        self._read_from.setdefault(partition, offset)

    def hold(self, offsets: Mapping[Hashable, int]) -> int:
        """Hold `offsets` (partition -> lowest offset) until `finish`; returns the generation to pass it."""
        for partition, offset in offsets.items():
            self._holds.setdefault(partition, Counter())[offset] += 1
        return self.generation

    def finish(self, offsets: Mapping[Hashable, int], generation: int) -> None:
        if generation != self.generation:
            return  # held before a rebalance: those partitions were re-assigned from committed offsets
        for partition, offset in offsets.items():
            held = self._holds.get(partition)
            if held is not None and held[offset] > 0:
                held[offset] -= 1
                if held[offset] == 0:
                    del held[offset]

    def committable(self, also_held: Mapping[Hashable, int]) -> dict[Hashable, int]:
        """Offsets to commit now (only partitions that moved since their last commit)."""
        out = {}
        for partition, up_to in self._read_up_to.items():
            offset = min(up_to, also_held.get(partition, up_to))
            held = self._holds.get(partition)
            if held:
                offset = min(offset, min(held))
            # Nothing new is finished below the first offset read: committing it would only restate the
            # group's offset (or create one for a group that never committed).
            if offset > self._read_from[partition] and self._committed.get(partition) != offset:
                out[partition] = offset
        return out

    def committed(self, offsets: Mapping[Hashable, int]) -> None:
        self._committed.update(offsets)

    def reset(self) -> dict[Hashable, int]:
        """Partitions revoked: forget everything; work in flight keeps running but finishes nothing.

        Returns, per partition read since the last reset, the first offset not known to be committed: where
        reading must resume if the partition comes back, since what was forgotten is not finished."""
        rewind = {p: self._committed.get(p, start) for p, start in self._read_from.items()}
        self.generation += 1
        self._read_up_to.clear()
        self._read_from.clear()
        self._holds.clear()
        self._committed.clear()
        return rewind

    @property
    def holding(self) -> int:
        return sum(sum(c.values()) for c in self._holds.values())
