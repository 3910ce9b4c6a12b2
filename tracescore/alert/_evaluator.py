"""Alert state per (service, route, metric): rolling windows, the statistical guard, hysteresis, cooldown,
re-notification, no-data and judge health. Pure logic on an injected clock; no Kafka, no HTTP.

`add` feeds a record's outcome into the windows (also while rebuilding state after a restart); `evaluate`
and `tick` compare the windows with the last notified state and return the notifications to send. Threshold
alerts fire and resolve on the window's `Estimate` (both judges, each interaction once: see _estimate.py);
drop alerts on the route's window against its own normal (_drop.py). What must survive a restart is one
`AlertState` per key (`state_of`, `restore`, `take_changed_states`; its shape: _state.py).
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar, get_args

from tracescore.alert._config import AlertConfig, RuleConfig
from tracescore.alert._conversations import conversation_observation, record_key
from tracescore.alert._drop import DropReading, DropTracker
from tracescore.alert._estimate import C_N, R_N, Estimate
from tracescore.alert._notes import (
    State,
    drop_note,
    judge_note,
    no_data_note,
    score_note,
    span,
    unwatched_notes,
)
from tracescore.alert._notification import AlertKey, Notification
from tracescore.alert._schedule import Due, Schedule
from tracescore.alert._silence import Silence, armed, arrived, describe_rate, silence
from tracescore.alert._standing import Standing
from tracescore.alert._state import AlertState, Level, LevelState
from tracescore.alert._transitions import NoteOf, due, transition, when_due
from tracescore.alert._window import EstimateWindow
from tracescore.model import AnnotatorKind, ConversationRecord, EvaluationRecord, MetricStatus

__all__ = ["AlertEvaluator", "AlertState"]

_log = logging.getLogger("tracescore.alert")


class _Route:
    __slots__ = (
        "again", "drop", "evaluated_at", "judges", "order", "partition", "rule", "said_waiting", "scores",
        "silent", "state", "warned_learning",
    )  # fmt: skip

    def __init__(
        self, rule: RuleConfig, judge_window: int, partition: int, state: AlertState, order: int
    ) -> None:
        self.rule = rule
        self.partition = partition
        self.order = order  # its place among the routes held (least recently fed first): a tick's order
        self.silent: datetime | None = None  # read time from which its silence could page (`_no_data`)
        # Its last evaluation, and whether anything moved in it (evaluated again at the next tick then).
        self.evaluated_at: datetime | None = None
        self.again = False
        self.drop = None if rule.drop is None else DropTracker(rule.drop, state.drop)
        state.drop = None if self.drop is None else self.drop.state  # a rule without drop forgets the normal
        # An answer leaving the rule's window is counted by the drop rule, once.
        on_leave = None if self.drop is None else self.drop.count
        self.scores = EstimateWindow(rule.window_count, rule.signal, on_leave=on_leave)
        # (time, judge failed, failure was a timeout), a window per kind of judge: behind a 1% baseline the
        # offline judge's answers would fill one shared window, and a model judge down never paged.
        self.judges: dict[AnnotatorKind, deque[tuple[datetime, bool, bool]]] = {
            kind: deque(maxlen=judge_window) for kind in get_args(AnnotatorKind)
        }
        self.state = state
        self.warned_learning = False  # this run said its drop rule cannot arm: once a run
        self.said_waiting = False  # this run said its thresholds wait for calibration: once a run

    @property
    def judge(self) -> deque[tuple[datetime, bool, bool]]:
        """The window judge health reads: the model judge's where it has evaluations in it (its outage is
        the one that loses scores), else the offline judge's."""
        llm = self.judges["LLM"]
        return llm if llm else self.judges["CODE"]

    @property
    def quiet(self) -> bool:
        """Nothing firing: the route may be evicted first."""
        drop = self.drop is None or self.drop.state.level == "ok"
        return self.state.level == "ok" and not self.state.judge_firing and drop


_EARLY = timedelta(milliseconds=1)
_Timed = TypeVar("_Timed", bound=tuple[Any, ...])  # (time, ...)


