"""docs/alerting/index.md: what `tracescore alert` says of its routes when it stops (its stop summary, below
the counts line), for twelve routes of one service: /billing fell below its own normal (a drop rule),
/search answers unfaithfully (the threshold rule), ten more are well. The records are fed to the evaluator
the service runs, and the lines printed are the ones it prints at its stop."""

import random
import uuid
from datetime import UTC, datetime, timedelta

from tracescore.alert import AlertConfig, AlertEvaluator, stop_summary
from tracescore.model import EvaluationRecord, MetricStatus

config = AlertConfig.model_validate(
    {
        "rules": [
            {  # /billing: against its own normal only
                "routes": ["/billing"],
                "warning": None,
                "critical": None,
                "drop": {"min_drop": 0.1, "window_count": 200, "min_samples": 50, "normal_count": 1000,
                         "min_normal_samples": 400},
            },
            {"warning": 0.7, "critical": 0.4},  # any other route: thresholds on its share of faithful answers
        ]
    }
)  # fmt: skip
evaluator = AlertEvaluator(config)
rng = random.Random(7)
now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def answer(route: str, faithful: bool, at: datetime) -> None:
    record = EvaluationRecord(
        trace_id=uuid.UUID(int=rng.getrandbits(128)).hex,
        span_id=uuid.UUID(int=rng.getrandbits(128)).hex[:16],
        service_name="rag-api",
        route=route,
        metric="faithfulness",
        score=1.0 if faithful else 0.0,
        label="faithful" if faithful else "hallucinated",
        status=MetricStatus.OK,
        judge="offline",
        timestamp=at,
    )
    key = evaluator.add(record)
    if key is not None:
        evaluator.evaluate(key, at)


# /billing: a day and more at 90% faithful, then its last 300 answers at 50%, one a minute.
for n, share in enumerate([0.9] * 1500 + [0.5] * 300):
    answer("/billing", rng.random() < share, now - timedelta(minutes=1800 - n))
# The other routes: their last 40 answers, within the threshold rule's 15-minute window.
for route, share in [("/search", 0.1), *((f"/docs/{n}", 0.97) for n in range(10))]:
    for n in range(40):
        answer(route, rng.random() < share, now - timedelta(seconds=600 - 15 * n))

print("\n".join(stop_summary(evaluator.standings(now))))
