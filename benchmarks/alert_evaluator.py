"""Cost of `tracescore alert`'s per-record work relative to reading the record it is given.

For each record the service parses the JSON (EvaluationRecord.model_validate_json) and then feeds the
evaluator (add + evaluate: windows, confidence bound, transitions). This prints both per-record times and
their ratio, for few routes and for a burst over many routes past `max_routes` (eviction on every record),
for a route with a 10% LLM baseline (the correction's pair memory full: 200 pairs), for a window of 500, and
for a rule with a drop part at its defaults (window 1,000, normal 7,000, as sums), and that rule on one route
(its 20,000 records fill the drop window and the normal, so the sustained-drop test runs on every answer),
and a small drop part on 300 routes of random scores whose normals a warm-up (not timed) filled: each route
at its own level, the sustained-drop test's threshold computed for each.

    python3 benchmarks/alert_evaluator.py

With `--ticks`, the cost of a tick instead, against an earlier tree in the same run: a day of many routes
(`--routes`, 1,000 and 10,000) under the rule run without a config with the fixed no-data rule of earlier
versions (`--no-data-seconds`, 1800: so the day has alerts to compare; 0: the rule as it is), mostly
quiet (route n sends 1/(n+1) of the busiest one's answers, `--per-day` in all, so most send a few a day),
each record fed as the service feeds it (`add`, then `evaluate`). The evaluator is ticked every 5 s
through `--stretches` stretches of `--stretch-minutes` spread over the day, and every 15 minutes between
them (an earlier tree evaluates every route on every tick: a whole day of 5-s ticks of 10,000 routes
would take it hours). Each tree runs in a process of its own (its tracescore first on its path),
alternately, route count by route count; printed: the CPU time of the stretches' ticks per tick, the
share of a core that is at one tick every 5 s, the ratio new/old, and a digest of every notification
sent all day (the same in both: the same alerts).

    python3 benchmarks/alert_evaluator.py --ticks [--routes 1000,10000] --against DIR
        # DIR: git -C <repo> archive <commit> tracescore | tar -x -C DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tracescore.alert import AlertConfig, AlertEvaluator, DropConfig, RuleConfig
from tracescore.model import EvaluationRecord, MetricStatus

N = 20_000
REPO = Path(__file__).resolve().parents[1]
TICK = timedelta(seconds=5)


def payloads(
    routes: int, baseline_every: int = 0, n: int = N, first: int = 0, scores: random.Random | None = None
) -> list[bytes]:
    """`n` records over `routes` routes, the first at index `first`; with `baseline_every`, every that many
    also an LLM baseline record (inclusion probability 0.1) pairing with the offline one; scores cycle
    through 0.0 .. 0.9, or are drawn from `scores`."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(first, first + n):
        offline = EvaluationRecord(
            trace_id=uuid.uuid4().hex,
            span_id=uuid.uuid4().hex[:16],
            service_name="bot",
            route=f"/r{i % routes}",
            metric="faithfulness",
            score=(i % 10) / 10 if scores is None else round(scores.random(), 3),
            label=None,
            status=MetricStatus.OK,
            judge="offline",
            timestamp=t0 + timedelta(milliseconds=i),
        )
        out.append(offline.model_dump_json().encode())
        if baseline_every and i % baseline_every == 0:
            update = {
                "score": 1.0,
                "judge": "openai:judge",
                "annotator_kind": "LLM",
                "selection": "baseline",
                "inclusion_probability": 0.1,
                "offline_score": offline.score,
            }
            llm = offline.model_copy(update=update)
            out.append(llm.model_dump_json().encode())
    return out


def main() -> None:
    print(
        f"{'routes':>8} {'max_routes':>10} {'baseline':>8} {'rule':>12} {'parse us':>9} {'evaluate us':>12} "
        f"{'ratio':>6} {'evicted':>8}"
    )
    rules = {
        "window 50": RuleConfig(min_samples=10),
        "window 500": RuleConfig(min_samples=10, window_count=500),
        "50 + drop": RuleConfig(min_samples=10, drop=DropConfig()),
    }
    for routes, max_routes, every, name in (  # (routes, max_routes, baseline 1/every, rule)
        (10, 10_000, 0, "window 50"),
        (1_000, 10_000, 0, "window 50"),
        (50_000, 10_000, 0, "window 50"),
        (10, 10_000, 10, "window 50"),
        (10, 10_000, 0, "window 500"),
        (10, 10_000, 0, "50 + drop"),
        (10, 10_000, 10, "50 + drop"),
        (1, 10_000, 0, "50 + drop"),
        (1, 10_000, 10, "50 + drop"),
    ):
        evaluator = AlertEvaluator(AlertConfig(rules=[rules[name]], max_routes=max_routes))
        measure(
            evaluator,
            payloads(routes, every),
            f"{routes:>8} {max_routes:>10} {f'1/{every}' if every else 'none':>8} {name:>12}",
        )
    many_levels()


def many_levels() -> None:
    """300 routes at their own levels, normals full: the sustained-drop test on every answer of each."""
    routes, warm = 300, 300 * 300
    small = DropConfig(window_count=100, min_samples=10, normal_count=200, min_normal_samples=100)
    evaluator = AlertEvaluator(AlertConfig(rules=[RuleConfig(min_samples=10, drop=small)], max_routes=10_000))
    scores = random.Random(7)
    feed(
        evaluator, [EvaluationRecord.model_validate_json(v) for v in payloads(routes, n=warm, scores=scores)]
    )
    measure(
        evaluator,
        payloads(routes, first=warm, scores=scores),
        f"{routes:>8} {10_000:>10} {'none':>8} {'small drop':>12}",
    )


