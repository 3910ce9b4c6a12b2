"""Alert state per (service, route, metric): rolling windows, the statistical guard, hysteresis, cooldown,
re-notification, no-data and judge health. Pure logic on an injected clock; no Kafka, no HTTP.

`add` feeds a record's outcome into the windows (also while rebuilding state after a restart); `evaluate`
and `tick` compare the windows with the last notified state and return the notifications to send. Score
alerts fire and resolve on the window's `Estimate` (both judges, each interaction once: see _estimate.py).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from tracescore.alert._config import AlertConfig, RuleConfig
from tracescore.alert._conversations import conversation_observation, record_key
from tracescore.alert._estimate import Estimate, EstimateWindow
from tracescore.alert._notes import Level, State, judge_note, no_data_note, score_note
from tracescore.alert._notification import AlertKey, Notification
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus

__all__ = ["AlertEvaluator", "AlertState"]


class AlertState(BaseModel):
    """What the evaluator keeps of one key across restarts (the service saves it in the state topic, inside
    `RouteState`): what was last notified. A field added here with a default is read from older states as
    that default, so adding one needs no new schema version; removing or redefining one does."""

    level: Level = "ok"
    level_since: datetime | None = None
    notified_at: datetime | None = None
    resolved_at: datetime | None = None
    judge_firing: bool = False
    judge_since: datetime | None = None
    judge_notified_at: datetime | None = None
    no_data_firing: bool = False
    no_data_since: datetime | None = None
    last_seen: datetime | None = None


class _Route:
    __slots__ = ("judge", "partition", "rule", "scores", "state")

    def __init__(self, rule: RuleConfig, judge_window: int, partition: int, state: AlertState) -> None:
        self.rule = rule
        self.partition = partition
        self.scores = EstimateWindow(rule.window_count, rule.signal)
        # (time, judge failed, failure was a timeout)
        self.judge: deque[tuple[datetime, bool, bool]] = deque(maxlen=judge_window)
        self.state = state


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


class AlertEvaluator:
    def __init__(self, config: AlertConfig) -> None:
        self.config = config
        self._routes: OrderedDict[AlertKey, _Route] = OrderedDict()
        self._restored: dict[AlertKey, AlertState] = {}
        self._dirty: set[AlertKey] = set()
        self.evicted = 0
        self.unmatched = 0
        self.suppressed_by_cooldown = 0

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
            if seen is not None:
                route.scores.observe(seen)
        else:
            failed = record.status is MetricStatus.ERROR
            timed_out = failed and "timeout" in (record.reason or "").lower()
            _insert_in_time_order(route.judge, (at, failed, timed_out))
            route.scores.add(record)
        if route.state.last_seen is None or at > route.state.last_seen:
            route.state.last_seen = at
            self._dirty.add(key)
        self._routes.move_to_end(key)
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

    # -- output -----------------------------------------------------------------------------------------
    def evaluate(self, key: AlertKey, now: datetime) -> list[Notification]:
        route = self._routes.get(key)
        if route is None:
            return []
        out = self._no_data(key, route, now)
        out += self._scores(key, route, now)
        if self.config.judge_health.enabled and key.unit == "answer":  # a judge's health is its answers'
            out += self._judge(key, route, now)
        if out:
            self._dirty.add(key)
        return out

    def tick(self, now: datetime) -> list[Notification]:
        """Time-based conditions for every route: windows ageing out, quiet routes, re-notification."""
        return [n for key in list(self._routes) for n in self.evaluate(key, now)]

    def firing(self, now: datetime) -> list[Notification]:
        """Every alert currently firing (for sinks that must hear about them again, like Alertmanager)."""
        out = []
        for key, route in self._routes.items():
            state = route.state
            if state.level != "ok":
                out.append(self._score_note(key, route, "firing", state.level, now, repeat=True))
            if state.judge_firing:
                out.append(self._judge_note(key, route, "firing", now, repeat=True))
            if state.no_data_firing:
                out.append(self._no_data_note(key, route, "firing", now, repeat=True))
        return out

    def held_states(self) -> dict[AlertKey, AlertState]:
        """The state of every route held (the state topic was deleted: all are saved again)."""
        return {key: route.state for key, route in self._routes.items()}

    def take_changed_states(self) -> dict[AlertKey, AlertState | None]:
        """States changed since the last call (None: evicted), to write to the state topic."""
        changed = {k: (self._routes[k].state if k in self._routes else None) for k in self._dirty}
        self._dirty.clear()
        return changed

    def __len__(self) -> int:
        return len(self._routes)

    # -- internals --------------------------------------------------------------------------------------
    def _route(self, key: AlertKey, partition: int) -> _Route | None:
        route = self._routes.get(key)
        if route is not None:
            route.partition = partition
            return route
        rule = self.config.rule_for(*key)
        if rule is None:
            return None
        state = self._restored.pop(key, None) or AlertState()
        route = self._routes[key] = _Route(rule, self.config.judge_health.window_count, partition, state)
        if len(self._routes) > self.config.max_routes:
            self._evict()
        return route

    def _evict(self) -> None:
        # The least recently fed route that is not firing; a firing one only if every route fires.
        victim = next(
            (k for k, r in self._routes.items() if r.state.level == "ok" and not r.state.judge_firing),
            next(iter(self._routes)),
        )
        del self._routes[victim]
        self._restored.pop(victim, None)
        self._dirty.add(victim)
        self.evicted += 1

    def _no_data(self, key: AlertKey, route: _Route, now: datetime) -> list[Notification]:
        state, limit = route.state, route.rule.no_data_seconds
        if limit is None or state.last_seen is None:
            return []
        quiet = now - state.last_seen > timedelta(seconds=limit)
        if quiet and not state.no_data_firing:
            state.no_data_firing, state.no_data_since = True, now
            return [self._no_data_note(key, route, "firing", now)]
        if not quiet and state.no_data_firing:
            note = self._no_data_note(key, route, "resolved", now)
            state.no_data_firing = False
            return [note]
        return []

    def estimate(self, key: AlertKey, now: datetime) -> Estimate | None:
        """The route's current estimate (None: no scores in its window)."""
        route = self._routes.get(key)
        return None if route is None else self._window(route, now)

    def _window(self, route: _Route, now: datetime) -> Estimate | None:
        route.scores.prune(now - timedelta(seconds=route.rule.window_seconds))
        return route.scores.estimate(route.rule.confidence)

    def _scores(self, key: AlertKey, route: _Route, now: datetime) -> list[Notification]:
        rule, state = route.rule, route.state
        level = self._level(rule, state.level, self._window(route, now))
        cooling = state.resolved_at is not None and now - state.resolved_at < timedelta(
            seconds=rule.cooldown_seconds
        )
        if level != "ok" and state.level == "ok" and cooling:
            self.suppressed_by_cooldown += 1
            return []
        out: list[Notification] = []
        if level != state.level:
            if state.level != "ok":
                out.append(self._score_note(key, route, "resolved", state.level, now))
            state.level, state.level_since = level, now
            if level == "ok":
                state.resolved_at, state.notified_at = now, None
            else:
                out.append(self._score_note(key, route, "firing", level, now))
                state.notified_at = now
        elif level != "ok" and self._due(state.notified_at, rule.renotify_seconds, now):
            out.append(self._score_note(key, route, "firing", level, now, repeat=True))
            state.notified_at = now
        return out

    @staticmethod
    def _level(rule: RuleConfig, current: Level, estimate: Estimate | None) -> Level:
        if estimate is None or estimate.n < rule.min_samples:
            return current  # too little evidence to fire or to resolve
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
        while route.judge and route.judge[0][0] < horizon:
            route.judge.popleft()
        n = len(route.judge)
        if n < health.min_samples:
            return []
        rate = sum(failed for _, failed, _ in route.judge) / n
        if rate > health.max_error_rate and not state.judge_firing:
            state.judge_firing, state.judge_since, state.judge_notified_at = True, now, now
            return [self._judge_note(key, route, "firing", now)]
        if state.judge_firing and rate <= health.max_error_rate / 2:  # hysteresis: half the limit
            note = self._judge_note(key, route, "resolved", now)
            state.judge_firing = False
            return [note]
        if state.judge_firing and self._due(state.judge_notified_at, route.rule.renotify_seconds, now):
            state.judge_notified_at = now
            return [self._judge_note(key, route, "firing", now, repeat=True)]
        return []

    @staticmethod
    def _due(last: datetime | None, interval: float | None, now: datetime) -> bool:
        return interval is not None and last is not None and now - last >= timedelta(seconds=interval)

    def _score_note(
        self, key: AlertKey, route: _Route, state: State, level: Level, now: datetime, repeat: bool = False
    ) -> Notification:
        est = route.scores.estimate(route.rule.confidence)
        return score_note(key, route.rule, est, state, level, route.state.level_since or now, now, repeat)

    def _judge_note(
        self, key: AlertKey, route: _Route, state: State, now: datetime, repeat: bool = False
    ) -> Notification:
        limit, since = self.config.judge_health.max_error_rate, route.state.judge_since or now
        return judge_note(key, route.judge, limit, state, since, now, repeat)

    def _no_data_note(
        self, key: AlertKey, route: _Route, state: State, now: datetime, repeat: bool = False
    ) -> Notification:
        since = route.state.no_data_since or now
        return no_data_note(key, route.state.last_seen, state, since, now, repeat)
