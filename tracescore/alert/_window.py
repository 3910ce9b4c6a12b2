"""The rolling window of one route and metric: its newest interactions, each once with its newest scores,
and the route's remembered baseline pairs. The estimate's math is alert/_estimate.py's, on sums the window
keeps up to date as interactions come, change and leave (so an estimate costs the same for a window of 50
as of 5,000); an interaction leaving the window is handed to `on_leave` (a drop rule counts it into its
older windows there, alert/_drop.py).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from tracescore.alert._estimate import (
    C_N,
    C_SQUARES,
    C_SUM,
    EXCLUDED,
    LLM_N,
    OFFLINE_N,
    PAIR_MEMORY,
    PAIRS,
    R_N,
    R_SQUARES,
    R_SUM,
    UNPAIRED,
    Agreement,
    Estimate,
    Observation,
    Pair,
    PairStats,
    Signal,
    Sums,
    add_sums,
    empty_sums,
    estimate_of,
    good,
    pair_stats,
    revision_of,
)
from tracescore.model import EvaluationRecord, Selection

__all__ = ["EstimateWindow", "WindowEntry", "contribution", "part_of", "sums_of"]

_RECOUNT_EVERY = 100_000  # updates between two exact recounts of the sums (floating-point drift)
Key = tuple[str, str]


@dataclass(slots=True)
class WindowEntry:
    """One unit of a window (an answer, or a conversation): each judge's newest value of it."""

    key: Key
    at: datetime
    primary: float | None = None  # the judge that scores every admitted one (offline, or the only judge)
    primary_llm: bool = False  # that judge is an LLM
    primary_rev: int = -1
    llm: float | None = None  # the LLM judge behind the sampling policy
    llm_rev: int = -1
    offline_hint: float | None = None  # the offline score the LLM record carries
    selection: str | None = None
    pi: float | None = None
    counted: bool = False  # already counted by a drop rule's older windows (read again after a restart)
    stray: bool = False  # never in the window: older than every interaction of the full window


# An interaction's contribution is one value and a code (what it counts in which stratum): a drop rule keeps
# a thousand counted ones this way (alert/_drop.py), not as 11 floats each.
_C, _R, _UNPAIRED, _BY_LLM, _PAIRED, _EXCLUDED = 1, 2, 4, 8, 16, 32


def part_of(item: WindowEntry) -> tuple[int, float]:
    """(code, value) of what one interaction adds to its window's sums: stratum C when the LLM judge scored
    it with inclusion probability 1, else stratum R with the offline value, and its pair; `sums_of` of
    them is `contribution(item)`."""
    offline = item.primary if item.primary is not None else item.offline_hint
    if item.llm is not None and item.pi is not None and item.pi >= 1.0:
        return _C, item.llm
    if offline is None:
        return (0 if item.llm is None else _UNPAIRED), 0.0  # an LLM value of the sample with nothing to pair
    code = _R | (_BY_LLM if item.primary_llm else 0)
    if item.llm is None:
        return code, offline
    if (item.pi is not None and item.pi > 0) or (item.pi is None and item.selection == Selection.BASELINE):
        return code | _PAIRED, offline  # an older consumer's baseline (no probability) is uniform: weight 1
    return code | _EXCLUDED, offline


def sums_of(code: int, value: float) -> Sums:
    """The sums (alert/_estimate.py) of one interaction's (code, value) from `part_of`."""
    s = empty_sums()
    if code & _C:
        s[C_N], s[C_SUM], s[C_SQUARES], s[LLM_N] = 1, value, value * value, 1
    elif code & _R:
        s[R_N], s[R_SUM], s[R_SQUARES] = 1, value, value * value
        s[LLM_N if code & _BY_LLM else OFFLINE_N] = 1
        if code & _PAIRED:
            s[PAIRS] = 1
            s[LLM_N] += 1
        elif code & _EXCLUDED:
            s[EXCLUDED] = 1
    elif code & _UNPAIRED:
        s[UNPAIRED] = 1
    return s


def contribution(item: WindowEntry) -> Sums:
    """What one interaction adds to its window's sums (alert/_estimate.py)."""
    return sums_of(*part_of(item))


