"""A tick evaluates only the routes fed since their last evaluation and those due (alert/_schedule.py): on
random streams of many routes (bursts, silences, drops and recoveries, judge failures, late records, LLM
baseline pairs, conversations, evictions, restarts from the saved state, a streamed evaluator's stream
time) every notification, log line and saved state is the one of ticks that evaluate every route."""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from alert_records import T0, conversation, llm_record, record

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertKey,
    AlertState,
    DropConfig,
    JudgeHealthConfig,
    Notification,
    RuleConfig,
)
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus

Record = EvaluationRecord | ConversationRecord
HOURS = 14

_QUICK = {"cooldown_seconds": 300, "renotify_seconds": 1200, "hysteresis": 0.05, "confidence": 0.9}
_UNUSUAL = {"no_data_mode": "unusual", "no_data_seconds": 600, "no_data_rate_seconds": 1800}
_THRESHOLDS = [
    RuleConfig(
        routes=["/conv*"], signal="conversation_label", window_count=20, window_seconds=3600, min_samples=5,
        warning=0.7, critical=0.4, no_data_seconds=900, **_QUICK,
    ),
    RuleConfig(
        routes=["/fixed*"], signal="score", window_count=20, window_seconds=600, min_samples=5, warning=0.7,
        critical=0.4, no_data_seconds=600, **_QUICK,
    ),
    RuleConfig(
        signal="score", window_count=30, window_seconds=900, min_samples=5, warning=0.7, critical=0.4,
        no_data_min_answers=10, **_UNUSUAL, **_QUICK,
    ),
]  # fmt: skip
_SMALL_DROP = DropConfig(
    min_drop=0.1, critical_drop=0.3, confidence=0.99, window_count=40, min_samples=20, window_seconds=1800,
    normal_count=200, normal_seconds=2 * 3600, min_normal_samples=80, floor_seconds=4 * 3600,
    sustained_every=200, relearn_after_seconds=3 * 3600,
)  # fmt: skip
_DROPS = [
    RuleConfig(
        routes=["/cal*"], window_count=10, window_seconds=600, min_samples=5, warning=0.7,
        require_calibration=True, drop=_SMALL_DROP, **_UNUSUAL, **_QUICK,
    ),
    RuleConfig(
        warning=None, critical=None, window_count=10, window_seconds=600, drop=_SMALL_DROP, **_UNUSUAL,
        **_QUICK,
    ),
]  # fmt: skip
_JUDGE = JudgeHealthConfig(window_count=20, window_seconds=300, min_samples=5, max_error_rate=0.2)
CONFIGS = {
    "thresholds": AlertConfig(rules=_THRESHOLDS, judge_health=_JUDGE, max_routes=26),
    "drops": AlertConfig(rules=_DROPS, judge_health=_JUDGE),
    "all": AlertConfig(rules=[*_THRESHOLDS[:2], *_DROPS], judge_health=_JUDGE, max_routes=30),
}
ROUTES = ["/conv", "/fixed", "/cal", "/r"]  # prefixes: each rule's routes


@dataclass
class Tenant:
    """One route's traffic, moving between phases: steady, a burst, a silence, a drop, failing judges,
    gone for the rest of the run."""

    route: str
    partition: int
    base: float  # answers a minute
    rng: random.Random
    rate: float = 0.0
    bad: float = 0.05
    errors: float = 0.02
    until: datetime = T0
    seen: int = field(default=0)

    def phase(self, now: datetime) -> None:
        if now < self.until:
            return
        pick, rng = self.rng.random(), self.rng
        self.rate, self.bad, self.errors = self.base, 0.05, 0.02
        minutes = rng.uniform(30, 180)
        if pick < 0.1:
            self.rate, minutes = self.base * 10, rng.uniform(5, 20)
        elif pick < 0.25:
            self.rate, minutes = 0.0, rng.uniform(20, 300)
        elif pick < 0.4:
            self.bad = rng.choice([0.15, 0.2, 0.3, 0.6, 0.9])
        elif pick < 0.48:
            self.errors, minutes = 0.5, rng.uniform(10, 60)
        elif pick < 0.52:
            self.rate, minutes = 0.0, 10_000.0
        self.until = now + timedelta(minutes=minutes)

    def records(self, start: datetime, end: datetime) -> list[Record]:
        """Its records of (start, end]: Poisson arrivals, a few read late."""
        rng, out = self.rng, []
        n = _poisson(rng, self.rate * (end - start).total_seconds() / 60)
        for _ in range(n):
            at = start + (end - start) * rng.random() + timedelta(microseconds=1)
            if rng.random() < 0.03:
                at -= timedelta(minutes=rng.uniform(0, 20))
            out.extend(self._record(at))
        return out

    def _record(self, at: datetime) -> list[Record]:
        rng = self.rng
        self.seen += 1
        good = rng.random() >= self.bad
        if self.route.startswith("/conv"):
            flagged = 0 if good else rng.randint(1, 4)
            fields = {"route": self.route, "started_at": at - timedelta(minutes=5), "timestamp": at}
            return [conversation(self.seen, flagged, **fields)]
        if rng.random() < self.errors:
            reason = rng.choice(["judge timeout", "rate limited"])
            return [record(None, at, route=self.route, status=MetricStatus.ERROR, reason=reason)]
        score = rng.uniform(0.75, 1.0) if good else rng.uniform(0.0, 0.5)
        offline = record(score, at, route=self.route).model_copy(
            update={"label": "faithful" if good else "hallucinated"}
        )
        if rng.random() >= 0.15:
            return [offline]
        pi = rng.choice([0.1, 1.0])  # the baseline's uniform draw, or a certain pick
        later = at + timedelta(seconds=rng.uniform(0, 90))
        return [offline, llm_record(offline, min(1.0, score + rng.uniform(-0.1, 0.1)), "baseline", pi, later)]