def _insert_in_time_order(window: deque[_Timed], item: _Timed) -> None:
    """Add `item` (whose first field is its time) to a bounded window kept in time order.

    Records reach the evaluator in the order they were read, which after lag or a restart interleaves
    partitions: a window filled in arrival order could hold older scores while newer ones fell out. Kept in
    time order, the window is always the newest scores known; one older than a full window's oldest has no
    place in it."""
    if not window or item[0] >= window[-1][0]:
        window.append(item)  # the usual case: in order; a full deque drops its oldest
        return
    if len(window) == window.maxlen:
        if item[0] < window[0][0]:
            return
        window.popleft()
    window.insert(bisect.bisect_right(window, item[0], key=lambda entry: entry[0]), item)


def _watched(key: AlertKey, route: _Route) -> str:
    """What watches a route whose thresholds wait: its drop part, which pages only once it has learned the
    route's normal (the cold start), so a newcomer reading "watch it meanwhile" knows since when."""
    drop = route.rule.drop
    if drop is None or route.drop is None:
        return "nothing watches it"
    if route.drop.state.learned_at is not None:
        return "drop alerts watch it meanwhile"
    # An answer joins the normal once it has left the drop window (the rule's own window is part of it).
    first = drop.window_count + drop.min_normal_samples
    learned = f"once its normal is learned (after {first:,} {key.unit}s at the earliest)"
    return f"drop alerts watch it meanwhile, {learned}"


def _arming(rule: RuleConfig) -> timedelta:
    """The longest a drop rule takes to arm on a route with `min_normal_samples` answers per
    `normal_seconds`: its answers wait in the rule's window, then the drop rule's, then join the normal."""
    drop = rule.drop
    assert drop is not None
    return timedelta(seconds=rule.window_seconds + drop.window_seconds + drop.normal_seconds)


