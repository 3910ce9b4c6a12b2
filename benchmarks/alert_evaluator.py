"""Cost of `tracescore alert`'s per-record work relative to reading the record it is given.

For each record the service parses the JSON (EvaluationRecord.model_validate_json) and then feeds the
evaluator (add + evaluate: windows, confidence bound, transitions). This prints both per-record times and
their ratio, for few routes and for a burst over many routes past `max_routes` (eviction on every record),
for a route with a 10% LLM baseline (the correction's pair memory full: 200 pairs), for a window of 500, and
for a rule with a drop part at its defaults (window 1,000, normal 7,000, as sums), and that rule on one route
(its 20,000 records fill the drop window and the normal, so the sustained-drop test runs on every answer).

    python3 benchmarks/alert_evaluator.py
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

from tracescore.alert import AlertConfig, AlertEvaluator, DropConfig, RuleConfig
from tracescore.model import EvaluationRecord, MetricStatus

N = 20_000


def payloads(routes: int, baseline_every: int = 0) -> list[bytes]:
    """N records over `routes` routes; with `baseline_every`, every that many also an LLM baseline record
    (inclusion probability 0.1) pairing with the offline one."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for i in range(N):
        offline = EvaluationRecord(
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
    for routes, max_routes, every, name in (
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
        data = payloads(routes, every)
        start = time.perf_counter()
        records = [EvaluationRecord.model_validate_json(v) for v in data]
        parse = (time.perf_counter() - start) / len(data)
        evaluator = AlertEvaluator(AlertConfig(rules=[rules[name]], max_routes=max_routes))
        start = time.perf_counter()
        for record in records:
            key = evaluator.add(record)
            if key is not None:
                evaluator.evaluate(key, record.timestamp)
        evaluate = (time.perf_counter() - start) / len(data)
        baseline = f"1/{every}" if every else "none"
        print(
            f"{routes:>8} {max_routes:>10} {baseline:>8} {name:>12} {parse * 1e6:>9.1f} "
            f"{evaluate * 1e6:>12.1f} {evaluate / parse:>6.2f} {evaluator.evicted:>8}"
        )


if __name__ == "__main__":
    main()