def _poisson(rng: random.Random, mean: float) -> int:
    n, total = 0, rng.expovariate(1.0)
    while total < mean:
        n, total = n + 1, total + rng.expovariate(1.0)
    return n


def _shown(value: Any) -> Any:
    """Notifications, states and keys as plain values, to compare."""
    if isinstance(value, Notification | AlertState):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items()}
    if isinstance(value, AlertKey):
        return value
    if isinstance(value, list | tuple):
        return [_shown(v) for v in value]
    return value


class Twins:
    """The same calls on an evaluator whose ticks evaluate every route and on one whose ticks follow its
    schedule; each result, and each line they log, compared."""

    def __init__(self, config: AlertConfig, streamed: bool, caplog: pytest.LogCaptureFixture) -> None:
        self.full = AlertEvaluator(config, streamed=streamed)
        self.full._every_route = True
        self.fast = AlertEvaluator(config, streamed=streamed)
        self.caplog = caplog
        self.evaluations: Counter[str] = Counter()  # by ticks
        self.ticking = False
        self.notes: list[Notification] = []  # all the notifications said
        for name, ev in (("full", self.full), ("fast", self.fast)):
            ev.evaluate = self._counted(name, ev.evaluate)  # type: ignore[method-assign]

    def _counted(self, name: str, evaluate: Callable[..., Any]) -> Callable[..., Any]:
        def counted(key: AlertKey, now: datetime) -> list[Notification]:
            self.evaluations[name] += self.ticking
            return evaluate(key, now)

        return counted

    def tick(self, now: datetime, stream_ms: Callable[[int], int] | None) -> None:
        self.ticking = True
        self.same(lambda ev: ev.tick(now, stream_ms))
        self.ticking = False

    def same(self, call: Callable[[AlertEvaluator], Any]) -> Any:
        said, results = [], []
        for ev in (self.full, self.fast):
            before = len(self.caplog.records)
            results.append(call(ev))
            said.append((_shown(results[-1]), [r.getMessage() for r in self.caplog.records[before:]]))
        assert said[1] == said[0]
        if isinstance(results[1], list):
            self.notes += [n for n in results[1] if isinstance(n, Notification)]
        assert (self.fast.suppressed_by_cooldown, self.fast.evicted, len(self.fast)) == (
            self.full.suppressed_by_cooldown,
            self.full.evicted,
            len(self.full),
        )
        return results[0]


