"""Drop rules: a route's recent answers against its own trailing normal.

Each answer (interaction) is counted once, when it leaves the rule's window (alert/_window.py), where it
waited for all its judges' records: into the drop rule's window, then, as that moves on, into the normal.
Both are kept as buckets of sums (alert/_estimate.py), so a route costs the same memory at 50 answers a
day as at 10,000 a minute, and its state (tracescore.alert._state.DropState) fits a Kafka message.

    newest ... [rule's window: interactions] [drop window: buckets] [normal: buckets] ... oldest

The window and the normal are read alike: the plain difference estimator (λ = 1) with the route's one
correction from its baseline pairs, so the correction cancels out of their difference and a drop the
offline judge sees counts in full (with the offline judge alone, both are its pass rate). The drop's
variance is the window's (at least the normal's per answer: a window of a few identical answers proves
nothing) plus the normal's, plus the correction's where the two differ in their share of LLM-judged
answers.

The normal is held (no answer added, none forgotten) while a drop is suspected (the window at least
`min_drop` below it) or firing: an incident never becomes the normal, and a decline can be followed only
while it stays within `min_drop` of the normal; one faster than that (per span of the normal) widens the
gap until it pages. The floor catches slower ones: the window is also compared with the best normal of
the last `floor_seconds` (one snapshot per quarter of it) when that is credibly higher than the normal.
A normal held `relearn_after_seconds` is given up: the route's current level becomes its normal.
"""

from __future__ import annotations

import itertools
import math
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from hashlib import blake2b
from statistics import NormalDist
from typing import Literal

from tracescore.alert._config import DropConfig
from tracescore.alert._estimate import (
    C_N,
    LLM_N,
    OFFLINE_N,
    R_N,
    PairStats,
    Sums,
    add_sums,
    empty_sums,
    plain_level,
)
from tracescore.alert._state import Bucket, DropState, Level, Moments, Snapshot
from tracescore.alert._window import Key, WindowEntry, contribution

__all__ = ["DropReading", "DropTracker"]

_BUCKETS = 8  # per window and per normal: how finely each slides
_MAX_BUCKETS = 12  # hard bound, whatever the records' times (state size)
_FLOOR_SLOTS = 4  # snapshots kept over floor_seconds
_LENGTHS = (1, 2, 4)  # newest buckets of the window tested on their own, besides the whole window
_SETTLED = 1000  # counted interactions remembered, so a late record of one replaces it in its bucket

Status = Literal["learning", "too_few", "ready"]


@dataclass(slots=True)
class _Bucket:
    first_at: datetime
    last_at: datetime
    sums: Sums
    serial: int

    @property
    def n(self) -> int:
        return round(self.sums[C_N] + self.sums[R_N])


@dataclass(frozen=True, slots=True)
class DropReading:
    """What a drop rule reads of one route now."""

    status: Status  # learning: the normal has too few answers; too_few: the window has
    # The window's newest part (1/8, 1/4, 1/2 or all of it) whose drop has the highest lower bound:
    window: float  # its level (plain difference estimator)
    window_n: int
    normal: float  # the reference's level: the normal, or the floor when it sits higher
    normal_n: int
    drop: float  # normal - window
    lower: float  # one-sided lower bound of the drop at the rule's confidence (over the four lengths)
    reference: Literal["normal", "floor"]
    calibrated: bool  # the levels are corrected by the LLM judge's baseline pairs
    offline_n: int  # the window's offline and LLM scores
    llm_n: int
    whole_n: int = 0  # the whole window's answers
    whole_drop: float = 0.0  # the whole window's drop: a drop is suspected (the normal held) from min_drop
    peak_drop: float = 0.0  # the largest drop of the four lengths: an alert holds while it is above half

    @property
    def ready(self) -> bool:
        return self.status == "ready"


def _total(buckets: list[_Bucket]) -> Sums:
    out = empty_sums()
    for bucket in buckets:
        add_sums(out, bucket.sums)
    return out


def _bound(buckets: list[_Bucket]) -> None:
    """At most _MAX_BUCKETS (records far apart in time close buckets early): merge the two oldest."""
    while len(buckets) > _MAX_BUCKETS:
        first = buckets.pop(0)
        add_sums(buckets[0].sums, first.sums)
        buckets[0].first_at = min(first.first_at, buckets[0].first_at)


def _digest(key: Key) -> str:
    return blake2b("\x1f".join(key).encode(), digest_size=8).hexdigest()


def _count(sums: Sums) -> int:
    return round(sums[C_N] + sums[R_N])


