"""How many hallucinated answers reach the LLM judge when only B% of spans may go to it?

    python benchmarks/cascade_sampling.py [DATA.jsonl] [--calibrate [FILE,...]] [--reverse] [--json]
        [--judge-noise 0.1] [--spans N] [--streams R] [--budgets 2,5,10,20] [--labels 400]
        [--hallucination-rate 0.05] [--measure-half 1] [--lockbox] [--no-learning-curve]

DATA.jsonl: one labelled RAG answer a line, `query`, `contexts` (list of strings), `answer`, `label`
(`hallucinated` / `faithful`, or any of the bad/good labels below); other fields are ignored. Default: the
labelled dev set (HaluEval QA).

Honest split: records are split by question (`calibration_half`, a hash of the query text and its
contexts: half 0 calibrates, half 1 is measured), so no question's answers are on both sides, and summaries
that share one query ("Summarize the following passage.") split by passage. The shipped suspicion
coefficients (COLD_START, fitted on half 0 of both dev sets together) are used unless `--calibrate` refits
them on half 0 of DATA, or of the files it names, together (`--calibrate QA.jsonl,LONG.jsonl` reproduces
COLD_START). `--reverse` swaps the halves (calibrate on 1, measure on 0), as a check of the split; it needs
`--calibrate`. `--measure-half 0` measures half 0 with the shipped coefficients, to tune other settings
(the lift switch's) on half 0. The curve is measured on the measurement half: R streams of N spans drawn
from its records (5% hallucinated answers by default, random trace ids, spread over one UTC hour), each run
through CascadePolicy as the consumer runs it (offline Faithfulness + OfflineJudge results, escalate,
charge, and `learn` from the LLM verdicts of baseline interactions) with an LLM token budget of B% of the
stream's spans for that hour. The LLM judge is simulated from the labels: perfect, or wrong on
`--judge-noise` of its verdicts. Uniform sampling is measured on the same streams (a trace-id hash at B%).

Every LLM verdict is handed back as the consumer does (`judged`: the cascade measures its own lift per
answer shape and splits its budget between targeting and uniform draws, sample/_lift.py).

Columns: the cold start alone (learning off); learning on after `--labels` labels (drawn as a uniform
baseline would, from the calibration half, perfect judge), then online on the stream; the same with the
noisy judge; the cold start always targeting (lift off, the cascade before it measured its lift); the
split at the stream's end and the LLM calls by selection (cascade / uniform / baseline), cold start.
`useless offline judge`: the measured half with its offline results shuffled between answers (random
suspicion), 5% budget.
The learning curve: recall at 5% against labels seen, from a zeroed model and from the cold start.
`false_escalation`: on a stream of faithful answers only, the share of spans the cascade sends beyond the
baseline at a 10% budget.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from _lockbox import DEV_SETS, locked, open_lockbox, reader

from tracescore.model import DecodedSpan, Interaction, MetricResult, MetricStatus, RagRecord
from tracescore.sample import CascadePolicy, SamplingConfig
from tracescore.sample._calibration import COLD_START, FEATURES, calibration_half, features, fit
from tracescore.sample._hashing import keep
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness, evaluate_record

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
HALLUCINATION_RATE = 0.05
TOKENS_PER_LLM_EVALUATION = 1_500  # any fixed figure: budgets are set in evaluations' worth of tokens
HOUR_START = 1_700_000_000 // 3600 * 3600  # a UTC hour boundary
BAD = {"hallucinated", "hallucination", "unfaithful", "fail", "failed", "bad", "true", "1", "yes"}
GOOD = {"faithful", "grounded", "supported", "pass", "passed", "good", "false", "0", "no"}
CURVE = (0, 50, 100, 200, 400, 800)


@dataclass(frozen=True)
class Row:
    record: RagRecord
    half: int
    hallucinated: bool
    offline: list[MetricResult]


def label(value: object) -> bool | None:
    text = str(value).strip().lower()
    return True if text in BAD else False if text in GOOD else None


async def score_all(path: Path, lockbox: bool = False) -> tuple[list[Row], int]:
    """Every usable record with its offline result (of a dev set: the open part, or with `lockbox` the
    lockbox only); and how many lines were skipped (with a reason)."""
    judge, metrics = OfflineJudge(), [Faithfulness()]
    rows, skipped, reads = [], 0, reader(path, lockbox)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if not reads(raw["contexts"]):
                continue
            record = RagRecord(query=raw["query"], contexts=tuple(raw["contexts"]), answer=raw["answer"])
            hallucinated = label(raw["label"])
            if hallucinated is None:
                raise ValueError(f"unknown label {raw['label']!r}")
        except (ValueError, KeyError, TypeError) as exc:
            skipped += 1
            print(f"{path}:{number}: skipped ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        # The question with its documents: many summaries share one query ("Summarize the document").
        half = calibration_half(record.query, record.contexts)
        offline = await evaluate_record(record, metrics, judge)
        rows.append(Row(record, half, hallucinated, offline))
    return rows, skipped


def stream(rows: list[Row], spans: int, rng: random.Random, rate: float) -> list[tuple[Interaction, Row]]:
    grounded = [r for r in rows if not r.hallucinated]
    hallucinated = [r for r in rows if r.hallucinated]
    out = []
    for i in range(spans):
        row = rng.choice(hallucinated if rng.random() < rate else grounded)
        span = DecodedSpan(
            trace_id=format(rng.getrandbits(128), "032x"),
            span_id=format(rng.getrandbits(64), "016x"),
            name="rag",
            service_name="rag-api",
            scope_name="tracescore",
            attributes={},
            end_time_unix_nano=(HOUR_START + i * 3600 // spans) * 10**9,
        )
        out.append((Interaction(span=span, record=row.record, route="/ask"), row))
    return out


def verdict(row: Row, noise: float, rng: random.Random) -> bool:
    """The simulated LLM judge: the label, wrong `noise` of the time."""
    return row.hallucinated != (rng.random() < noise)


@dataclass
class Run:
    recall: float
    uniform_recall: float
    llm_share: float
    baseline: float
    false_cascade: float  # faithful spans sent by the cascade (not the baseline), share of all spans
    calls: dict[str, float]  # LLM calls by selection (cascade, uniform, baseline), share of all calls
    targeted_share: float  # the split at the stream's end (mean over its answer shapes): the share targeting


def policy_for(
    budget: float, spans: int, weights: Mapping[str, float], learning: bool, lift: bool = True
) -> tuple[CascadePolicy, list]:
    now = [float(HOUR_START)]
    config = SamplingConfig(
        llm_budget={
            "tokens_per_hour": max(1, round(budget * spans)) * TOKENS_PER_LLM_EVALUATION,
            "estimated_tokens_per_evaluation": TOKENS_PER_LLM_EVALUATION,
        },
        cascade={"learning": {"enabled": learning}, "lift": {"enabled": lift}},
    )
    return CascadePolicy(config, clock=lambda: now[0], cold_start=weights), now


def teach(
    policy: CascadePolicy, rows: list[Row], labels: int, noise: float, rng: random.Random, rate: float
) -> None:
    """`labels` LLM verdicts on interactions drawn as a uniform baseline draws them (`rate` hallucinated)."""
    span = stream(rows, 1, rng, rate)[0][0]
    for _, row in stream(rows, labels, rng, rate):
        policy.learn(span, row.offline, verdict(row, noise, rng))


def run(
    spans: list[tuple[Interaction, Row]],
    budget: float,
    policy: CascadePolicy,
    now: list[float],
    noise: float,
    rng: random.Random,
) -> Run:
    reached = uniform = escalated = hallucinated = baseline = false_cascade = 0
    calls: Counter[str] = Counter()
    for interaction, row in spans:
        now[0] = interaction.span.end_time_unix_nano / 1e9
        escalation = policy.escalate(interaction, row.offline)
        if escalation.to_llm:
            escalated += 1
            policy.charge(TOKENS_PER_LLM_EVALUATION, reserved=escalation.reserved_tokens)
            failed = verdict(row, noise, rng)
            policy.judged(interaction, escalation, failed)  # the cascade's lift, as the consumer reports it
            calls[str(escalation.selection)] += 1
            if escalation.selection == "baseline":
                baseline += 1
                policy.learn(interaction, row.offline, failed)
            elif escalation.selection == "cascade" and not row.hallucinated:
                false_cascade += 1
        if row.hallucinated:
            hallucinated += 1
            reached += escalation.to_llm
            uniform += keep(interaction.span.trace_id, "uniform", budget)
    shares = [reading.targeted_share for reading in policy.lift_readings()]
    return Run(
        recall=reached / max(1, hallucinated),
        uniform_recall=uniform / max(1, hallucinated),
        llm_share=escalated / len(spans),
        baseline=baseline / len(spans),
        false_cascade=false_cascade / len(spans),
        calls={k: calls[k] / max(1, escalated) for k in ("cascade", "uniform", "baseline")},
        targeted_share=statistics.mean(shares) if shares else 1.0,
    )


def measure(
    calibration: list[Row],
    measurement: list[Row],
    args: argparse.Namespace,
    budget: float,
    weights: Mapping[str, float],
    *,
    labels: int | None,
    noise: float = 0.0,
    rate: float | None = None,
    streams: int | None = None,
    lift: bool = True,
) -> list[Run]:
    """Runs over R streams; `labels` None: learning off, else that many labels first, then online; `lift`
    off: the cascade always targets (as before it measured its own lift)."""
    runs = []
    rate = args.hallucination_rate if rate is None else rate
    for seed in range(streams or args.streams):
        rng = random.Random(seed)
        policy, now = policy_for(budget, args.spans, weights, labels is not None, lift)
        if labels:
            teach(policy, calibration, labels, noise, random.Random(10_000 + seed), args.hallucination_rate)
        runs.append(run(stream(measurement, args.spans, rng, rate), budget, policy, now, noise, rng))
    return runs


def calibrate(paths: list[Path], half: int | None = 0) -> dict[str, float]:
    """Coefficients fitted on the calibration half (half 0; None: both) of every file, together (of a dev
    set, its open part: never the lockbox)."""
    rows = []
    for path in paths:
        scored, _ = asyncio.run(score_all(path))
        ok = [
            r
            for r in scored
            if half in (None, r.half) and r.offline and r.offline[0].status is MetricStatus.OK
        ]
        rows += [(features(r.offline[0]), r.hallucinated) for r in ok]
    return fit(rows)


def mean(values: object) -> float:
    return statistics.mean(values)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--spans", type=int, default=4000, help="spans per stream (default 4000)")
    parser.add_argument("--streams", type=int, default=20, help="streams per budget (default 20)")
    parser.add_argument("--budgets", default="2,5,10,20", help="LLM budgets in %% of spans")
    parser.add_argument(
        "--hallucination-rate", type=float, default=HALLUCINATION_RATE, help="share of the stream (0.05)"
    )
    parser.add_argument("--labels", type=int, default=400, help="labels learned before the learning runs")
    parser.add_argument("--judge-noise", type=float, default=0.1, help="share of wrong simulated verdicts")
    parser.add_argument(
        "--calibrate",
        nargs="?",
        const="",
        metavar="FILE,...",
        help="refit the suspicion model on half 0 of DATA (or of these labelled files, together)",
    )
    parser.add_argument(
        "--reverse",
        action="store_true",
        help="calibrate on half 1 and measure on half 0 (a check of the split; with --calibrate)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on the last line")
    parser.add_argument(
        "--measure-half",
        type=int,
        choices=(0, 1),
        default=1,
        help="the half measured (default 1, held out); 0 swaps the halves, to tune settings on half 0",
    )
    parser.add_argument(
        "--lockbox",
        action="store_true",
        help="measure on the dev set's lockbox (once per change; recorded); the open part calibrates",
    )
    parser.add_argument(
        "--no-learning-curve", action="store_true", help="skip the learning curve (the slowest part)"
    )
    args = parser.parse_args()
    if args.lockbox and (args.reverse or not locked(args.path)):
        sys.exit("--lockbox measures a dev set's lockbox (no --reverse): " + ", ".join(sorted(DEV_SETS)))

    rows, skipped = asyncio.run(score_all(args.path))
    measured = 0 if args.reverse else args.measure_half
    calibrating: int | None = 1 - measured
    calibration = [r for r in rows if r.half == calibrating]
    measurement = [r for r in rows if r.half == measured]
    if args.lockbox:
        open_lockbox([args.path])
        calibration, calibrating = rows, None  # every open record calibrates; the lockbox is measured
        measurement, more = asyncio.run(score_all(args.path, lockbox=True))
        skipped += more
    for name, half in (("calibration", calibration), ("measurement", measurement)):
        if not any(r.hallucinated for r in half) or all(r.hallucinated for r in half):
            sys.exit(f"{args.path}: the {name} half needs both hallucinated and faithful answers")
    questions = [
        len({(r.record.query, r.record.contexts) for r in half}) for half in (calibration, measurement)
    ]
    weights: Mapping[str, float] = COLD_START
    if args.calibrate is not None:
        weights = calibrate([Path(p) for p in args.calibrate.split(",") if p] or [args.path], calibrating)
        print("refitted coefficients: " + ", ".join(f"{n} {w:g}" for n, w in weights.items()))
    if args.reverse and args.calibrate is None:
        sys.exit(
            "--reverse measures on half 0, which the shipped coefficients were fitted on: add --calibrate"
        )
    source = "refitted on the calibration half" if args.calibrate is not None else "shipped"
    measured_on = "the lockbox" if args.lockbox else f"half {measured}"
    print(
        f"{args.path.name}: {len(rows)} open records ({skipped} skipped); split by hash of query + "
        f"contexts: calibration {len(calibration)} records / {questions[0]} questions, measured on "
        f"{measured_on}, {len(measurement)} / {questions[1]}; coefficients: {source}"
    )
    print(
        f"{args.streams} streams of {args.spans} spans, {args.hallucination_rate:.0%} hallucinated; "
        f"learning runs: {args.labels} labels first, then online; "
        f"noisy judge: {args.judge_noise:.0%} of verdicts wrong\n"
    )
    print(
        "| LLM budget | cascade, cold start | + learning | + learning, noisy judge | uniform sampling "
        "| always targeting (lift off), cold start | split at the end: targeted share | LLM calls: cascade / "
        "uniform / baseline | spans sent to the LLM judge | faithful spans sent by the cascade |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    figures: dict[str, object] = {"budgets": {}}
    for percent in (float(b) for b in args.budgets.split(",")):
        budget = percent / 100
        cold = measure(calibration, measurement, args, budget, weights, labels=None)
        learned = measure(calibration, measurement, args, budget, weights, labels=args.labels)
        noisy = measure(
            calibration, measurement, args, budget, weights, labels=args.labels, noise=args.judge_noise
        )
        always = measure(calibration, measurement, args, budget, weights, labels=None, lift=False)
        recalls = [r.recall for r in cold]
        calls = {k: round(mean(r.calls[k] for r in cold), 4) for k in ("cascade", "uniform", "baseline")}
        figures["budgets"][f"{percent:g}"] = {  # type: ignore[index]
            "cascade": round(mean(recalls), 4),
            "cascade_learning": round(mean(r.recall for r in learned), 4),
            "cascade_learning_noisy": round(mean(r.recall for r in noisy), 4),
            "uniform": round(mean(r.uniform_recall for r in cold), 4),
            "cascade_always_targeting": round(mean(r.recall for r in always), 4),
            "targeted_share": round(mean(r.targeted_share for r in cold), 4),
            "targeted_share_learning": round(mean(r.targeted_share for r in learned), 4),
            "llm_calls": calls,
        }
        print(
            f"| {percent:g}% | **{mean(recalls):.1%}** (streams: {min(recalls):.0%}-{max(recalls):.0%}) "
            f"| {mean(r.recall for r in learned):.1%} | {mean(r.recall for r in noisy):.1%} "
            f"| {mean(r.uniform_recall for r in cold):.1%} | {mean(r.recall for r in always):.1%} "
            f"| {mean(r.targeted_share for r in cold):.2f} "
            f"| {calls['cascade']:.0%} / {calls['uniform']:.0%} / {calls['baseline']:.0%} "
            f"| {mean(r.llm_share for r in cold):.2%} | {mean(r.false_cascade for r in cold):.2%} |"
        )

    # A useless offline judge: every answer gets another answer's offline result (random suspicion).
    shuffled = [r.offline for r in measurement]
    random.Random(7).shuffle(shuffled)
    useless = [Row(r.record, r.half, r.hallucinated, o) for r, o in zip(measurement, shuffled, strict=True)]
    runs = measure(calibration, useless, args, 0.05, weights, labels=None)
    figures["useless_offline_judge"] = {
        "budget": 5,
        "cascade": round(mean(r.recall for r in runs), 4),
        "uniform": round(mean(r.uniform_recall for r in runs), 4),
        "targeted_share": round(mean(r.targeted_share for r in runs), 4),
    }
    print(
        "\nuseless offline judge (each answer gets another's offline result), 5% budget: the cascade "
        f"{figures['useless_offline_judge']['cascade']:.1%}, uniform "
        f"{figures['useless_offline_judge']['uniform']:.1%}, split at the end: targeted share "
        f"{figures['useless_offline_judge']['targeted_share']:.2f}"
    )

    clean = measure(calibration, measurement, args, 0.10, weights, labels=None, rate=0.0)
    figures["false_escalation"] = round(mean(r.false_cascade for r in clean), 4)
    print(
        "\nclean stream (no hallucinations), 10% budget: the cascade sends "
        f"{figures['false_escalation']:.2%} of spans beyond the baseline "
        f"({mean(r.baseline for r in clean):.2%})"
    )

    if args.no_learning_curve:
        figures["split"] = {"calibration": len(calibration), "measurement": len(measurement)}
        if args.json:
            print(json.dumps(figures))
        return
    curve_streams = args.streams  # the streams of the table, so the two read alike
    print(f"\nlearning curve at a 5% budget ({curve_streams} streams per point, perfect / noisy judge):\n")
    print("| labels seen | from a zeroed model | noisy | from the cold start | noisy |")
    print("|---|---|---|---|---|")
    curve: dict[str, dict[str, float]] = {}
    zero = dict.fromkeys(FEATURES, 0.0)
    for labels in CURVE:
        point = {}
        for name, start in (("zeroed", zero), ("cold_start", weights)):
            for suffix, noise in (("", 0.0), ("_noisy", args.judge_noise)):
                runs = measure(
                    calibration,
                    measurement,
                    args,
                    0.05,
                    start,
                    labels=labels,
                    noise=noise,
                    streams=curve_streams,
                )
                point[name + suffix] = round(mean(r.recall for r in runs), 4)
        curve[str(labels)] = point
        print(
            f"| {labels} | {point['zeroed']:.1%} | {point['zeroed_noisy']:.1%} "
            f"| {point['cold_start']:.1%} | {point['cold_start_noisy']:.1%} |"
        )
    figures["learning_curve"] = curve
    figures["split"] = {"calibration": len(calibration), "measurement": len(measurement)}
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
