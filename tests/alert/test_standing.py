"""Where each route stands at a stop: `tracescore alert`'s summary names the routes firing first (critical,
then warning), then those nearest to firing, each with its estimate against its rule, and says how many
more it left out."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import alert_records
from alert_records import T0, record

from tracescore.alert import AlertEvaluator, DropConfig, describe_routes
from tracescore.alert._standing import worst_first


def evaluator(**rule: Any) -> AlertEvaluator:
    return alert_records.evaluator(cooldown_seconds=0, no_data_seconds=None, **rule)


def feed(ev: AlertEvaluator, route: str, score: float, n: int = 10) -> None:
    for i in range(n):
        at = T0 + timedelta(seconds=i)
        key = ev.add(record(score, at, route=route))
        assert key is not None
        ev.evaluate(key, at)


def test_the_routes_firing_come_first_then_the_nearest_to_firing_and_the_rest_are_counted() -> None:
    ev = evaluator()
    levels = {"/fine": 0.99, "/near": 0.8, "/warn": 0.55, "/crit": 0.1}
    for route, score in levels.items():
        feed(ev, route, score)
    for n in range(8):  # quiet routes far above the threshold
        feed(ev, f"/calm{n}", 1.0)
    shown, more = worst_first(ev.standings(T0 + timedelta(seconds=10)), 3)
    assert [(s.key.route, s.level) for s in shown] == [
        ("/crit", "critical"),
        ("/warn", "warning"),
        ("/near", "ok"),
    ]
    assert more == 9
    lines = describe_routes(shown, more)
    # As `tracescore alert` prints them, under its counts line.
    assert lines[0] == "  routes (12, worst first):" and lines[-1] == "    and 9 more"
    # Each with its estimate (value, bounds, what it came from) against the rule's thresholds.
    assert lines[1].startswith("    rag-api /crit faithfulness: critical: 0.10 ["), lines
    assert "10 offline + 0 LLM" in lines[1], lines
    assert lines[1].endswith("(thresholds: warning 0.70, critical 0.40)"), lines


def test_a_route_with_a_drop_rule_is_read_against_its_normal() -> None:
    drop = DropConfig(
        min_drop=0.1, window_count=200, min_samples=50, normal_count=1000, min_normal_samples=400
    )
    ev = evaluator(warning=None, critical=None, window_seconds=86_400, drop=drop)
    rng, at = random.Random(1), T0
    for share, n in ((0.9, 1500), (0.5, 300)):
        for _ in range(n):
            at += timedelta(minutes=1)
            key = ev.add(record(1.0 if rng.random() < share else 0.0, at))
            assert key is not None
            ev.evaluate(key, at)
    [standing] = ev.standings(at)
    assert standing.drop_level == "warning" and standing.severity[0] == 1
    said = standing.describe()
    assert said.startswith("rag-api /billing faithfulness: drop rule warning: "), said
    assert "against its normal 0.9" in said and said.endswith("alerts from 0.10)"), said
    learning = evaluator(warning=None, critical=None, drop=drop)
    feed(learning, "/new", 1.0)
    [new] = learning.standings(T0 + timedelta(seconds=10))
    learns = "drop rule learning its normal (0 of 400 answers, which join it as they leave its window of 200)"
    assert learns in new.describe()


def test_nothing_held_says_nothing() -> None:
    assert describe_routes(*worst_first(evaluator().standings(T0), 10)) == []