class DropTracker:
    """One route's drop rule: its buckets, in memory; `state` is the persisted form (`to_state` refreshes
    it), whose level fields the evaluator's transitions update in place."""

    def __init__(self, config: DropConfig, state: DropState | None = None) -> None:
        self.config = config
        self.state = state or DropState()
        self._z = NormalDist().inv_cdf(config.confidence)
        self._z_lengths = NormalDist().inv_cdf(1 - (1 - config.confidence) / (len(_LENGTHS) + 1))
        self._serials = itertools.count()
        self._recent = [self._load(b) for b in self.state.recent]
        self._normal = [self._load(b) for b in self.state.normal]
        self._floor = [(s.taken_at, s.moments.values()) for s in self.state.floor]
        self._best: tuple[float, Sums | None, float] | None = None  # (correction, best floor, its bound)
        self._recent_total, self._normal_total = _total(self._recent), _total(self._normal)
        # After a restart: what was seen before it is counted, but for the answers then waiting (`pending`).
        self._restored_until = self.state.counted_until
        self._restored_pending = set(self.state.pending)
        self._newest = self.state.counted_until
        # key -> (bucket serial, what it added): a late record of a counted interaction replaces it.
        self._settled: OrderedDict[Key, tuple[int, Sums]] = OrderedDict()
        self._recent_size = math.ceil(config.window_count / _BUCKETS)
        self._normal_size = math.ceil(config.normal_count / _BUCKETS)
        self._recent_span = timedelta(seconds=config.window_seconds / _BUCKETS)
        self._normal_span = timedelta(seconds=config.normal_seconds / _BUCKETS)
        self._changed = False  # since take_changed: what the state holds moved

    def _load(self, bucket: Bucket) -> _Bucket:
        return _Bucket(bucket.first_at, bucket.last_at, bucket.moments.values(), next(self._serials))

    # -- counting ---------------------------------------------------------------------------------------
    def saw(self, at: datetime) -> None:
        """A record of the route at `at` was read."""
        if self._newest is None or at > self._newest:
            self._newest = at

    def seen(self, item: WindowEntry) -> bool:
        """Whether `item` (in the rule's window, or a stray one) was counted already: read again after a
        restart, or a late record of a counted answer. The window leaves it out of the drop window's sums."""
        if item.key in self._settled:
            return True
        restored = self._restored_until
        return (
            restored is not None and item.at <= restored and _digest(item.key) not in self._restored_pending
        )

    def count(self, key: Key, item: WindowEntry) -> None:
        """`item` left the rule's window (or never had a place in it: a stray): into the drop window, once."""
        part = contribution(item)
        known = self._settled.get(key)
        if known is not None:  # a later record of an answer counted already
            if item.stray:
                self.state.late += 1  # older than the window: whatever it says was superseded
                return
            bucket = next((b for b in (*self._recent, *self._normal) if b.serial == known[0]), None)
            if bucket is None:
                self.state.late += 1
                return
            total = self._recent_total if any(b is bucket for b in self._recent) else self._normal_total
            for sums in (bucket.sums, total):  # it replaces its first count
                add_sums(sums, known[1], -1.0)
                add_sums(sums, part)
            self._settled[key] = (bucket.serial, part)
            return
        if item.counted or (item.stray and self.seen(item)):
            return  # counted before a restart
        if item.primary is None and item.offline_hint is not None:
            self.state.late += 1  # an LLM record whose answer's offline record was counted long ago
            return
        bucket = self._open(self._recent, item.at, self._recent_size, self._recent_span)
        add_sums(bucket.sums, part)
        add_sums(self._recent_total, part)
        bucket.first_at, bucket.last_at = min(bucket.first_at, item.at), max(bucket.last_at, item.at)
        self._settled[key] = (bucket.serial, part)
        while len(self._settled) > _SETTLED:
            self._settled.popitem(last=False)

    def _open(self, buckets: list[_Bucket], at: datetime, size: int, span: timedelta) -> _Bucket:
        last = buckets[-1] if buckets else None
        if last is None or last.n >= size or at - last.first_at > span:
            last = _Bucket(at, at, empty_sums(), next(self._serials))
            buckets.append(last)
            _bound(buckets)
        return last

    # -- moving on --------------------------------------------------------------------------------------
    def advance(self, now: datetime, live_n: int, correction: float) -> None:
        """Buckets leave the window (past `window_count` with the `live_n` answers of the rule's window, or
        older than `window_seconds`) into the normal, which forgets its oldest past `normal_count` or
        `normal_seconds`; while the normal is held, leaving answers are discarded and it forgets nothing."""
        held = self.state.held_since is not None
        config = self.config
        recent_n = _count(self._recent_total)
        horizon = now - timedelta(seconds=config.window_seconds)
        moved = False
        while self._recent:
            oldest = self._recent[0]
            if recent_n - oldest.n + live_n < config.window_count and oldest.last_at >= horizon:
                break
            self._recent.pop(0)
            recent_n -= oldest.n
            moved = True
            if not held:  # while held, the answers leaving the window are not learned
                self._into_normal(oldest, now, correction)
        if not held:
            normal_n = _count(self._normal_total) if not moved else sum(b.n for b in self._normal)
            horizon = now - timedelta(seconds=config.normal_seconds)
            while self._normal and (
                normal_n - self._normal[0].n >= config.normal_count or self._normal[0].last_at < horizon
            ):
                normal_n -= self._normal.pop(0).n
                moved = True
            if config.floor_seconds is not None and self._floor:
                kept = now - timedelta(seconds=config.floor_seconds)
                if self._floor[0][0] < kept:
                    self._floor = [(at, sums) for at, sums in self._floor if at >= kept]
                    self._best = None
        if moved:  # exact again: sums of whole buckets
            self._recent_total, self._normal_total = _total(self._recent), _total(self._normal)
            self._changed = True

    def _into_normal(self, bucket: _Bucket, now: datetime, correction: float) -> None:
        last = self._normal[-1] if self._normal else None
        if (
            last is not None
            and last.n < self._normal_size
            and bucket.last_at - last.first_at <= self._normal_span
        ):
            add_sums(last.sums, bucket.sums)
            last.first_at, last.last_at = (
                min(last.first_at, bucket.first_at),
                max(last.last_at, bucket.last_at),
            )
            return
        self._normal.append(bucket)  # keeps its serial: late records of its answers still find it
        _bound(self._normal)
        if last is not None:  # a normal bucket closed: the normal as it stands may become the floor
            self._snapshot(now, correction)

    def _snapshot(self, now: datetime, correction: float) -> None:
        config = self.config
        normal = _total(self._normal[:-1])  # the closed buckets
        if config.floor_seconds is None or _count(normal) < config.min_normal_samples:
            return
        slot = config.floor_seconds / _FLOOR_SLOTS
        if self._floor and int(self._floor[-1][0].timestamp() // slot) == int(now.timestamp() // slot):
            if self._lower(self._floor[-1][1], correction) >= self._lower(normal, correction):
                return
            self._floor.pop()
        self._floor.append((now, normal))
        del self._floor[: -(_FLOOR_SLOTS + 1)]
        self._best = None

    def _best_floor(self, correction: float) -> tuple[Sums | None, float]:
        """The floor's snapshot with the highest lower bound (computed again only when the floor or the
        correction changed)."""
        if self._best is None or self._best[0] != correction:
            best, best_lower = None, -math.inf
            for _, sums in self._floor:
                lower = self._lower(sums, correction)
                if lower > best_lower:
                    best, best_lower = sums, lower
            self._best = (correction, best, best_lower)
        return self._best[1], self._best[2]

    def _lower(self, sums: Sums, correction: float) -> float:
        level, var, n = plain_level(sums, correction)
        return level - self._z * math.sqrt(var / max(1, n))

    # -- reading ----------------------------------------------------------------------------------------
    def read(self, live: Sums, stats: PairStats | None) -> DropReading:
        """The window (the rule's window's uncounted interactions, `live`, and the drop window's buckets)
        against the reference: the normal, or the floor's best snapshot when that is credibly higher.

        The window is tested at four lengths, its newest 1/8, 1/4, 1/2 and all of it (whole buckets, each
        with at least `min_samples` answers), at `confidence` for the four together (Bonferroni): a large
        drop shows in the newest answers long before it moves the whole window, a small one only in all."""
        config = self.config
        correction = 0.0 if stats is None else stats.plain
        correction_var = 0.0 if stats is None else stats.shrunk(stats.plain_raw_var) / stats.effective
        normal = self._normal_total
        reference: Literal["normal", "floor"] = "normal"
        if _count(normal) >= config.min_normal_samples:
            # The floor takes over when it is credibly above the normal (its lower bound above the normal's
            # level), not whenever it happens to read higher: on a steady route that would be half the time.
            floor, floor_lower = self._best_floor(correction)
            if floor is not None and floor_lower > plain_level(normal, correction)[0]:
                normal, reference = floor, "floor"
        n_level, n_var, n_n = plain_level(normal, correction)
        share_n = normal[R_N] / n_n if n_n else 0.0  # answers the correction applies to
        best: tuple[float, float, float, int, Sums] | None = None  # (lower, drop, level, n, sums)
        peak = whole = 0.0
        whole_n = 0
        for window in self._lengths(live):
            w_level, w_var, w_n = plain_level(window, correction)
            whole_n = w_n  # the last length is the whole window
            if not w_n or not n_n:
                continue
            drop = n_level - w_level
            whole = drop
            if w_n < config.min_samples:
                continue
            share_w = window[R_N] / w_n
            var = max(w_var, n_var) / w_n + n_var / n_n + correction_var * (share_n - share_w) ** 2
            lower = drop - self._z_lengths * math.sqrt(var)
            peak = max(peak, drop)
            if best is None or lower > best[0]:
                best = (lower, drop, w_level, w_n, window)
        status: Status = "learning" if n_n < config.min_normal_samples else "ready"
        if best is None:
            window = self._lengths(live)[-1]
            w_level, _, w_n = plain_level(window, correction)
            best = (-1.0, n_level - w_level if w_n and n_n else 0.0, w_level, w_n, window)
            status = "learning" if status == "learning" else "too_few"
        lower, drop, w_level, w_n, window = best
        calibrated = stats is not None or (window[OFFLINE_N] == 0 and window[LLM_N] > 0)
        return DropReading(
            status, w_level, w_n, n_level, n_n, drop, lower, reference, calibrated,
            round(window[OFFLINE_N]), round(window[LLM_N]), whole_n, whole, peak,
        )  # fmt: skip

    def _lengths(self, live: Sums) -> list[Sums]:
        """The window's newest 1/8, 1/4, 1/2 (whole buckets, the rule's window included) and all of it."""
        out, window = [], list(live)
        for taken, bucket in enumerate(reversed(self._recent[-_LENGTHS[-1] :]), 1):
            add_sums(window, bucket.sums)
            if taken in _LENGTHS:
                out.append(list(window))
        window = list(self._recent_total)
        add_sums(window, live)
        out.append(window)
        return out

    def level(self, current: Level, reading: DropReading) -> Level:
        """Fire at a level when the drop's lower bound reaches its size; hold it while the drop stays above
        half of it (the hysteresis); nothing fires or resolves without a normal and enough recent answers."""
        if not reading.ready:
            return current
        for level, size in (("critical", self.config.critical_drop), ("warning", self.config.min_drop)):
            if size is None:
                continue
            if reading.lower >= size:
                return level  # type: ignore[return-value]
            held = current == level or (current == "critical" and level == "warning")
            if held and reading.peak_drop > size / 2:
                return level  # type: ignore[return-value]
        return "ok"

    # -- holding the normal -----------------------------------------------------------------------------
    def hold(self, reading: DropReading, firing: bool, now: datetime) -> bool:
        """Hold the normal while a drop is suspected or firing; True when it was held so long that the
        route's current level must become its normal (`relearn` next)."""
        suspected = reading.ready and reading.whole_drop >= self.config.min_drop
        if not (firing or suspected):
            self._changed |= self.state.held_since is not None
            self.state.held_since = None
            return False
        if self.state.held_since is None:
            self.state.held_since, self._changed = now, True
        limit = self.config.relearn_after_seconds
        return limit is not None and now - self.state.held_since >= timedelta(seconds=limit)

    def relearn(self) -> None:
        """The window's answers become the normal; the floor starts again."""
        self._normal, self._recent, self._floor = self._recent, [], []
        self._normal_total, self._recent_total = self._recent_total, empty_sums()
        self._best = None
        self.state.held_since = None

    # -- state ------------------------------------------------------------------------------------------
    def take_changed(self) -> bool:
        """Whether the state moved on its own (time passing) since the last call; records and
        notifications mark it changed where they are handled."""
        changed, self._changed = self._changed, False
        return changed

    def to_state(self, pending: Iterable[Key]) -> DropState:
        """`state` with the buckets as they are now (the value persisted in `AlertState.drop`); `pending`:
        the answers waiting in the rule's window, not counted yet."""
        state = self.state
        state.recent = [self._dump(b) for b in self._recent]
        state.normal = [self._dump(b) for b in self._normal]
        state.floor = [Snapshot(taken_at=at, moments=Moments.of(s)) for at, s in self._floor]
        state.counted_until = self._newest
        state.pending = [_digest(key) for key in pending]
        return state

    @staticmethod
    def _dump(bucket: _Bucket) -> Bucket:
        return Bucket(first_at=bucket.first_at, last_at=bucket.last_at, moments=Moments.of(bucket.sums))
