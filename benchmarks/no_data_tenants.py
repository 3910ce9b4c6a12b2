"""No-data alerts on a platform of tenants: the fixed rule (every 30-minute silence pages, the default before
`no_data_mode`) against the default `unusual` mode, on the evaluator `tracescore alert` runs.

300 tenants, each its own route, Poisson arrivals; tenant n sends 1/(n+1) of the busiest one's answers (30,000
a day in all: ~4,800 down to ~16 a day), 5% unfaithful. Every tenant is healthy for the whole run but the
`--stop` ones, whose traffic goes to 0 at `--stop-at` hours. Ticked every `--tick` minutes as time passes.
Prints, per rule: TracescoreNoData notifications (firing + resolved) of the healthy tenants per day, and for
each stopped tenant how long after its last answer it was paged.

    PYTHONPATH=. nice -n 10 python benchmarks/no_data_tenants.py
"""

from __future__ import annotations

import argparse
import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from tracescore.alert import AlertConfig, AlertEvaluator, DropConfig, RuleConfig
from tracescore.model import EvaluationRecord, MetricStatus

START = datetime(2026, 11, 30, tzinfo=UTC)
NO_DATA = "TracescoreNoData"


def traffic(
    tenants: int, per_day: int, days: int, stop: list[int], stop_at: float, seed: int
) -> list[tuple[datetime, str, bool]]:
    rng = random.Random(seed)
    busiest = per_day / sum(1 / (n + 1) for n in range(tenants))
    end, halt = START + timedelta(days=days), START + timedelta(hours=stop_at)
    out = []
    for n in range(tenants):
        route, at = f"/tenant/{n:03d}", START
        until = halt if n in stop else end
        while (at := at + timedelta(days=rng.expovariate(busiest / (n + 1)))) < until:
            out.append((at, route, rng.random() >= 0.05))
    return sorted(out)


def run(
    config: AlertConfig, answers: list[tuple[datetime, str, bool]], days: int, tick_minutes: float
) -> tuple[Counter[int], dict[str, list[datetime]], dict[str, datetime]]:
    """(no-data notifications of each day, the no-data firings and the last answer of each route)."""
    evaluator, per_day = AlertEvaluator(config), Counter[int]()
    paged: dict[str, list[datetime]] = {}
    last: dict[str, datetime] = {}
    tick, step, stopped = START, timedelta(minutes=tick_minutes), START + timedelta(days=days)

    def take(at: datetime, notes: list) -> None:  # type: ignore[type-arg]
        for n in notes:
            if n.alertname != NO_DATA or n.repeat:
                continue
            per_day[(at - START).days] += 1
            if n.state == "firing":
                paged.setdefault(n.route, []).append(at)

    for at, route, faithful in [*answers, (stopped, "", True)]:
        while tick <= at:
            take(tick, evaluator.tick(tick))
            tick += step
        if not route:
            break
        last[route] = at
        record = EvaluationRecord(
            trace_id=uuid.uuid4().hex, span_id=uuid.uuid4().hex[:16], service_name="rag-platform",
            route=route, metric="faithfulness", score=float(faithful),
            label="faithful" if faithful else "hallucinated", status=MetricStatus.OK, judge="offline",
            timestamp=at,
        )  # fmt: skip
        if (key := evaluator.add(record)) is not None:
            take(at, evaluator.evaluate(key, at))
    return per_day, paged, last


def _hm(gap: timedelta) -> str:
    minutes = round(gap.total_seconds() / 60)
    return f"{minutes // 60} h {minutes % 60:02d} min"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=300)
    parser.add_argument("--per-day", type=int, default=30_000)
    parser.add_argument("--days", type=int, default=4)
    parser.add_argument("--stop", type=int, nargs="*", default=[0, 20, 150, 299], help="tenants that stop")
    parser.add_argument("--stop-at", type=float, default=60.0, help="hours from the start")
    parser.add_argument("--tick", type=float, default=1.0, help="minutes")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    answers = traffic(args.tenants, args.per_day, args.days, args.stop, args.stop_at, args.seed)
    counts = Counter(route for _, route, _ in answers)
    print(f"{len(answers)} answers of {args.tenants} tenants over {args.days} days; tick {args.tick:g} min")
    stopped = {f"/tenant/{n:03d}" for n in args.stop}
    rules = {
        "fixed (no_data_seconds: 1800, the earlier default)": RuleConfig(
            drop=DropConfig(), require_calibration=True, no_data_seconds=1800
        ),
        "unusual (the default now)": RuleConfig(drop=DropConfig(), require_calibration=True),
    }
    healthy = traffic(args.tenants, args.per_day, args.days, [], 0, args.seed)
    for name, rule in rules.items():
        # The healthy tenants' notifications: a run where no tenant stops, so all of them count.
        per_day, _, _ = run(AlertConfig(rules=[rule]), healthy, args.days, args.tick)
        _, paged, last = run(AlertConfig(rules=[rule]), answers, args.days, args.tick)
        days = " | ".join(f"day {d + 1}: {per_day[d]:,}" for d in range(args.days))
        print(f"{name}: no-data notifications of {args.tenants} healthy tenants: {days}")
        for route in sorted(stopped):
            per_day_of = counts[route] / (args.stop_at / 24)
            after = [at - last[route] for at in paged.get(route, []) if at >= last[route]]
            when = f"paged {_hm(after[0])} after its last answer" if after else "not paged"
            print(f"  {route} (~{per_day_of:,.0f} answers a day) stops at hour {args.stop_at:g}: {when}")


if __name__ == "__main__":
    main()