class Stream:
    """Hands out a streamed evaluator's stream time per partition: lagging the clock, now and then not known
    (0) or moved back."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.at: dict[int, int] = {}

    def move(self, now: datetime) -> Callable[[int], int]:
        for partition in range(3):
            pick = self.rng.random()
            lag = self.rng.uniform(0, 120)
            at = int((now.timestamp() - lag) * 1000)
            if pick < 0.02:
                at = 0
            elif pick < 0.03:
                at = max(0, self.at.get(partition, at) - self.rng.randint(1, 1800) * 1000)
            elif partition in self.at:
                at = max(at, self.at[partition])
            self.at[partition] = at or self.at.get(partition, 0)
        times = dict(self.at)
        return lambda partition: times.get(partition, 0)


def run(config: AlertConfig, seed: int, caplog: pytest.LogCaptureFixture, streamed: bool = False) -> Twins:
    """`HOURS` of traffic of 28 tenants, ticked at random intervals (1 s to 2 min), restarted twice."""
    rng = random.Random(seed)
    tenants = [
        Tenant(f"{ROUTES[i % 4]}-{i:02d}", i % 3, math.exp(rng.uniform(math.log(0.05), math.log(4))), rng)
        for i in range(28)
    ]
    twins, stream, now = Twins(config, streamed, caplog), Stream(rng), T0
    fed: list[tuple[Record, int]] = []
    keys: dict[AlertKey, int] = {}  # each route fed, and its partition
    end, restarts = T0 + timedelta(hours=HOURS), [T0 + timedelta(hours=HOURS * k / 3) for k in (1, 2)]
    while now < end:
        before, now = now, now + timedelta(seconds=rng.uniform(1, 120))
        batch = sorted(
            ((r, t.partition) for t in tenants for r in (t.phase(now), t.records(before, now))[1]),
            key=lambda pair: pair[0].timestamp if rng.random() < 0.9 else now,  # mostly in time order
        )
        for rec, partition in batch:
            fed.append((rec, partition))
            key = twins.same(lambda ev, r=rec, p=partition: ev.add(r, p))
            if key is not None:
                keys[key] = partition
            if key is not None and rng.random() < 0.8:  # as the service does; the others wait for a tick
                at = rec.timestamp if rng.random() < 0.5 else now
                twins.same(lambda ev, k=key, a=at: ev.evaluate(k, a))
        stream_ms = stream.move(now) if streamed else None
        twins.tick(now, stream_ms)
        twins.same(lambda ev: ev.take_changed_states())
        if rng.random() < 0.05:  # what a state topic deleted saves: every state held
            twins.same(lambda ev: ev.held_states())
        # Read between ticks (Alertmanager's re-sends, a look at a route), up to 10 minutes ahead.
        later = now + timedelta(seconds=rng.choice([0, rng.uniform(0, 600)]))
        if rng.random() < 0.05:
            twins.same(lambda ev, at=later: ev.firing(at))
        if rng.random() < 0.02 and keys:
            key = rng.choice(sorted(keys))
            twins.same(lambda ev, k=key, at=later: (ev.drop_status(k, at), ev.estimate(k, at)))
        if restarts and now >= restarts[0]:
            restarts.pop(0)
            twins = restart(twins, config, streamed, fed, keys, now)
    twins.same(lambda ev: [s.describe() for s in ev.standings(now)])
    twins.tick(now + timedelta(seconds=5), None)
    return twins


def restart(
    twins: Twins,
    config: AlertConfig,
    streamed: bool,
    fed: list[tuple[Record, int]],
    keys: dict[AlertKey, int],
    now: datetime,
) -> Twins:
    """Both from the states saved, their windows refilled by reading again the records of the longest
    window (replays), as `tracescore alert` restarts."""
    states = twins.same(lambda ev: ev.held_states())
    saved = {key: twins.full.state_of(key) for key in states}
    longest = max(r.window_seconds for r in [*config.rules, config.judge_health])
    again = Twins(config, streamed, twins.caplog)
    again.evaluations, again.notes = twins.evaluations, twins.notes
    for key, state in saved.items():
        again.same(lambda ev, k=key, s=state: ev.restore(k, s.model_copy(deep=True) if s else None))
    for rec, partition in fed:
        if rec.timestamp >= now - timedelta(seconds=longest):
            again.same(lambda ev, r=rec, p=partition: ev.add(r, p, replay=True))
    again.same(lambda ev: ev.adopt_restored(keys.get))
    return again


@pytest.mark.parametrize(
    ("name", "seed", "streamed"),
    [("thresholds", 1, False), ("drops", 2, False), ("all", 3, False), ("all", 4, True)],
)
def test_a_tick_of_the_routes_due_notifies_as_a_tick_of_every_route(
    name: str, seed: int, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.alert")
    twins = run(CONFIGS[name], seed, caplog, streamed)
    # What the streams made happen, so the comparison is not of two quiet runs.
    said = Counter(f"{n.alertname} {n.state}{' repeat' if n.repeat else ''}" for n in twins.notes)
    print(said, twins.evaluations)
    assert twins.evaluations["fast"] < 0.8 * twins.evaluations["full"], twins.evaluations
