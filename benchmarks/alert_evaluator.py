"""Cost of `tracescore alert`'s per-record work relative to reading the record it is given.

For each record the service parses the JSON (EvaluationRecord.model_validate_json) and then feeds the
evaluator (add + evaluate: windows, confidence bound, transitions). This prints both per-record times and
their ratio, for few routes and for a burst over many routes past `max_routes` (eviction on every record).

    python3 benchmarks/alert_evaluator.py
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from tracescore.alert import AlertConfig, AlertEvaluator, RuleConfig
from tracescore.emit import EvaluationRecord
from tracescore.score import MetricStatus

N = 20_000


def payloads(routes: int) -> list[bytes]:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        EvaluationRecord(
            trace_id=uuid.uuid4().hex,
            span_id=uuid.uuid4().hex[:16],
            service_name="bot",
            route=f"/r{i % routes}",
            metric="faithfulness",
            score=(i % 10) / 10,
            label=None,
            status=MetricStatus.OK,
            judge="offline",
            timestamp=t0 + timedelta(milliseconds=i),
        )
        .model_dump_json()
        .encode()
        for i in range(N)
    ]


def main() -> None:
    print(f"{'routes':>8} {'max_routes':>10} {'parse us':>9} {'evaluate us':>12} {'ratio':>6} {'evicted':>8}")
    for routes, max_routes in ((10, 10_000), (1_000, 10_000), (50_000, 10_000)):
        data = payloads(routes)
        start = time.perf_counter()
        records = [EvaluationRecord.model_validate_json(v) for v in data]
        parse = (time.perf_counter() - start) / N
        evaluator = AlertEvaluator(AlertConfig(rules=[RuleConfig(min_samples=10)], max_routes=max_routes))
        start = time.perf_counter()
        for record in records:
            key = evaluator.add(record)
            if key is not None:
                evaluator.evaluate(key, record.timestamp)
        evaluate = (time.perf_counter() - start) / N
        print(
            f"{routes:>8} {max_routes:>10} {parse * 1e6:>9.1f} {evaluate * 1e6:>12.1f} "
            f"{evaluate / parse:>6.2f} {evaluator.evicted:>8}"
        )


if __name__ == "__main__":
    main()
