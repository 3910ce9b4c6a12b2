"""Rolling faithfulness with the cascade on: the mixed window, the LLM baseline alone and the estimate, on
streams with known truth.

    python benchmarks/rolling_estimates.py [PATH] [--window 500] [--windows 200] [--streams 30]
        [--baselines 0.01,0.1] [--signal label|score]

Streams are drawn from the labelled dev set's measurement half (the half benchmarks/cascade_sampling.py
measures on; nothing here is fitted: the estimator's prior is fixed in tracescore/alert/_estimate.py) at 5%
and 20% hallucinated answers, random trace ids. Each interaction goes through the real CascadePolicy (default
configuration, no token budget) and the real offline judge (Faithfulness + OfflineJudge), as the consumer
runs them; the LLM judge is simulated from the labels: perfect, or wrong 10% of the time. Its records carry
the inclusion probability the policy gives and the offline score, as the consumer writes them.

Per window of W interactions (one route's continuous traffic: the estimate's pair memory holds the pairs of
earlier windows, as in the alert service; one window of warm-up first), three estimates of the share of
faithful answers with 95% intervals:
- mixed: the mean of every record (offline and LLM), what the alert window averaged before;
- baseline only: the mean of the LLM judge on a uniform sample as large as the LLM calls the cascade made
  in that window (the same LLM budget);
- estimate: `EstimateWindow` (offline judge corrected by the LLM judge, each interaction once).
The LLM verdicts are handed back to the policy as the consumer does, so the cascade measures its lift
and moves its split (sample/_lift.py); the `switching` rows alternate the real offline judge with a
useless one (offline results shuffled between answers) every quarter of the windows, so the split moves
mid-stream, with the inclusion probabilities of each split. Bias and coverage are against the stream's
true share (1 - hallucination rate) and against the reference: what the (simulated) LLM judge would say
of every answer in the window. Detection: streams go from 5% to
20% hallucinated; each estimator alarms below a threshold set so that 1% of its evaluations (every 25
interactions) before the drift alarm; reported is the number of interactions after the drift until the
first alarm.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cascade_sampling import DEFAULT_PATH, score_all
from cascade_sampling import Row as Scored

from tracescore.alert import EstimateWindow
from tracescore.model import DecodedSpan, EvaluationRecord, Interaction, MetricStatus, is_flagged
from tracescore.sample import CascadeConfig, CascadePolicy, SamplingConfig

Z95 = 1.959964
EVERY = 25  # interactions between two evaluations of a sliding window (detection)
FALSE_ALARMS = 0.01
WARM_UP = 20  # windows of the route's traffic before a drifting stream is measured
T0 = datetime(2026, 1, 1, tzinfo=UTC)
_TICKS = itertools.count()  # records in arrival order: the window keeps the newest


@dataclass(frozen=True)
class Judged:
    """One interaction as the estimators see it."""

    truth: float  # 1 faithful, 0 hallucinated
    llm: float  # what the LLM judge would say
    offline: float
    selection: str | None  # None: the LLM judge did not see it
    inclusion: float | None
    records: tuple[EvaluationRecord, ...]


def interactions(
    rows: list[Scored], n: int, rate: float, wrong: float, rng: random.Random, policy: CascadePolicy
) -> list[Judged]:
    grounded = [r for r in rows if not r.hallucinated]
    hallucinated = [r for r in rows if r.hallucinated]
    out = []
    for _ in range(n):
        row = rng.choice(hallucinated if rng.random() < rate else grounded)
        trace, span_id = format(rng.getrandbits(128), "032x"), format(rng.getrandbits(64), "016x")
        span = DecodedSpan(
            trace_id=trace, span_id=span_id, name="rag", service_name="rag-api", scope_name="tracescore",
            attributes={}, end_time_unix_nano=0,
        )  # fmt: skip
        interaction = Interaction(span=span, record=row.record, route="/ask")
        assert policy.admit(interaction).sampled
        escalation = policy.escalate(interaction, row.offline)
        truth = 0.0 if row.hallucinated else 1.0
        llm = 1.0 - truth if rng.random() < wrong else truth
        offline, offline_label = row.offline[0].score, row.offline[0].label
        assert offline is not None
        at = T0 + timedelta(milliseconds=next(_TICKS))
        records = [_record(trace, span_id, offline, "offline", None, None, None, at, offline_label)]
        selection = inclusion = None
        if escalation.to_llm:
            policy.charge(0, reserved=escalation.reserved_tokens)
            policy.judged(interaction, escalation, not llm)  # the cascade's lift: it may move the split
            selection = escalation.selection.value if escalation.selection else None
            inclusion = escalation.inclusion_probability
            records.append(
                _record(
                    trace, span_id, llm, "openai:judge", selection, inclusion, offline, at,
                    "faithful" if llm else "hallucinated", offline_label,
                )
            )  # fmt: skip
        out.append(Judged(truth, llm, offline, selection, inclusion, tuple(records)))
    return out


def _record(
    trace: str, span: str, score: float, judge: str, selection: str | None, inclusion: float | None,
    offline: float | None, at: datetime = T0, label: str | None = None, offline_label: str | None = None,
) -> EvaluationRecord:  # fmt: skip
    return EvaluationRecord.model_construct(
        schema_version=1, trace_id=trace, span_id=span, evaluation_span_id=None, service_name="rag-api",
        route="/ask", metric="faithfulness", score=score, label=label, status=MetricStatus.OK, reason=None,
        judge=judge, annotator_kind="CODE" if judge == "offline" else "LLM", selection=selection,
        inclusion_probability=inclusion, offline_score=offline,
        offline_label=offline_label if judge != "offline" else None, convention="tracescore", timestamp=at,
        details={},
    )  # fmt: skip


Interval = tuple[float, float, float]  # value, low, high


def normal(values: list[float]) -> Interval:
    n = len(values)
    if n == 0:
        return (math.nan, 0.0, 1.0)
    mean = sum(values) / n
    if n < 2:
        return (mean, 0.0, 1.0)
    half = Z95 * statistics.stdev(values) / math.sqrt(n)
    return (mean, max(0.0, mean - half), min(1.0, mean + half))


def signal_of(record: EvaluationRecord, signal: str) -> float | None:
    """What a record contributes: its score, or 1.0 when the label rule passes it (the alerts' default)."""
    if signal == "score" or record.score is None:
        return record.score
    return 0.0 if is_flagged({"score": record.score, "label": record.label}) else 1.0


def estimators(window: list[Judged], rng: random.Random, route: EstimateWindow) -> dict[str, Interval]:
    """The three estimates of `window`; `route` is the route's EstimateWindow, already fed every interaction
    up to the window's end (as the alert service is: its pairs memory holds earlier windows' pairs)."""
    values = (signal_of(r, route.signal) for j in window for r in j.records)
    mixed = normal([v for v in values if v is not None])
    calls = sum(j.selection is not None for j in window)
    baseline = normal([j.llm for j in rng.sample(window, min(calls, len(window)))])
    est = route.estimate(1 - (1 - 0.95) / 2)
    assert est is not None
    return {"mixed": mixed, "baseline only": baseline, "estimate": (est.value, est.lower, est.upper)}


def feed(route: EstimateWindow, judged: list[Judged]) -> None:
    for j in judged:
        for r in j.records:
            route.add(r)


NAMES = ("mixed", "baseline only", "estimate")


def useless(rows: list[Scored]) -> list[Scored]:
    """The same answers, each with another answer's offline result: an offline judge with no lift."""
    shuffled = [r.offline for r in rows]
    random.Random(7).shuffle(shuffled)
    return [Scored(r.record, r.half, r.hallucinated, o) for r, o in zip(rows, shuffled, strict=True)]


def accuracy(
    rows: list[Scored], args: argparse.Namespace, rate: float, wrong: float, switching: bool = False
) -> None:
    """`switching`: the offline judge is the real one and a useless one in turn, a quarter of the windows
    each, so the cascade's split moves between targeting and uniform draws mid-stream."""
    rng = random.Random(f"{rate}-{wrong}" + ("-switching" if switching else ""))
    truth = 1 - rate
    results: dict[str, list[tuple[Interval, float]]] = {n: [] for n in NAMES}
    calls = []
    phases = [rows, useless(rows)] if switching else [rows]
    phase = max(1, args.windows // 4)
    shares = []
    # One route's continuous traffic: a window of warm-up, then `windows` consecutive windows.
    policy = CascadePolicy(args.config, metrics=("faithfulness",))
    route = EstimateWindow(args.window, args.signal)
    feed(route, interactions(rows, args.window, rate, wrong, rng, policy))
    for w in range(args.windows):
        source = phases[(w // phase) % len(phases)]
        window = interactions(source, args.window, rate, wrong, rng, policy)
        feed(route, window)
        shares.append(min((r.targeted_share for r in policy.lift_readings()), default=1.0))
        reference = sum(j.llm for j in window) / len(window)
        calls.append(sum(j.selection is not None for j in window))
        for name, interval in estimators(window, rng, route).items():
            results[name].append((interval, reference))
    label = "perfect" if wrong == 0 else f"{wrong:.0%} wrong"
    if switching:
        label += f", switching (targeted share {min(shares):.2f}-{max(shares):.2f})"
    for name in NAMES:
        got = results[name]
        values = [v for (v, _, _), _ in got if not math.isnan(v)]
        bias = statistics.fmean(values) - truth
        bias_ref = statistics.fmean(v - ref for (v, _, _), ref in got if not math.isnan(v))
        cover = statistics.fmean(lo <= truth <= hi for (_, lo, hi), _ in got)
        cover_ref = statistics.fmean(lo <= ref <= hi for (_, lo, hi), ref in got)
        width = statistics.fmean(hi - lo for (_, lo, hi), _ in got)
        print(
            f"| {rate:.0%} | {label} | {name} | {bias:+.3f} | {bias_ref:+.3f} | {cover:.1%} "
            f"| {cover_ref:.1%} | {width:.3f} | {statistics.fmean(calls):.0f} |"
        )


def delays(rows: list[Scored], args: argparse.Namespace, wrong: float) -> None:
    rng = random.Random(f"drift-{wrong}")
    before, after = 2 * args.window, 3 * args.window
    null: dict[str, list[float]] = {n: [] for n in NAMES}
    drifted: list[dict[str, list[tuple[int, float]]]] = []
    for _ in range(args.streams):
        policy = CascadePolicy(args.config, metrics=("faithfulness",))
        route = EstimateWindow(args.window, args.signal)
        # The route's earlier traffic at 5%, as in production: the estimate's pair memory is not empty.
        feed(route, interactions(rows, WARM_UP * args.window, 0.05, wrong, rng, policy))
        stream = interactions(rows, before, 0.05, wrong, rng, policy)
        stream += interactions(rows, after, 0.20, wrong, rng, policy)
        series: dict[str, list[tuple[int, float]]] = {n: [] for n in NAMES}
        fed = 0
        for end in range(args.window, len(stream) + 1, EVERY):
            feed(route, stream[fed:end])
            fed = end
            for name, (value, _, _) in estimators(stream[end - args.window : end], rng, route).items():
                if end <= before:
                    null[name].append(value)
                else:
                    series[name].append((end - before, value))
        drifted.append(series)
    label = "perfect" if wrong == 0 else f"{wrong:.0%} wrong"
    for name in NAMES:
        ordered = sorted(v for v in null[name] if not math.isnan(v))
        threshold = ordered[int(FALSE_ALARMS * len(ordered))]
        found = [next((t for t, v in s[name] if v < threshold), None) for s in drifted]
        hits = [t for t in found if t is not None]
        median = f"{statistics.median(hits):.0f}" if hits else "never"
        print(f"| {label} | {name} | {threshold:.3f} | {median} | {len(hits)}/{len(found)} within {after} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--window", type=int, default=500, help="interactions per window (default 500)")
    parser.add_argument("--windows", type=int, default=200, help="windows per case, accuracy (default 200)")
    parser.add_argument("--streams", type=int, default=30, help="drifting streams (default 30)")
    parser.add_argument(
        "--signal", choices=("label", "score"), default="label", help="what alerts watch (default: label)"
    )
    parser.add_argument("--baselines", default="0.01,0.10", help="cascade baseline rates (default 1%%, 10%%)")
    args = parser.parse_args()
    started = time.monotonic()
    scored, _ = asyncio.run(score_all(args.path))
    rows = [r for r in scored if r.half == 1]  # cascade_sampling.py's measurement half
    for baseline in (float(b) for b in args.baselines.split(",")):
        args.config = SamplingConfig(cascade=CascadeConfig(baseline_rate=baseline))
        report(rows, args)
    print(f"\n{time.monotonic() - started:.0f} s")


def report(rows: list[Scored], args: argparse.Namespace) -> None:
    config = args.config
    print(
        f"\n### {len(rows)} records (measurement half), windows of {args.window} interactions, "
        f"baseline {config.cascade.baseline_rate:.0%}, no token budget, signal {args.signal}\n"
    )
    print(
        "| hallucinated | LLM judge | estimator | bias vs true share | bias vs LLM reference "
        "| 95% coverage (true share) | 95% coverage (reference) | interval width | LLM calls per window |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for rate in (0.05, 0.20):
        for wrong in (0.0, 0.10):
            accuracy(rows, args, rate, wrong)
    for rate in (0.05, 0.20):
        accuracy(rows, args, rate, 0.10, switching=True)
    print(
        f"\nDrift 5% -> 20% hallucinated, sliding windows of {args.window} evaluated every {EVERY}, "
        f"{args.streams} streams, thresholds at {FALSE_ALARMS:.0%} false alarms before the drift\n"
    )
    print("| LLM judge | estimator | alarm below | median delay (interactions) | detected |")
    print("|---|---|---|---|---|")
    for wrong in (0.0, 0.10):
        delays(rows, args, wrong)


if __name__ == "__main__":
    main()