class AlertEvaluator:
    def __init__(self, config: AlertConfig, *, log_note: str = "", streamed: bool = False) -> None:
        self.config = config
        # `streamed` (the alert service): a route is quiet only against its partition's stream time (how far
        # every record that reached the input is read, given to `tick`), not the clock, so a start on a
        # backlog does not take the old records it reads first for a route gone quiet.
        self._stream_at: dict[int, datetime] | None = {} if streamed else None
        # Ends the lines it logs itself (a consumer's own hint says whose they are, as its sink's lines do).
        self._log_note = log_note
        self._routes: OrderedDict[AlertKey, _Route] = OrderedDict()
        self._restored: dict[AlertKey, AlertState] = {}
        self._dirty: set[AlertKey] = set()
        self.evicted = 0
        self.unmatched = 0
        # Alerts a changed config no longer watches (restored firing): ended, saying so, at the next tick.
        self._unwatched: list[Callable[[datetime], list[Notification]]] = []
        self.suppressed_by_cooldown = 0
        # A tick evaluates the routes fed since their last evaluation and those due (_schedule.py), in the
        # order of `_routes`; `_every_route` (tests) evaluates all, as before the schedule.
        self._schedule = Schedule(self._due_of)
        self._orders = itertools.count()
        self._latest: datetime | None = None  # the latest time evaluated at: a tick before it is a full one
        self._every_route = False
        self._watched: set[int] | None = None  # partitions of the routes with a no-data alert (None: stale)

    # -- input ------------------------------------------------------------------------------------------
    def restore(self, key: AlertKey, state: AlertState | None) -> None:
        """The last notified state of `key` from the state topic (None: a tombstone). A route held in memory
        keeps its own, newer state."""
        if key in self._routes:
            return
        if state is None:
            self._restored.pop(key, None)
        else:
            self._restored[key] = state

    def add(
        self, record: EvaluationRecord | ConversationRecord, partition: int = 0, *, replay: bool = False
    ) -> AlertKey | None:
        """Feed one record (of an answer, or of a conversation); returns its key, or None when no rule covers
        it (counted). `replay`: read again after a restart to refill the windows; its effect on the saved
        `AlertState` is already there (a summary kept in the state must not count it twice)."""
        key = record_key(record)
        route = self._route(key, partition)
        if route is None:
            self.unmatched += 1
            return None
        at = record.timestamp
        if isinstance(record, ConversationRecord):
            seen = conversation_observation(record, route.rule.signal)
            item = None if seen is None else route.scores.observe(seen)
        else:
            failed = record.status is MetricStatus.ERROR
            timed_out = failed and "timeout" in (record.reason or "").lower()
            _insert_in_time_order(route.judges[record.annotator_kind], (at, failed, timed_out))
            item = route.scores.add(record)
        if route.drop is not None:
            self._dirty.add(key)  # its sums changed
            route.drop.saw(at)
            if item is not None and route.drop.seen(item):
                route.scores.mark_counted(item)
        if not replay:  # a record read again after a restart is in the saved rate already
            arrived(route.state, at, route.rule.no_data_rate_seconds)
            self._dirty.add(key)
        if route.state.last_seen is None or at > route.state.last_seen:
            route.state.last_seen = at
            self._dirty.add(key)
        self._routes.move_to_end(key)
        route.order = next(self._orders)
        self._schedule.feed(key)
        return key

    def adopt_restored(self, partition_of: Callable[[AlertKey], int | None]) -> None:
        """Hold in memory the restored routes this instance owns (`partition_of` gives the partition of a key
        it owns, else None), so a route that stayed quiet since the restart still gets its no-data alert
        and its firing alerts are still re-sent."""
        for key in list(self._restored):
            partition = partition_of(key)
            if partition is not None and key not in self._routes:
                self._route(key, partition)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        """Partitions now owned by another instance: their routes are its business."""
        gone = set(partitions)
        for key in [k for k, r in self._routes.items() if r.partition in gone]:
            del self._routes[key]
            self._schedule.forget(key)
        self._watched = None

    # -- output -----------------------------------------------------------------------------------------
    def evaluate(self, key: AlertKey, now: datetime) -> list[Notification]:
        route = self._routes.get(key)
        if route is None:
            return []
        suppressed, moved = self.suppressed_by_cooldown, False
        out = self._no_data(key, route, now)
        if route.rule.warning is not None or route.state.level != "ok":  # a removed threshold resolves
            out += self._scores(key, route, now)
        if route.drop is not None:
            out += self._drop(key, route, now)
            if route.drop.take_changed():  # buckets moved, the normal held or let go
                self._dirty.add(key)
                moved = True
        if self.config.judge_health.enabled and key.unit == "answer":  # a judge's health is its answers'
            out += self._judge(key, route, now)
        if out:
            self._dirty.add(key)
        if self._latest is None or now > self._latest:
            self._latest = now
        # Anything that moved may move something more at the next tick (a drop that fired holds the normal, a
        # hold that ended learns what it withheld; a re-fire held by cooldown is counted each tick): due then.
        route.again = bool(out) or moved or self.suppressed_by_cooldown != suppressed
        route.evaluated_at = now
        self._schedule.evaluated(key)
        return out

    def tick(self, now: datetime, stream_ms: Callable[[int], int] | None = None) -> list[Notification]:
        """Time-based conditions: windows ageing out, quiet routes, re-notification; and the end of the alerts
        the config no longer watches. `stream_ms(partition)`: its stream time (ms; 0 while unknown), for a
        `streamed` evaluator. Evaluates the routes fed since their last evaluation and those due (_next_due):
        the others would say and change nothing."""
        # Due times assume time moves on: a tick before the latest evaluation evaluates every route.
        every = self._every_route or (self._latest is not None and now < self._latest)
        if self._stream_at is not None and stream_ms is not None:
            # Asked only where a rule has a no-data alert: reading the stream time costs broker calls.
            for partition in self._watched_partitions():
                if at_ms := stream_ms(partition):  # 0: not known (yet, or again after a restore)
                    at = datetime.fromtimestamp(at_ms / 1000, now.tzinfo)
                    before = self._stream_at.get(partition)
                    every |= before is None or at < before  # first known, or back: no due time foresaw it
                    self._stream_at[partition] = at
        unwatched, self._unwatched = self._unwatched, []
        ended = [n for end in unwatched for n in end(now)]
        if every:
            keys = list(self._routes)
        else:
            routes = self._routes
            taken = self._schedule.take(now, self._stream_at or {})
            keys = sorted((k for k in taken if k in routes), key=lambda k: routes[k].order)
        return ended + [n for key in keys for n in self.evaluate(key, now)]

    def _watched_partitions(self) -> set[int]:
        if self._watched is None:
            self._watched = {r.partition for r in self._routes.values() if r.rule.no_data_seconds is not None}
        return self._watched

    def _due_of(self, key: AlertKey) -> Due | None:
        """The route's due times (_schedule.py) as its last evaluation left it (None: not held)."""
        route = self._routes.get(key)
        if route is None or route.evaluated_at is None:
            return None
        return (route.evaluated_at, None) if route.again else self._next_due(key, route, route.evaluated_at)

    def _next_due(self, key: AlertKey, route: _Route, now: datetime) -> Due:
        """After an evaluation that moved nothing: the earliest time evaluating the route again could say or
        change anything with no new answer (None: never), and for a streamed evaluator's no-data part, the
        stream time of the route's partition at which it could. Earlier is safe (one evaluation more),
        later is not: each mirrors a time condition of `evaluate`."""
        rule, state, health = route.rule, route.state, self.config.judge_health
        dues = []
        silent, read_due = route.silent, None
        if silent is not None and self._stream_at is not None:
            read_due = (route.partition, silent)  # the no-data part reads the stream time
        else:
            dues.append(silent)
        pruned = rule.warning is not None or state.level != "ok" or route.drop is not None  # `_window`
        if pruned and (oldest := route.scores.oldest()) is not None:  # leaves the window
            dues.append(oldest + timedelta(seconds=rule.window_seconds))
        if state.level != "ok":
            dues.append(when_due(state.notified_at, rule.renotify_seconds))
        if route.drop is not None:
            levels = route.drop.state
            dues.append(route.drop.next_due(now))
            if levels.level != "ok":
                dues.append(when_due(levels.notified_at, rule.renotify_seconds))
            if levels.learning_since is not None and not route.warned_learning:  # `_learning` warns
                dues.append(levels.learning_since + _arming(rule))
        if health.enabled and key.unit == "answer":
            for window in route.judges.values():  # leaves a judge's window (`_judge`)
                if window:
                    dues.append(window[0][0] + timedelta(seconds=health.window_seconds))
            if state.judge_firing:
                dues.append(when_due(state.judge_notified_at, rule.renotify_seconds))
        return min((d for d in dues if d is not None), default=None), read_due

    def firing(self, now: datetime) -> list[Notification]:
        """Every alert currently firing (for sinks that must hear about them again, like Alertmanager)."""
        out = []
        for key, route in self._routes.items():
            state = route.state
            if state.level != "ok":
                out.append(self._score_note(key, route, "firing", state.level, now, repeat=True))
            if route.drop is not None and route.drop.state.level != "ok":
                reading = self._drop_reading(route, now)
                self._schedule.feed(key)  # read now: its buckets may have moved
                out.append(
                    self._drop_note(key, route, reading, now)("firing", route.drop.state.level, True, None)
                )
            if state.judge_firing:
                out.append(self._judge_note(key, route, "firing", now, repeat=True))
            if state.no_data_firing:
                out.append(self._no_data_note(key, route, "firing", now, repeat=True))
        return out

    def held_states(self) -> dict[AlertKey, AlertState]:
        """The state of every route held (the state topic was deleted: all are saved again)."""
        return {key: state for key in self._routes if (state := self._current_state(key)) is not None}

    def take_changed_states(self) -> dict[AlertKey, AlertState | None]:
        """States changed since the last call (None: evicted), to write to the state topic."""
        changed = {k: self._current_state(k) for k in self._dirty}
        self._dirty.clear()
        return changed

    def state_of(self, key: AlertKey) -> AlertState | None:
        """A copy of what `key` must keep across a restart (None: no such route here); `restore` takes it."""
        state = self._current_state(key)
        return None if state is None else state.model_copy(deep=True)

    def _current_state(self, key: AlertKey) -> AlertState | None:
        route = self._routes.get(key)
        if route is None:
            return None
        if route.drop is not None:
            route.state.drop = route.drop.to_state(route.scores.uncounted_keys())
        return route.state

    def drop_status(self, key: AlertKey, now: datetime) -> DropReading | None:
        """What the route's drop rule reads now (None: no drop rule): `status` says whether its normal is
        still being learned (no drop alert yet) or too few recent answers to judge."""
        route = self._routes.get(key)
        if route is None or route.drop is None:
            return None
        self._schedule.feed(key)  # read now: its window and buckets may have moved
        return self._drop_reading(route, now)

    def standings(self, now: datetime) -> list[Standing]:
        """Where every route held stands against its rule now (the summary at a stop)."""
        out = []
        for key, route in self._routes.items():
            self._schedule.feed(key)  # read now: its window and buckets may have moved
            drop, reading = route.drop, None if route.drop is None else self._drop_reading(route, now)
            level = None if drop is None else drop.state.level
            window = self._window(route, now)
            stuck = self._cannot_arm(route, now)
            out.append(Standing(key, route.rule, route.state.level, window, level, reading, stuck))
        return out

    def __len__(self) -> int:
        return len(self._routes)

    # -- internals --------------------------------------------------------------------------------------
    def _route(self, key: AlertKey, partition: int) -> _Route | None:
        route = self._routes.get(key)
        if route is not None:
            if route.partition != partition:
                route.partition, self._watched = partition, None
            return route
        rule = self.config.rule_for(*key)
        restored = self._restored.get(key)
        if rule is None:
            if restored is not None and restored.firing:
                # It fired when no rule stopped matching it: end it, and delete its state (a restart must
                # not end it again; a rule matching it later starts it anew).
                del self._restored[key]
                why = "no rule of the alert config matches the route any more"
                self._unwatched.append(lambda now: unwatched_notes(key, restored, why, now))
                self._dirty.add(key)
            return None
        if rule.drop is None and restored is not None and restored.drop_firing:
            why = "its rule has no drop part any more"  # the state forgets its normal (_Route)
            ended = restored.model_copy()
            self._unwatched.append(lambda now: unwatched_notes(key, ended, why, now, only="drop"))
            self._dirty.add(key)  # saved without it: a restart does not end it again
        if rule.no_data_seconds is None and restored is not None and restored.no_data_firing:
            # Else it fired for good (nothing resolves it) and was re-sent with every Alertmanager resend.
            why_quiet = "its rule has no no-data alert any more (no_data_seconds)"
            quiet = restored.model_copy()
            self._unwatched.append(lambda now: unwatched_notes(key, quiet, why_quiet, now, only="no_data"))
            restored.no_data_firing, restored.no_data_since = False, None
            self._dirty.add(key)
        state = self._restored.pop(key, None) or AlertState()
        window = self.config.judge_health.window_count
        route = self._routes[key] = _Route(rule, window, partition, state, next(self._orders))
        self._schedule.feed(key)
        self._watched = None
        if len(self._routes) > self.config.max_routes:
            self._evict()
        return route

    def _evict(self) -> None:
        # The least recently fed route that is not firing; a firing one only if every route fires.
        victim = next((k for k, r in self._routes.items() if r.quiet), next(iter(self._routes)))
        del self._routes[victim]
        self._schedule.forget(victim)
        self._watched = None
        self._restored.pop(victim, None)
        self._dirty.add(victim)
        self.evicted += 1

    def _no_data(self, key: AlertKey, route: _Route, now: datetime) -> list[Notification]:
        state, limit = route.state, route.rule.no_data_seconds
        route.silent = None
        if limit is None or state.last_seen is None:
            return []
        self._armed(key, route, now)
        read_up_to = now if self._stream_at is None else self._stream_at.get(route.partition)
        if read_up_to is None:  # how far its partition is read is not known yet: neither fire nor resolve
            return []
        found = silence(route.rule, state, read_up_to)
        if found.quiet and not state.no_data_firing:
            state.no_data_firing, state.no_data_since = True, now
            return [self._no_data_note(key, route, "firing", now, found=found)]
        if found.quiet is False and state.no_data_firing:
            note = self._no_data_note(key, route, "resolved", now)
            state.no_data_firing = False
            return [note]
        if not state.no_data_firing:  # a firing one resolves only on an answer (a tick sees time go back)
            after = timedelta(seconds=limit) if route.rule.no_data_mode == "fixed" else found.pages_after
            # `silence` compares seconds as floats: a millisecond early, whatever their rounding.
            route.silent = None if after is None else state.last_seen + after - _EARLY  # None: rate unknown
        return []

    def _armed(self, key: AlertKey, route: _Route, now: datetime) -> None:
        """Say once per route when its rate is known, so its silence may page from then on (unusual mode),
        and the silence that pages it at that rate."""
        if route.state.rate_known_at is not None or (known := armed(route.rule, route.state)) is None:
            return
        route.state.rate_known_at = now
        self._dirty.add(key)
        _log.info(
            "%s %s %s: rate known, %s%s",
            key.service, key.route, key.metric, describe_rate(known, key.unit), self._log_note,
        )  # fmt: skip

    def estimate(self, key: AlertKey, now: datetime) -> Estimate | None:
        """The route's current estimate (None: no scores in its window)."""
        route = self._routes.get(key)
        if route is None:
            return None
        self._schedule.feed(key)  # read now: its window may have moved
        return self._window(route, now)

    def _window(self, route: _Route, now: datetime) -> Estimate | None:
        route.scores.prune(now - timedelta(seconds=route.rule.window_seconds))
        return route.scores.estimate(route.rule.confidence)

    def _scores(self, key: AlertKey, route: _Route, now: datetime) -> list[Notification]:
        estimate = self._window(route, now)
        self._waiting(key, route, estimate)
        level = self._level(route.rule, route.state.level, estimate)

        def note(state: State, level: Level, repeat: bool, other: Level | None) -> Notification:
            return self._score_note(key, route, state, level, now, repeat, other)

        return self._transition(route.rule, route.state, level, now, note)

    def _transition(
        self, rule: RuleConfig, levels: LevelState, level: Level, now: datetime, note: NoteOf
    ) -> list[Notification]:
        out = transition(rule, levels, level, now, note)
        self.suppressed_by_cooldown += out is None
        return out or []

    def _waiting(self, key: AlertKey, route: _Route, estimate: Estimate | None) -> None:
        """Say once a run, per route, when its thresholds wait for the LLM judge's baseline, and when they
        read its estimate from then on."""
        rule = route.rule
        if estimate is None or estimate.n < rule.min_samples or not rule.require_calibration:
            return
        waiting = rule.waiting(estimate)
        if not route.said_waiting and waiting is not None:
            route.said_waiting = True
            _log.info(
                "%s %s %s: %s; %s%s",
                key.service, key.route, key.metric, waiting, _watched(key, route), self._log_note,
            )  # fmt: skip
        elif route.said_waiting and waiting is None:
            route.said_waiting = False
            _log.info(
                "%s %s %s: calibrated by the LLM judge's baseline (%d pairs); thresholds apply%s",
                key.service, key.route, key.metric, estimate.pairs, self._log_note,
            )  # fmt: skip

    @staticmethod
    def _level(rule: RuleConfig, current: Level, estimate: Estimate | None) -> Level:
        if estimate is None or estimate.n < rule.min_samples:
            return current  # too little evidence to fire or to resolve
        if rule.waiting(estimate) is not None:
            return current  # not calibrated by enough pairs: no evidence for or against a threshold
        mean, bound = estimate.value, estimate.upper
        for level, threshold in (("critical", rule.critical), ("warning", rule.warning)):
            if threshold is None:
                continue
            if bound < threshold:
                return level  # type: ignore[return-value]
            held = current == level or (current == "critical" and level == "warning")
            if held and mean < threshold + rule.hysteresis:
                return level  # type: ignore[return-value]
        return "ok"

    def _judge(self, key: AlertKey, route: _Route, now: datetime) -> list[Notification]:
        health, state = self.config.judge_health, route.state
        horizon = now - timedelta(seconds=health.window_seconds)
        for window in route.judges.values():
            while window and window[0][0] < horizon:
                window.popleft()
        judged = route.judge
        n = len(judged)
        if n < health.min_samples:
            return []
        rate = sum(failed for _, failed, _ in judged) / n
        if rate > health.max_error_rate and not state.judge_firing:
            state.judge_firing, state.judge_since, state.judge_notified_at = True, now, now
            return [self._judge_note(key, route, "firing", now)]
        if state.judge_firing and rate <= health.max_error_rate / 2:  # hysteresis: half the limit
            note = self._judge_note(key, route, "resolved", now)
            state.judge_firing = False
            return [note]
        if state.judge_firing and due(state.judge_notified_at, route.rule.renotify_seconds, now):
            state.judge_notified_at = now
            return [self._judge_note(key, route, "firing", now, repeat=True)]
        return []

    def _score_note(
        self,
        key: AlertKey,
        route: _Route,
        state: State,
        level: Level,
        now: datetime,
        repeat: bool = False,
        other: Level | None = None,
    ) -> Notification:
        est = route.scores.estimate(route.rule.confidence)
        since = route.state.level_since or now
        return score_note(key, route.rule, est, state, level, since, now, repeat, other)

    # -- drop rules -------------------------------------------------------------------------------------
    def _drop_reading(self, route: _Route, now: datetime) -> DropReading:
        tracker = route.drop
        assert tracker is not None
        route.scores.prune(now - timedelta(seconds=route.rule.window_seconds))  # leaving answers are counted
        stats = route.scores.pair_stats()
        live = route.scores.uncounted_sums()
        tracker.advance(now, round(live[C_N] + live[R_N]), 0.0 if stats is None else stats.plain)
        return tracker.read(live, stats)

    def _drop(self, key: AlertKey, route: _Route, now: datetime) -> list[Notification]:
        tracker, drop = route.drop, route.rule.drop
        assert tracker is not None and drop is not None
        reading = self._drop_reading(route, now)
        levels = tracker.state
        if levels.learned_at is None and reading.status != "learning":
            levels.learned_at = now
            _log.info(
                "%s %s %s: normal learned (%s over %d %ss); drop alerts armed%s",
                key.service, key.route, key.metric, reading.figures().normal, reading.normal_n, key.unit,
                self._log_note,
            )  # fmt: skip
        self._learning(key, route, reading, now)
        note = self._drop_note(key, route, reading, now)
        if tracker.hold(reading, levels.level != "ok", now):  # held too long: the level is the new normal
            since, out = levels.level_since or now, []
            if levels.level != "ok":
                out = [
                    drop_note(key, route.rule, reading, "resolved", levels.level, since, now, accepted=True)
                ]
            levels.level, levels.level_since, levels.resolved_at, levels.notified_at = "ok", now, now, None
            tracker.relearn()
            return out
        return self._transition(route.rule, levels, tracker.level(levels.level, reading), now, note)

    def _learning(self, key: AlertKey, route: _Route, reading: DropReading, now: datetime) -> None:
        """Say once a run when the drop rule cannot arm: still learning its normal after the longest a route
        with `min_normal_samples` answers per `normal_seconds` takes (an answer joins the normal once it
        has left the rule's and the drop rule's windows, and the normal keeps `normal_seconds` of them)."""
        drop, tracker = route.rule.drop, route.drop
        assert drop is not None and tracker is not None
        levels = tracker.state
        if reading.status != "learning":
            if levels.learning_since is not None:
                levels.learning_since, route.warned_learning = None, False
                self._dirty.add(key)
            return
        if levels.learning_since is None:
            levels.learning_since = now
            self._dirty.add(key)
        if route.warned_learning or not self._cannot_arm(route, now):
            return
        route.warned_learning = True
        units = f"{key.unit}s"
        _log.warning(
            "%s %s %s: drop rule still learning its normal after %s, with %d of the %d %s it needs "
            "(drop.min_normal_samples): the normal keeps %s of %s (drop.normal_seconds), and this route has "
            "fewer in that span, so its drop alerts never arm; lower drop.min_normal_samples or raise "
            "drop.normal_seconds%s",
            key.service, key.route, key.metric, span((now - levels.learning_since).total_seconds()),
            reading.normal_n, drop.min_normal_samples, units, span(drop.normal_seconds), units,
            self._log_note,
        )  # fmt: skip

    @staticmethod
    def _cannot_arm(route: _Route, now: datetime) -> bool:
        since = None if route.drop is None else route.drop.state.learning_since
        return since is not None and now - since > _arming(route.rule)

    def _drop_note(self, key: AlertKey, route: _Route, reading: DropReading, now: datetime) -> NoteOf:
        assert route.drop is not None
        levels = route.drop.state

        def note(state: State, level: Level, repeat: bool, other: Level | None) -> Notification:
            since = levels.level_since or now
            return drop_note(key, route.rule, reading, state, level, since, now, repeat, other)

        return note

    def _judge_note(
        self, key: AlertKey, route: _Route, state: State, now: datetime, repeat: bool = False
    ) -> Notification:
        limit, since = self.config.judge_health.max_error_rate, route.state.judge_since or now
        return judge_note(key, route.judge, limit, state, since, now, repeat)

    def _no_data_note(
        self,
        key: AlertKey,
        route: _Route,
        state: State,
        now: datetime,
        repeat: bool = False,
        found: Silence | None = None,
    ) -> Notification:
        since = route.state.no_data_since or now
        if found is None and state == "firing" and route.state.last_seen is not None:
            found = silence(route.rule, route.state, now) if route.rule.no_data_seconds else None
        why = None if found is None else found.why(key.unit)
        return no_data_note(key, route.state.last_seen, state, since, now, repeat, why)
