"""A drop rule's floor: the route's best normals of the last `floor_seconds`, so a decline too slow for the
normal to show (it follows one that stays within `min_drop` of it) is caught against where the route
stood weeks ago. One snapshot per quarter of the span, each the normal as it stood when a normal bucket
closed (the best of its quarter)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from statistics import NormalDist

from tracescore.alert._config import DropConfig
from tracescore.alert._estimate import Sums, interactions, plain_level
from tracescore.alert._state import Moments, Snapshot

__all__ = ["Floor"]

_SLOTS = 4  # snapshots kept over floor_seconds


class Floor:
    def __init__(self, config: DropConfig, snapshots: list[Snapshot]) -> None:
        self.config = config
        self._z = NormalDist().inv_cdf(config.confidence)
        self._snapshots = [(s.taken_at, s.moments.values()) for s in snapshots]
        self._best: tuple[float, Sums | None, float] | None = None  # (correction, best, its bound)

    def forget(self, now: datetime) -> None:
        """Snapshots older than `floor_seconds` go."""
        if self.config.floor_seconds is None or not self._snapshots:
            return
        kept = now - timedelta(seconds=self.config.floor_seconds)
        if self._snapshots[0][0] < kept:
            self._snapshots = [(at, sums) for at, sums in self._snapshots if at >= kept]
            self._best = None

    def next_due(self) -> datetime | None:
        """When `forget` next lets a snapshot go (None: never, as things stand)."""
        if self.config.floor_seconds is None or not self._snapshots:
            return None
        return self._snapshots[0][0] + timedelta(seconds=self.config.floor_seconds)

    def offer(self, now: datetime, normal: Sums, correction: float) -> None:
        """The normal as it stands (its closed buckets) may become a snapshot: the best of its slot."""
        config = self.config
        if config.floor_seconds is None or interactions(normal) < config.min_normal_samples:
            return
        slot = config.floor_seconds / _SLOTS
        snapshots = self._snapshots
        if snapshots and int(snapshots[-1][0].timestamp() // slot) == int(now.timestamp() // slot):
            if self.lower(snapshots[-1][1], correction) >= self.lower(normal, correction):
                return
            snapshots.pop()
        snapshots.append((now, normal))
        del snapshots[: -(_SLOTS + 1)]
        self._best = None

    def best(self, correction: float) -> tuple[Sums | None, float]:
        """The snapshot with the highest lower bound, and that bound (computed again only when the floor or
        the correction changed)."""
        if self._best is None or self._best[0] != correction:
            best, best_lower = None, -math.inf
            for _, sums in self._snapshots:
                lower = self.lower(sums, correction)
                if lower > best_lower:
                    best, best_lower = sums, lower
            self._best = (correction, best, best_lower)
        return self._best[1], self._best[2]

    def lower(self, sums: Sums, correction: float) -> float:
        level, var, n = plain_level(sums, correction)
        return level - self._z * math.sqrt(var / max(1, n))

    def clear(self) -> None:
        self._snapshots, self._best = [], None

    def dump(self) -> list[Snapshot]:
        return [Snapshot(taken_at=at, moments=Moments.of(sums)) for at, sums in self._snapshots]