def measure(evaluator: AlertEvaluator, data: list[bytes], row: str) -> None:
    """Parse `data`, then feed the evaluator; print `row` with both per-record times and their ratio."""
    start = time.perf_counter()
    records = [EvaluationRecord.model_validate_json(v) for v in data]
    parse = (time.perf_counter() - start) / len(data)
    start = time.perf_counter()
    feed(evaluator, records)
    evaluate = (time.perf_counter() - start) / len(data)
    print(
        f"{row} {parse * 1e6:>9.1f} {evaluate * 1e6:>12.1f} {evaluate / parse:>6.2f} {evaluator.evicted:>8}"
    )


def feed(evaluator: AlertEvaluator, records: list[EvaluationRecord]) -> None:
    for record in records:
        key = evaluator.add(record)
        if key is not None:
            evaluator.evaluate(key, record.timestamp)


def quiet_day(
    routes: int, per_day: int, stretches: int, stretch_minutes: float, no_data: float
) -> dict[str, Any]:
    """One tree's day (`--ticks`): the CPU time of the ticks in the stretches, and the day's notifications'
    digest."""
    rng = random.Random(11)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = start + timedelta(days=1)
    busiest = per_day / sum(1 / (n + 1) for n in range(routes))
    arrivals = []  # (time, route, faithful): Poisson per route
    for n in range(routes):
        at = start
        while (at := at + timedelta(days=rng.expovariate(busiest / (n + 1)))) < end:
            arrivals.append((at, n, rng.random() >= 0.05))
    arrivals.sort()
    # Ticks every 5 s through each stretch (centred in its share of the day), every 15 minutes between.
    share, length = timedelta(days=1) / stretches, timedelta(minutes=stretch_minutes)
    spans = [
        (start + share * (i + 0.5) - length / 2, start + share * (i + 0.5) + length / 2)
        for i in range(stretches)
    ]
    fixed = RuleConfig(drop=DropConfig(), require_calibration=True, no_data_seconds=no_data)
    evaluator = AlertEvaluator(AlertConfig(rules=[fixed]) if no_data else AlertConfig())
    digest, sent, timed, ticks = hashlib.sha256(), 0, 0.0, 0
    tick, i = start, 0
    while tick < end:
        while i < len(arrivals) and arrivals[i][0] <= tick:  # the records read before this tick
            at, n, faithful = arrivals[i]
            i += 1
            record = EvaluationRecord(
                trace_id=f"{rng.getrandbits(128):032x}", span_id=f"{rng.getrandbits(64):016x}",
                service_name="platform", route=f"/tenant/{n}", metric="faithfulness", score=float(faithful),
                label="faithful" if faithful else "hallucinated", status=MetricStatus.OK, judge="offline",
                timestamp=at,
            )  # fmt: skip
            key = evaluator.add(record)
            notes = [] if key is None else evaluator.evaluate(key, at)
            sent += len(notes)
            digest.update("".join(n.model_dump_json() for n in notes).encode())
        stretch = any(a <= tick < b for a, b in spans)
        started = time.process_time()
        notes = evaluator.tick(tick)
        if stretch:
            timed, ticks = timed + time.process_time() - started, ticks + 1
        sent += len(notes)
        digest.update("".join(n.model_dump_json() for n in notes).encode())
        following = [a for a, b in spans if a > tick]
        tick = tick + TICK if stretch else min([tick + timedelta(minutes=15), *following])
    return {"tick_cpu_s": timed, "ticks": ticks, "notifications": sent, "digest": digest.hexdigest()[:16]}


def ticks_main(args: argparse.Namespace) -> None:
    if args.child:
        day = quiet_day(args.child, args.per_day, args.stretches, args.stretch_minutes, args.no_data_seconds)
        print(json.dumps(day))
        return
    trees = {"new": REPO} if args.against is None else {"old": args.against.resolve(), "new": REPO}
    for routes in (int(r) for r in args.routes.split(",")):
        row: dict[str, Any] = {
            "routes": routes,
            "per_day": args.per_day,
            "no_data_seconds": args.no_data_seconds,
        }
        for name, tree in trees.items():
            command = [
                sys.executable,
                __file__,
                "--ticks",
                "--child",
                str(routes),
                "--per-day",
                str(args.per_day),
            ]
            command += ["--stretches", str(args.stretches), "--stretch-minutes", str(args.stretch_minutes)]
            command += ["--no-data-seconds", str(args.no_data_seconds)]
            env = {**os.environ, "PYTHONPATH": str(tree)}
            got = json.loads(
                subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
            )
            per_tick = got["tick_cpu_s"] / got["ticks"]
            row[f"{name}_ms_per_tick"] = round(per_tick * 1000, 3)
            row[f"{name}_core_share"] = round(per_tick / TICK.total_seconds(), 5)
            row[f"{name}_notifications"], row[f"{name}_digest"] = got["notifications"], got["digest"]
        if "old" in trees:
            row["ratio"] = round(row["new_ms_per_tick"] / row["old_ms_per_tick"], 4)
            row["same_notifications"] = row["old_digest"] == row["new_digest"]
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", action="store_true", help="a day of many mostly quiet routes, ticked")
    parser.add_argument("--routes", default="1000,10000")
    parser.add_argument("--per-day", type=int, default=100_000, help="answers a day, all routes together")
    parser.add_argument("--stretches", type=int, default=4)
    parser.add_argument("--stretch-minutes", type=float, default=5.0)
    parser.add_argument("--no-data-seconds", type=float, default=1800.0)
    parser.add_argument("--against", type=Path, default=None, help="an earlier tree (its tracescore/ inside)")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.ticks:
        ticks_main(parsed)
    else:
        main()
