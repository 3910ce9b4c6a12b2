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
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from hashlib import blake2b

from tracescore.alert._config import DropConfig
from tracescore.alert._cusum import Sustained, answer_value
from tracescore.alert._estimate import (
    PairStats,
    Sums,
    add_sums,
    empty_sums,
    interactions,
)
from tracescore.alert._floor import Floor
from tracescore.alert._reading import LENGTHS, DropReader, DropReading
from tracescore.alert._state import Bucket, DropState, Level, Moments
from tracescore.alert._window import Key, WindowEntry, part_of, sums_of

__all__ = ["DropReading", "DropTracker"]

_BUCKETS = 8  # per window and per normal: how finely each slides
_MAX_BUCKETS = 12  # hard bound, whatever the records' times (state size)
_FLOOR_SLOTS = 4  # snapshots kept over floor_seconds
_SETTLED = 1000  # counted interactions remembered, so a late record of one replaces it in its bucket
_SUSPECTED = 0.25  # the sustained test's evidence (share of its threshold) from which the normal is held


@dataclass(slots=True)
class _Bucket:
    first_at: datetime
    last_at: datetime
    sums: Sums
    serial: int

    @property
    def n(self) -> int:
        return interactions(self.sums)


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


class _Settled:
    """The last `size` counted interactions (the oldest forgotten first), each as its key's 64-bit hash, its
    bucket's serial and its contribution's (code, value) (alert/_window.py `part_of`), in flat arrays that
    grow with the route up to `size`: no object per interaction. As a dict of keys to their sums it was
    most of a route's memory (~0.55 of 0.62 MB: a key, its two ids, a list of 11 floats); now 29 bytes an
    interaction (benchmarks/alert_memory.py).

    The hashes are found through an open-addressing table (linear probing, at most half full; a removal
    shifts its followers back, so no tombstones). Two keys of one hash would take a new answer for a late
    record of the other: a chance of about size / 2**64 per answer."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._hashes = array("q")
        self._serials = array("q")
        self._values = array("d")
        self._codes = array("B")
        self._next = 0  # once all `size` are taken: the oldest's slot, which the next new one takes
        self._kind = "H" if size < 1 << 16 else "q"  # per table index: slot + 1, 0 when free
        self._mask = 7
        self._table = array(self._kind, [0]) * (self._mask + 1)

    def __len__(self) -> int:
        return len(self._hashes)

    def _find(self, hashed: int) -> int:
        """The table index of `hashed`, or of the free place where it would go."""
        i, table, hashes = hashed & self._mask, self._table, self._hashes
        while (slot := table[i]) and hashes[slot - 1] != hashed:
            i = (i + 1) & self._mask
        return i

    def __contains__(self, key: Key) -> bool:
        return bool(self._table[self._find(hash(key))])

    def get(self, key: Key) -> tuple[int, int, float] | None:
        """(bucket serial, code, value) of a counted interaction, else None."""
        slot = self._table[self._find(hash(key))] - 1
        if slot < 0:
            return None
        return self._serials[slot], self._codes[slot], self._values[slot]

    def put(self, key: Key, serial: int, code: int, value: float) -> None:
        """Remember what an interaction added (a known one keeps its place in the order, as it was first
        counted); past `size`, the oldest is forgotten."""
        hashed = hash(key)
        i = self._find(hashed)
        slot = self._table[i] - 1
        if slot >= 0:
            self._serials[slot], self._codes[slot], self._values[slot] = serial, code, value
            return
        if len(self._hashes) < self._size:  # still growing
            slot = len(self._hashes)
            self._hashes.append(hashed)
            self._serials.append(serial)
            self._codes.append(code)
            self._values.append(value)
            if 2 * len(self._hashes) > len(self._table):
                self._rehash()
                i = self._find(hashed)
        else:  # the oldest's slot
            slot, self._next = self._next, (self._next + 1) % self._size
            self._remove(self._find(self._hashes[slot]))
            i = self._find(hashed)
            self._hashes[slot], self._serials[slot] = hashed, serial
            self._codes[slot], self._values[slot] = code, value
        self._table[i] = slot + 1

    def _rehash(self) -> None:
        self._mask = 2 * len(self._table) - 1
        self._table = array(self._kind, [0]) * (self._mask + 1)
        for slot, hashed in enumerate(self._hashes):
            self._table[self._find(hashed)] = slot + 1

    def _remove(self, i: int) -> None:
        """Free table index `i`, moving back the entries after it that could not take their own place."""
        table, hashes, mask = self._table, self._hashes, self._mask
        j = i
        while True:
            j = (j + 1) & mask
            slot = table[j]
            if not slot:
                break
            home = hashes[slot - 1] & mask
            if (i < j and (home <= i or home > j)) or (j < i and home <= i and home > j):
                table[i], i = slot, j  # its home is not in (i, j]: it may move to i
        table[i] = 0


class DropTracker:
    """One route's drop rule: its buckets, in memory; `state` is the persisted form (`to_state` refreshes
    it), whose level fields the evaluator's transitions update in place."""

    def __init__(self, config: DropConfig, state: DropState | None = None) -> None:
        self.config = config
        self.state = state or DropState()
        self._reader = DropReader(config)
        self._serials = itertools.count()
        self._recent = [self._load(b) for b in self.state.recent]
        self._normal = [self._load(b) for b in self.state.normal]
        self._withheld = None if self.state.withheld is None else self._load(self.state.withheld)
        self._floor = Floor(config, self.state.floor)
        self._recent_total, self._normal_total = _total(self._recent), _total(self._normal)
        # After a restart: what was seen before it is counted, but for the answers then waiting (`pending`).
        self._restored_until = self.state.counted_until
        self._restored_pending = set(self.state.pending)
        self._newest = self.state.counted_until
        # key -> (bucket serial, what it added): a late record of a counted interaction replaces it.
        self._settled = _Settled(_SETTLED)
        self._recent_size = math.ceil(config.window_count / _BUCKETS)
        self._normal_size = math.ceil(config.normal_count / _BUCKETS)
        self._recent_span = timedelta(seconds=config.window_seconds / _BUCKETS)
        self._normal_span = timedelta(seconds=config.normal_seconds / _BUCKETS)
        self._changed = False  # since take_changed: what the state holds moved
        self._sustained: Sustained | None = None
        if config.sustained_every is not None:
            size = config.sustained_drop or config.min_drop
            self._sustained = Sustained(size, config.sustained_every, self.state)
        else:  # switched off: its evidence is forgotten
            self.state.cusum, self.state.cusum_recovery = 0.0, 0.0
            self.state.cusum_drop = self.state.cusum_run = None

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
        code, value = part_of(item)
        part = sums_of(code, value)
        known = self._settled.get(key)
        if known is not None:  # a later record of an answer counted already
            if item.stray:
                self.state.late += 1  # older than the window: whatever it says was superseded
                return
            serial, first = known[0], sums_of(known[1], known[2])
            withheld = [] if self._withheld is None else [self._withheld]
            buckets = (*self._recent, *self._normal, *withheld)
            bucket = next((b for b in buckets if b.serial == serial), None)
            if bucket is None:
                self.state.late += 1
                return
            total = self._recent_total if any(b is bucket for b in self._recent) else self._normal_total
            if bucket is self._withheld:
                total = empty_sums()  # in no total until it is learned
            for sums in (bucket.sums, total):  # it replaces its first count
                add_sums(sums, first, -1.0)
                add_sums(sums, part)
            self._settled.put(key, bucket.serial, code, value)
            self._weigh(first, -1.0)
            self._weigh(part)
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
        self._settled.put(key, bucket.serial, code, value)
        self._weigh(part)

    def _weigh(self, part: Sums, sign: float = 1.0) -> None:
        """The answer's evidence into the sustained-drop test, once the normal is learned."""
        if self._sustained is None or interactions(self._normal_total) < self.config.min_normal_samples:
            return
        if self.state.level != "ok" and not self._sustained.alarm:
            self._sustained.reset()  # the window test pages this drop: weighed again from its resolve on
            return
        # On the judges' own values, the normal's alike: the baseline's correction is a constant that
        # cancels out of their comparison (added to each answer it would push values out of 0..1).
        value = answer_value(part, 0.0)
        if value is not None:
            self._sustained.add(value, part, self._normal_total, 0.0, sign)

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
        recent_n = interactions(self._recent_total)
        horizon = now - timedelta(seconds=config.window_seconds)
        moved = False
        if not held and self._withheld is not None:  # the suspicion cleared without a page: learned after all
            self._into_normal(self._withheld, now, correction)
            self._withheld, moved = None, True
        while self._recent:
            oldest = self._recent[0]
            if recent_n - oldest.n + live_n < config.window_count and oldest.last_at >= horizon:
                break
            self._recent.pop(0)
            recent_n -= oldest.n
            moved = True
            if not held:
                self._into_normal(oldest, now, correction)
            elif self.state.level == "ok":  # suspected: withheld until the suspicion clears or pages
                self._withhold(oldest)
            # firing: not learned
        if not held:
            normal_n = interactions(self._normal_total) if not moved else sum(b.n for b in self._normal)
            horizon = now - timedelta(seconds=config.normal_seconds)
            while self._normal and (
                normal_n - self._normal[0].n >= config.normal_count or self._normal[0].last_at < horizon
            ):
                normal_n -= self._normal.pop(0).n
                moved = True
            self._floor.forget(now)
        if moved:  # exact again: sums of whole buckets
            self._recent_total, self._normal_total = _total(self._recent), _total(self._normal)
            self._changed = True

    def next_due(self, now: datetime) -> datetime | None:
        """The earliest time `advance` or `hold` could move anything with no new answer and no change of level
        (None: never, as things stand; `now`: at the next call, which learns what a hold just ended
        withheld). Earlier is safe, later is not: it mirrors their time conditions."""
        state, config = self.state, self.config
        held = state.held_since is not None
        if not held and self._withheld is not None:
            return now
        dues = []
        if self._recent:  # leaves the window once older than window_seconds
            dues.append(self._recent[0].last_at + timedelta(seconds=config.window_seconds))
        if state.held_since is not None:  # the suspicion spent, or the normal given up on
            dues.append(state.held_since + timedelta(seconds=config.normal_seconds))
            if config.relearn_after_seconds is not None:
                dues.append(state.held_since + timedelta(seconds=config.relearn_after_seconds))
        else:  # the normal and the floor forget their oldest only while not held
            if self._normal:
                dues.append(self._normal[0].last_at + timedelta(seconds=config.normal_seconds))
            if (forget := self._floor.next_due()) is not None:
                dues.append(forget)
        return min(dues, default=None)

    def _withhold(self, bucket: _Bucket) -> None:
        """Keep a leaving bucket out of the normal while a drop is suspected. Discarding it instead would bias
        the normal up: a normal that reads high by chance makes the window look low, so it would stop
        learning exactly when it most needs the route's answers."""
        if self._withheld is None:
            self._withheld = bucket
            return
        add_sums(self._withheld.sums, bucket.sums)
        self._withheld.first_at = min(self._withheld.first_at, bucket.first_at)
        self._withheld.last_at = max(self._withheld.last_at, bucket.last_at)

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
            self._floor.offer(now, _total(self._normal[:-1]), correction)

    # -- reading ----------------------------------------------------------------------------------------
    def read(self, live: Sums, stats: PairStats | None) -> DropReading:
        """The window (the rule's window's uncounted interactions, `live`, and the drop window's buckets)
        against the normal or the floor, and the sustained-drop test (alert/_reading.py)."""
        return self._reader.read(self._lengths(live), self._normal_total, self._floor, self._sustained, stats)

    def _lengths(self, live: Sums) -> list[Sums]:
        """The window's newest 1/8, 1/4, 1/2 (whole buckets, the rule's window included) and all of it."""
        out, window = [], list(live)
        for taken, bucket in enumerate(reversed(self._recent[-LENGTHS[-1] :]), 1):
            add_sums(window, bucket.sums)
            if taken in LENGTHS:
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
        return "warning" if reading.alarm else "ok"  # the sustained test pages and holds a warning

    # -- holding the normal -----------------------------------------------------------------------------
    def hold(self, reading: DropReading, firing: bool, now: datetime) -> bool:
        """Hold the normal while a drop is suspected or firing; True when it was held so long that the
        route's current level must become its normal (`relearn` next).

        A suspicion that pages nothing holds the normal until it has withheld as many answers as the normal
        holds (or for `normal_seconds`): then it is taken for noise, what it withheld is learned, and it
        holds again only once it has cleared. A hold without end would keep a normal that reads high by
        chance (a young one above all) from ever learning the answers that correct it."""
        state, config = self.state, self.config
        held = state.held_since is not None
        suspected = reading.ready and (
            reading.whole_drop >= config.min_drop
            or reading.alarm
            or reading.evidence >= _SUSPECTED
            or (held and reading.evidence > 0)  # once held, until the sustained test's run ends
        )
        spent = state.suspicion_spent
        if firing or not suspected:
            state.suspicion_spent = False
        elif state.held_since is not None and not spent:
            withheld = 0 if self._withheld is None else self._withheld.n
            long = now - state.held_since >= timedelta(seconds=config.normal_seconds)
            state.suspicion_spent = long or withheld >= interactions(self._normal_total)
        self._changed |= spent != state.suspicion_spent
        if not (firing or (suspected and not state.suspicion_spent)):
            self._changed |= state.held_since is not None
            state.held_since = None
            return False
        if firing and self._withheld is not None:  # what was withheld was the drop's start: never learned
            self._withheld, self._changed = None, True
        if state.held_since is None:
            state.held_since, self._changed = now, True
        limit = config.relearn_after_seconds
        return limit is not None and now - state.held_since >= timedelta(seconds=limit)

    def relearn(self) -> None:
        """The window's answers become the normal; the floor starts again."""
        self._normal, self._recent = self._recent, []
        self._floor.clear()
        self._normal_total, self._recent_total = self._recent_total, empty_sums()
        self._withheld = None
        self.state.held_since = None
        if self._sustained is not None:
            self._sustained.reset()

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
        state.withheld = None if self._withheld is None else self._dump(self._withheld)
        state.floor = self._floor.dump()
        state.counted_until = self._newest
        state.pending = [_digest(key) for key in pending]
        if self._sustained is not None:
            self._sustained.dump()
        return state

    @staticmethod
    def _dump(bucket: _Bucket) -> Bucket:
        return Bucket(first_at=bucket.first_at, last_at=bucket.last_at, moments=Moments.of(bucket.sums))
