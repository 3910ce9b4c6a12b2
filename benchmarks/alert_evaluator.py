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
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, datetime, timedelta

from tracescore.alert import AlertConfig, AlertEvaluator, DropConfig, RuleConfig
from tracescore.model import EvaluationRecord, MetricStatus

N = 20_000


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


if __name__ == "__main__":
    main()
