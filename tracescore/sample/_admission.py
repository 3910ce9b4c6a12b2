"""Admission by running quantile: the most suspicious `share` of recent interactions go to the LLM judge."""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Hashable

__all__ = ["RunningQuantile"]

# Fewer recent scores than this rank nothing (a quantile of a handful is noise): all above the floor go,
# the budget's hard limit still applies. Kept small: a model whose floor is wrong spends this many at most.
MIN_RANKED = 20


class RunningQuantile:
    """The last `size` suspicion scores, kept sorted, to rank a new score against; with what they were
    computed from, so they can be scored again when the model learns (a new score must not be ranked
    against scores of an older model)."""

    def __init__(self, size: int) -> None:
        self._recent: deque[tuple[float, Hashable]] = deque()
        self._sorted: list[float] = []
        self._size = size

    def __len__(self) -> int:
        return len(self._sorted)

    def add(self, score: float, source: Hashable = None) -> None:
        score = _key(score)
        if len(self._recent) >= self._size:
            oldest, _ = self._recent.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._recent.append((score, source))
        bisect.insort(self._sorted, score)

    def rescore(self, score: Callable[[Hashable], float]) -> None:
        """Score every remembered source again (equal sources once: traffic repeats its feature vectors)."""
        cache: dict[Hashable, float] = {}
        self._recent = deque(
            (_key(cache[s] if s in cache else cache.setdefault(s, score(s))), s) for _, s in self._recent
        )
        self._sorted = sorted(k for k, _ in self._recent)

    def admission(self, score: float, share: float) -> float:
        """The chance that `score` is within the top `share` of the recent scores: 1 above the quantile,
        0 below, and for a score tied with others at the quantile, the part of the tie that fits."""
        if share <= 0.0:
            return 0.0
        n = len(self._sorted)
        if n < MIN_RANKED or share >= 1.0:
            return 1.0
        score = _key(score)
        above = (n - bisect.bisect_right(self._sorted, score)) / n
        tied = (bisect.bisect_right(self._sorted, score) - bisect.bisect_left(self._sorted, score)) / n
        if above >= share:
            return 0.0
        if above + tied <= share or not tied:
            return 1.0
        return (share - above) / tied


def _key(score: float) -> float:
    # Equal features give equal scores; rounding makes float noise from the arithmetic order a tie too.
    return round(score, 9)
