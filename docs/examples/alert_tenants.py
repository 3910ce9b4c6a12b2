"""docs/alerting/index.md, "Many routes: a platform of tenants": two days of 300 tenants, each its own route,
fed to the evaluator `tracescore alert` runs, under the rule it runs without a config, under that rule with
the fixed no-data rule of earlier versions, and under docs/examples/alert_tenants.yaml. Traffic is uneven
(tenant n sends 1/(n+1) of the busiest one's answers: from about 4,800 a day to 16); every tenant is healthy
(5% unfaithful) but /tenant/150 (about 32 answers a day), four in five of whose answers are unfaithful from
6:00 on the second day (its documents index broke). It prints the alerts each would send on the second day
(the first, every route learns its rate and its normal): how many of each kind, and those of /tenant/150."""

import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    DropConfig,
    Notification,
    RuleConfig,
    load_alert_config,
)
from tracescore.model import EvaluationRecord, MetricStatus

TENANTS, PER_DAY, BAD = 300, 30_000, "/tenant/150"
start, day2 = datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
rng = random.Random(3)
busiest = PER_DAY / sum(1 / (n + 1) for n in range(TENANTS))
answers = []  # (time, route, faithful): each tenant's answers arrive at random (Poisson) over the day
for n in range(TENANTS):
    route, at = f"/tenant/{n:03d}", start
    while (at := at + timedelta(days=rng.expovariate(busiest / (n + 1)))) < day2 + timedelta(days=1):
        unfaithful = 0.8 if route == BAD and at >= day2 + timedelta(hours=6) else 0.05
        answers.append((at, route, rng.random() >= unfaithful))
answers.sort()


def alerts(config: AlertConfig) -> tuple[Counter[str], list[str]]:
    """What the evaluator sends on the second day (reminders left out), ticked every 15 minutes as time
    passes: how many of each alert and state, and the lines of the broken tenant's."""
    evaluator, sent, broken, tick = AlertEvaluator(config), Counter[str](), [], start

    def take(notifications: list[Notification]) -> None:
        for n in (n for n in notifications if not n.repeat and (n.ends_at or n.starts_at) >= day2):
            sent[f"{n.alertname} {n.state}"] += 1
            broken.extend(
                [f"{n.ends_at or n.starts_at:%H:%M} [{n.headline}] {n.summary}"] if n.route == BAD else []
            )

    for at, route, faithful in answers:
        while tick <= at:
            take(evaluator.tick(tick))
            tick += timedelta(minutes=15)
        record = EvaluationRecord(
            trace_id=uuid.UUID(int=rng.getrandbits(128)).hex, span_id=f"{rng.getrandbits(64):016x}",
            service_name="rag-platform", route=route, metric="faithfulness", score=float(faithful),
            label="faithful" if faithful else "hallucinated", status=MetricStatus.OK, judge="offline",
            timestamp=at,
        )  # fmt: skip
        if (key := evaluator.add(record)) is not None:
            take(evaluator.evaluate(key, at))
    return sent, broken


print(f"{sum(at >= day2 for at, _, _ in answers)} answers of {TENANTS} tenants on the second day")
fixed = RuleConfig(drop=DropConfig(), require_calibration=True, no_data_seconds=1800)
for name, config in [
    ("the default rule (no config)", AlertConfig()),
    ("the default rule with no_data_seconds: 1800 (fixed)", AlertConfig(rules=[fixed])),
    ("docs/examples/alert_tenants.yaml", load_alert_config(Path(__file__).with_name("alert_tenants.yaml"))),
]:
    sent, broken = alerts(config)
    print(f"{name}: {sum(sent.values())} notifications")
    for what, count in sorted(sent.items()):
        print(f"  {what}: {count}")
    print(f"  of {BAD}: {len(broken)}", *(f"    {line}" for line in broken[:4]), sep="\n")