def _pair_of(item: WindowEntry) -> Pair | None:
    """(1/π, LLM, offline) of an interaction in stratum R the LLM judge also scored, else None."""
    offline = item.primary if item.primary is not None else item.offline_hint
    if item.llm is None or offline is None or item.primary_llm:
        return None
    if item.pi is not None and 0 < item.pi < 1.0:
        return (1.0 / item.pi, item.llm, offline)
    if item.pi is None and item.selection == Selection.BASELINE:
        return (1.0, item.llm, offline)  # an older consumer's baseline: uniform, weight 1
    return None


def _apply(item: WindowEntry, seen: Observation) -> None:
    """One judge's value into its interaction: a later record of the same judge replaces the earlier one (a
    higher revision wins; a lower one read late is ignored)."""
    rev = seen.revision
    if seen.selection is None and seen.inclusion_probability is None:
        if rev >= item.primary_rev:
            item.primary, item.primary_rev = seen.value, rev
            item.primary_llm = seen.by_llm
    elif rev >= item.llm_rev:
        item.llm, item.llm_rev = seen.value, rev
        item.selection, item.pi = seen.selection, seen.inclusion_probability
        item.offline_hint = seen.offline_hint


class EstimateWindow:
    """The newest `maxlen` interactions of one route and metric, in time order."""

    def __init__(
        self,
        maxlen: int,
        signal: Signal = "score",
        pair_memory: int = PAIR_MEMORY,
        on_leave: Callable[[Key, WindowEntry], None] | None = None,
    ) -> None:
        self.maxlen = maxlen
        self.signal = signal
        self.on_leave = on_leave
        self._items: dict[Key, WindowEntry] = {}
        self._order: list[tuple[datetime, Key]] = []
        self._sums = empty_sums()
        self._counted_sums = empty_sums()  # of the interactions marked `counted`
        self._updates = 0
        # Pairs outlive the window (see alert/_estimate.py); a window's own pairs always fit.
        self._pair_memory = max(pair_memory, maxlen)
        # By the hash of their key, not the key (two ids, ~200 bytes): most have left the window. Two keys of
        # one hash would take one answer's pair for the other's: a chance of about 2**-64 a pair.
        self._pairs: OrderedDict[int, Pair] = OrderedDict()
        self._pairs_changed = True  # the cached statistics of `_pairs` are stale
        self._stats: PairStats | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, record: EvaluationRecord) -> WindowEntry | None:
        if record.score is None:
            return None  # a failed evaluation is judge health, not a score
        value, hint = record.score, record.offline_score
        if self.signal == "label":
            value = good(record.score, record.label)
            # Only the offline label: its score alone does not say whether the label rule flagged it.
            off_score, off_label = record.offline_score, record.offline_label
            hint = None if off_score is None or off_label is None else good(off_score, off_label)
        return self.observe(
            Observation(
                key=(record.trace_id, record.span_id),
                at=record.timestamp,
                value=value,
                revision=revision_of(record),
                by_llm=record.annotator_kind == "LLM",
                selection=record.selection,
                inclusion_probability=record.inclusion_probability,
                offline_hint=hint,
            )
        )

    def observe(self, seen: Observation) -> WindowEntry | None:
        """One judge's value of one unit (an answer, or a conversation: alert/_conversations.py); returns its
        interaction, or None when it is older than every interaction of a full window (no place in it)."""
        item = self._items.get(seen.key)
        if item is None:
            if len(self._items) >= self.maxlen and self._order and seen.at < self._order[0][0]:
                if self.on_leave is not None:  # an answer all the same: it leaves at once
                    stray = WindowEntry(seen.key, seen.at, stray=True)
                    _apply(stray, seen)
                    self.on_leave(seen.key, stray)
                return None
            item = self._items[seen.key] = WindowEntry(seen.key, seen.at)
            bisect.insort(self._order, (item.at, seen.key))
        else:
            self._account(item, -1.0)
        _apply(item, seen)
        self._account(item, 1.0)
        self._remember_pair(seen.key, item)
        while len(self._items) > self.maxlen:
            _, oldest = self._order.pop(0)
            self._leave(oldest)
        return item if seen.key in self._items else None

    def mark_counted(self, item: WindowEntry) -> None:
        """Leave `item` out of `uncounted_sums` (a drop rule counted it already)."""
        if not item.counted:
            self._account(item, -1.0)
            item.counted = True
            self._account(item, 1.0)

    def _account(self, item: WindowEntry, sign: float) -> None:
        part = contribution(item)
        add_sums(self._sums, part, sign)
        if item.counted:
            add_sums(self._counted_sums, part, sign)
        self._updates += 1
        if self._updates >= _RECOUNT_EVERY:
            self._recount()

    def _recount(self) -> None:
        self._updates = 0
        self._sums, self._counted_sums = empty_sums(), empty_sums()
        for item in self._items.values():
            part = contribution(item)
            add_sums(self._sums, part)
            if item.counted:
                add_sums(self._counted_sums, part)

    def _leave(self, key: Key) -> None:
        item = self._items.pop(key)
        self._account(item, -1.0)
        if not self._items:  # exactly zero again, whatever the rounding
            self._sums, self._counted_sums = empty_sums(), empty_sums()
        if self.on_leave is not None:
            self.on_leave(key, item)

    def _remember_pair(self, key: Key, item: WindowEntry) -> None:
        pair = _pair_of(item)
        if pair is None:
            return
        hashed = hash(key)
        self._pairs[hashed] = pair
        self._pairs.move_to_end(hashed)
        self._pairs_changed = True
        while len(self._pairs) > self._pair_memory:
            self._pairs.popitem(last=False)

    def pair_stats(self) -> PairStats | None:
        """The route's remembered pairs' statistics (None without any), recomputed only after a change."""
        if self._pairs_changed:
            self._stats = pair_stats(list(self._pairs.values())) if self._pairs else None
            self._pairs_changed = False
        return self._stats

    def prune(self, horizon: datetime) -> None:
        """Forget interactions older than `horizon`."""
        cut = bisect.bisect_left(self._order, horizon, key=lambda entry: entry[0])
        leaving = self._order[:cut]
        del self._order[:cut]
        for _, key in leaving:
            self._leave(key)

    def oldest(self) -> datetime | None:
        """The time of the oldest interaction held (None: none): `prune` forgets nothing up to it."""
        return self._order[0][0] if self._order else None

    def sums(self) -> Sums:
        return list(self._sums)

    def uncounted_keys(self) -> list[Key]:
        """The interactions no drop rule counted yet (they wait in this window)."""
        return [key for key, item in self._items.items() if not item.counted]

    def uncounted_sums(self) -> Sums:
        """The sums of the interactions no drop rule counted yet."""
        out = list(self._sums)
        add_sums(out, self._counted_sums, -1.0)
        return out

    def estimate(self, confidence: float) -> Estimate | None:
        # The route's recent pairs, this window's among them (a window's own pairs always fit the memory).
        return estimate_of(self._sums, self.pair_stats(), confidence, self.signal)

    def agreement(self, threshold: float) -> Agreement:
        both = [
            (item.primary if item.primary is not None else item.offline_hint, item.llm)
            for item in self._items.values()
            # The baseline's pairs only: the uniform draws on the cascade's budget follow the split of the
            # answer's shape, so unweighted they are no uniform sample of the route.
            if item.llm is not None and item.selection == Selection.BASELINE and not item.primary_llm
        ]
        pairs = [(o, y) for o, y in both if o is not None and y is not None]
        if not pairs:
            return Agreement(pairs=0, agreement=None, mean_difference=None, recall=None, llm_failures=0)
        same = sum((o >= threshold) == (y >= threshold) for o, y in pairs)
        failures = [(o, y) for o, y in pairs if y < threshold]
        caught = sum(o < threshold for o, _ in failures)
        return Agreement(
            pairs=len(pairs),
            agreement=same / len(pairs),
            mean_difference=sum(y - o for o, y in pairs) / len(pairs),
            recall=caught / len(failures) if failures else None,
            llm_failures=len(failures),
        )
