"""How fast do alerts page on a real drop, and how often on a healthy route? Thresholds against drop rules.

    python benchmarks/drop_detection.py LABELLED.jsonl [--json] [--streams 100] [--after 10000]
        [--measure-half 1|0|all] [--workers 2] [--drop KEY=VALUE ...] [--seed 0]
        [--judges offline,llm_baseline] [--kinds threshold,drop,old_default,default]
    python benchmarks/drop_detection.py --pass-rates 0.45,0.30 [the same options]

LABELLED.jsonl: one labelled RAG answer a line (`query`, `contexts`, `answer`, `label`; the format of the
shared dev sets, other fields ignored). Every record is scored by the real offline judge (Faithfulness on
OfflineJudge, as `tracescore consume` runs it). The records are split by question and passage
(`calibration_half`): defaults are chosen on half 0, figures reported on half 1 (`--measure-half`; `all`
for data nothing was chosen on; a half without both labels falls back to every record, with a note).
`--pass-rates FAITHFUL,HALLUCINATED` replaces the file by a judge of those per-class pass rates (no file,
no halves: not data, a shape), for the shapes of data we do not have (issue 34's unseen long answers: the
label rule passes 45% of faithful and 30% of hallucinated ones); the streams, the evaluator and `limit`
are the same.

Streams: one route of 1,000 answers a day (86.4 s apart), answers drawn with replacement from the measured
records: a healthy week (7,000 answers, 5% hallucinated; the route is new, so it starts cold), then a step
to 15% or to 30% hallucinated for up to `--after` answers. Each stream runs the shipped AlertEvaluator, fed
record by record as `tracescore alert` is, with one rule holding both kinds (a page is a firing
notification that is no reminder; escalations count):

- threshold: today's rule at the thresholds a user picks, the defaults (warning 0.7, critical 0.5, window
  of 50 answers, 90% confidence; window_seconds a day, so the count decides at this traffic);
- drop: the rule's drop part at its shipped defaults (`--drop min_drop=0.02` to try others);

- old_default, default: the rule `tracescore alert` runs without a config, each in an evaluator of its own
  and unchanged (its 15-minute window too, about 10 answers at this traffic; any of its pages counts):
  before this release (`RuleConfig()`: warning 0.7, critical 0.5, on every estimate) and now
  (`default_rule()`: those thresholds only once the LLM judge's baseline calibrates the estimate, and the
  drop part at its defaults);

each with the offline judge alone (`offline`) and with the LLM judge on a uniform 1% baseline
(`llm_baseline`: records as the consumer writes them, inclusion probability 0.01, the offline result
carried; the LLM judge is simulated from the labels and always right; the cascade's targeted picks, which
depend on a token budget, are left out).

Reported per variant: false alarms per 10,000 healthy answers (and the share of streams with any), and per
step the answers from the step to the first page (median, p90; streams never paged within `--after` count
as never, so a median past half missed is null), the share never paged, and `limit`: the fewest answers any
test on the same judge's verdicts could need, the median delay of the CUSUM that knows the rates before and
after the step (the optimal detector, Lorden and Moustakides), simulated on the same stream model (the
judge's per-class pass rates on the measured records; with the baseline, 1% of answers also show their
true class) with its threshold set so that 95% of healthy streams stay silent over 10,000 answers, the
target the rules are held to. (ln(ARL) / KL, the asymptotic form, overstates it when the step is small:
the CUSUM's threshold is nearer ln(ARL x KL).) The last
line printed is JSON: {"variants": {"threshold_offline": V, "drop_offline": V, "threshold_llm_baseline": V,
"drop_llm_baseline": V}} (and `old_default_*`, `default_*` when --kinds names them).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import math
import random
import resource
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cascade_sampling import score_all

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    DropConfig,
    JudgeHealthConfig,
    RuleConfig,
    default_rule,
)
from tracescore.model import EvaluationRecord, MetricStatus, Usage, is_flagged

HEALTHY = 7_000  # a week of a 1,000-answers-a-day route
SPACING = timedelta(seconds=86.4)
BEFORE, STEPS = 0.05, (0.15, 0.30)
BASELINE = 0.01
FALSE_ALARM_SPAN, FREE_STREAMS = 10_000, 0.95  # the target: 95% of streams silent over 10,000 answers
T0 = datetime(2026, 1, 5, tzinfo=UTC)
JUDGES = ("offline", "llm_baseline")
KINDS = ("threshold", "drop")  # two parts of one rule, told apart by their alert names
DEFAULTS = ("old_default", "default")  # a whole config each: any page counts
RULE = "rule"  # the evaluator of KINDS


@dataclass(frozen=True)
class Answer:
    hallucinated: bool
    score: float
    label: str | None

    @property
    def passes(self) -> bool:
        return not is_flagged({"score": self.score, "label": self.label})


def rule(drop: dict[str, Any], kinds: tuple[str, ...]) -> dict[str, AlertConfig]:
    """The configs to run, each in one evaluator per judge: both KINDS in one rule (the threshold defaults
    and the drop part), and each of DEFAULTS asked for, the config without a file (model_construct: no
    TRACESCORE_ALERT_* variable leaks in)."""
    configs = {}
    if set(kinds) & set(KINDS):
        parts: dict[str, Any] = {} if "threshold" in kinds else {"warning": None, "critical": None}
        if "drop" in kinds:
            parts["drop"] = DropConfig(**drop)
        both = RuleConfig(window_seconds=86_400, no_data_seconds=None, **parts)
        quiet = JudgeHealthConfig(enabled=False)
        configs[RULE] = AlertConfig.model_construct(rules=[both], judge_health=quiet)
    if "old_default" in kinds:
        configs["old_default"] = AlertConfig.model_construct(rules=[RuleConfig()])
    if "default" in kinds:
        configs["default"] = AlertConfig.model_construct(rules=[default_rule()])
    return configs


# Two records built once and copied per answer with what differs (a shallow copy: the evaluator reads a
# record, never changes it). model_construct per record resolved every unset field's default, more than half
# of a stream's CPU before the evaluator's; a copy with an update does not.
_COMMON = {
    "schema_version": 1, "evaluation_span_id": None, "service_name": "rag-api", "route": "/ask",
    "metric": "faithfulness", "status": MetricStatus.OK, "reason": None, "convention": "tracescore",
    "details": {}, "history_turns": [], "usage": Usage(),
}  # fmt: skip
_OFFLINE = EvaluationRecord.model_construct(
    **_COMMON, trace_id="0" * 32, span_id="0" * 16, score=None, label=None, judge="offline",
    annotator_kind="CODE", selection=None, inclusion_probability=None, offline_score=None,
    offline_label=None, timestamp=T0,
)  # fmt: skip
_BASELINE = _OFFLINE.model_copy(
    update={"judge": "openai:judge", "annotator_kind": "LLM", "selection": "baseline",
            "inclusion_probability": BASELINE}
)  # fmt: skip


def records(answer: Answer, i: int, rng: random.Random, judge: str) -> list[EvaluationRecord]:
    at = T0 + i * SPACING
    trace, span = format(rng.getrandbits(128), "032x"), format(rng.getrandbits(64), "016x")
    ids = {"trace_id": trace, "span_id": span}
    out = [_OFFLINE.model_copy(update={**ids, "score": answer.score, "label": answer.label, "timestamp": at})]
    if judge == "llm_baseline" and rng.random() < BASELINE:
        truth = 0.0 if answer.hallucinated else 1.0
        out.append(
            _BASELINE.model_copy(
                update={**ids, "score": truth, "label": "hallucinated" if answer.hallucinated else "faithful",
                        "offline_score": answer.score, "offline_label": answer.label,
                        "timestamp": at + timedelta(seconds=5)}
            )
        )  # fmt: skip
    return out


def pages(ev: AlertEvaluator, batch: list[EvaluationRecord], config: str) -> dict[str, str | None]:
    """The kinds that paged on these records, each with the drop test that decided (None: a threshold);
    a default config's pages are its own kind, with the test ("threshold" for a threshold alert)."""
    out: dict[str, str | None] = {}
    for record in batch:
        key = ev.add(record)
        assert key is not None
        for note in ev.evaluate(key, record.timestamp):
            if note.state == "firing" and not note.repeat:
                drop = note.alertname.endswith("BelowNormal")
                if config != RULE:
                    out[config] = note.drop_test if drop else "threshold"
                else:
                    out["drop" if drop else "threshold"] = note.drop_test if drop else None
    return out


def draw(pool: dict[bool, list[Answer]], rate: float, rng: random.Random) -> Answer:
    return rng.choice(pool[rng.random() < rate])


_POOL: dict[bool, list[Answer]] = {}
_CONFIGS: dict[str, AlertConfig] = {}
_RUN: dict[str, tuple[str, ...]] = {"judges": JUDGES, "kinds": KINDS}


def stream(args: tuple[int, int, int]) -> dict[str, dict[str, Any]]:
    """One stream: healthy pages per variant, and the answers to the first page after each step."""
    seed, after, _ = args
    judges, kinds = _RUN["judges"], _RUN["kinds"]
    out: dict[str, dict[str, Any]] = {f"{k}_{j}": {"healthy": 0, "by": {}} for j in judges for k in kinds}
    # One evaluator per config and judge; every config sees the same answers, each judge its own records.
    evaluators = {(c, j): AlertEvaluator(config) for c, config in _CONFIGS.items() for j in judges}
    rngs = {j: random.Random(f"{seed}-{j}") for j in judges}
    draws = random.Random(seed)
    for i in range(HEALTHY):
        answer = draw(_POOL, BEFORE, draws)
        for judge in judges:
            batch = records(answer, i, rngs[judge], judge)
            for config in _CONFIGS:
                for kind, test in pages(evaluators[config, judge], batch, config).items():
                    got = out[f"{kind}_{judge}"]
                    got["healthy"] += 1
                    if test is not None:
                        got["by"][test] = got["by"].get(test, 0) + 1
    for rate in STEPS if after else ():  # --after 0: the healthy week only (false alarms)
        step = f"step_{round(rate * 100)}"
        copies = {cj: copy.deepcopy(ev) for cj, ev in evaluators.items()}
        step_rngs = {j: random.Random(f"{seed}-{j}-{rate}") for j in judges}
        step_draws = random.Random(f"{seed}-{rate}")
        waiting = {f"{k}_{j}" for j in judges for k in kinds}
        for n in range(1, after + 1):
            answer = draw(_POOL, rate, step_draws)
            for judge in judges:
                if not any(v.endswith(judge) for v in waiting):
                    continue
                batch = records(answer, HEALTHY + n, step_rngs[judge], judge)
                for config in _CONFIGS:
                    for kind in pages(copies[config, judge], batch, config):
                        if f"{kind}_{judge}" in waiting:
                            out[f"{kind}_{judge}"][step] = n
                            waiting.discard(f"{kind}_{judge}")
            if not waiting:
                break
    return out


def _init(
    pool: dict[bool, list[Answer]], configs: dict[str, AlertConfig], run: dict[str, tuple[str, ...]]
) -> None:
    _POOL.update(pool)
    _RUN.update(run)
    _CONFIGS.update(configs)


def observations(pass_f: float, pass_h: float, rate: float, judge: str) -> list[tuple[float, float]]:
    """(probability before the step, after it) of each thing one answer can show: the offline verdict
    (pass, flag), and with the baseline, 1% of the time, its true class beside it."""
    before = {c: (1 - BEFORE, BEFORE)[c] for c in (0, 1)}  # class 1: hallucinated
    after = {c: (1 - rate, rate)[c] for c in (0, 1)}
    passes = {0: pass_f, 1: pass_h}
    shown = BASELINE if judge == "llm_baseline" else 0.0
    out = []
    for verdict in (True, False):
        given = {c: passes[c] if verdict else 1 - passes[c] for c in (0, 1)}
        p0, p1 = (sum(mix[c] * given[c] for c in (0, 1)) for mix in (before, after))
        out.append(((1 - shown) * p0, (1 - shown) * p1))
        out += [(shown * before[c] * given[c], shown * after[c] * given[c]) for c in (0, 1)]
    return [(p0, p1) for p0, p1 in out if p0 > 0 or p1 > 0]


def cusum_limits(
    pool: dict[bool, list[Answer]], after: int, runs: int = 1000
) -> dict[str, dict[str, int | None]]:
    """The median delay of the CUSUM that knows both rates (the optimal test, Lorden and Moustakides), its
    threshold set so that 95% of healthy streams stay silent over 10,000 answers: what any test on the same
    judge's verdicts needs at the same false-alarm target. numpy comes with the dev extra (pandas)."""
    import numpy as np

    pass_f = statistics.fmean(a.passes for a in pool[False])
    pass_h = statistics.fmean(a.passes for a in pool[True])
    rng = np.random.default_rng(20_260_105)
    out: dict[str, dict[str, int | None]] = {}
    for judge in JUDGES:
        out[judge] = {}
        for rate in STEPS:
            probs = observations(pass_f, pass_h, rate, judge)
            p0 = np.array([a for a, _ in probs])
            p1 = np.array([b for _, b in probs])
            llr = np.log(np.where(p1 > 0, p1, 1e-300) / np.where(p0 > 0, p0, 1e-300))
            if np.allclose(llr, 0.0):
                out[judge][f"step_{round(rate * 100)}"] = None  # the verdicts say nothing of the step
                continue
            healthy = _cusum_peaks(rng, p0 / p0.sum(), llr, runs, FALSE_ALARM_SPAN)
            threshold = float(np.quantile(healthy, FREE_STREAMS))
            delays = _cusum_crossings(rng, p1 / p1.sum(), llr, runs, after, threshold)
            median = float(np.median(delays))
            out[judge][f"step_{round(rate * 100)}"] = None if math.isinf(median) else int(median)
    return out


def _cusum_peaks(rng: Any, probs: Any, llr: Any, runs: int, span: int) -> Any:
    """The highest CUSUM value of each of `runs` streams of `span` answers: S = C - min(0, min C)."""
    import numpy as np

    peaks = []
    for start in range(0, runs, 100):
        steps = llr[rng.choice(len(probs), size=(min(100, runs - start), span), p=probs)]
        total = np.cumsum(steps, axis=1)
        peaks.append((total - np.minimum.accumulate(np.minimum(total, 0.0), axis=1)).max(axis=1))
    return np.concatenate(peaks)


def _cusum_crossings(rng: Any, probs: Any, llr: Any, runs: int, span: int, threshold: float) -> Any:
    """Answers until the CUSUM first passes `threshold` (inf: not within `span`), from a silent start."""
    import numpy as np

    found = []
    for start in range(0, runs, 100):
        steps = llr[rng.choice(len(probs), size=(min(100, runs - start), span), p=probs)]
        total = np.cumsum(steps, axis=1)
        value = total - np.minimum.accumulate(np.minimum(total, 0.0), axis=1)
        crossed = value > threshold
        first = np.where(crossed.any(axis=1), crossed.argmax(axis=1) + 1, np.inf)
        found.append(first)
    return np.concatenate(found)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial share k / n: the share of streams with a false
    alarm, whose target (at most 5%) is judged by the upper end."""

    def tail(p: float, at_least: int) -> float:  # P(X >= at_least) for X ~ Binomial(n, p)
        return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(at_least, n + 1))

    def solve(goal: float, at_least: int) -> float:  # the p whose tail is `goal` (the tail grows with p)
        low, high = 0.0, 1.0
        for _ in range(50):
            mid = (low + high) / 2
            low, high = (mid, high) if tail(mid, at_least) < goal else (low, mid)
        return (low + high) / 2

    alpha = (1 - confidence) / 2
    lower = 0.0 if k == 0 else solve(alpha, k)
    upper = 1.0 if k == n else 1 - solve(alpha, n - k)  # by symmetry: the failures' lower end
    return lower, upper


def summary(delays: list[int | None], after: int, limit: int | None) -> dict[str, Any]:
    ordered = sorted(math.inf if d is None else d for d in delays)

    def at(share: float) -> int | None:
        value = ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]
        return None if math.isinf(value) else int(value)

    return {"median": at(0.5), "p90": at(0.9), "missed": sum(d is None for d in delays) / len(delays),
            "limit": limit, "horizon": after}  # fmt: skip


def report(
    results: list[dict[str, dict[str, Any]]], pool: dict[bool, list[Answer]], after: int, run: dict[str, Any]
) -> dict:
    bounds = cusum_limits(pool, after) if after else {}
    variants = {}
    for judge in run["judges"]:
        for kind in run["kinds"]:
            name = f"{kind}_{judge}"
            got = [r[name] for r in results]
            healthy = sum(g["healthy"] for g in got)
            alarmed = sum(g["healthy"] > 0 for g in got)
            by: dict[str, int] = {}
            for g in got:
                for test, n in g["by"].items():
                    by[test] = by.get(test, 0) + n
            variant: dict[str, Any] = {
                "false_alarms_per_10k": round(healthy / (len(got) * HEALTHY) * 10_000, 2),
                "streams_with_false_alarms": alarmed / len(got),
                "streams_with_false_alarms_95ci": [round(x, 4) for x in clopper_pearson(alarmed, len(got))],
                "false_alarms_by_test": by,
            }
            for rate in STEPS if after else ():
                step = f"step_{round(rate * 100)}"
                variant[step] = summary([g.get(step) for g in got], after, bounds[judge][step])
            variants[name] = variant
    return variants


def load(path: Path, half: str) -> tuple[dict[bool, list[Answer]], str]:
    if not path.is_file():
        raise SystemExit(f"{path}: no such file")
    try:
        rows, skipped = asyncio.run(score_all(path))
    except UnicodeDecodeError as exc:
        raise SystemExit(f"{path}: not UTF-8 text, not a JSONL file of labelled answers ({exc})") from exc
    if not rows:
        raise SystemExit(
            f"{path}: no usable record ({skipped} lines skipped): each line must be a JSON object with "
            "query, contexts (a list of strings), answer and label (faithful / hallucinated)"
        )
    chosen = rows if half == "all" else [r for r in rows if r.half == int(half)]
    note = f"{len(chosen)} records of half {half}" if half != "all" else f"all {len(rows)} records"
    if {r.hallucinated for r in chosen} != {True, False}:
        chosen, note = rows, f"half {half} lacks a label: all {len(rows)} records"
    pool: dict[bool, list[Answer]] = {True: [], False: []}
    for row in chosen:
        result = row.offline[0]
        if result.score is None:
            continue  # the judge failed on it: not an answer a route would be scored on
        pool[row.hallucinated].append(Answer(row.hallucinated, result.score, result.label))
    return pool, f"{note} ({skipped} lines skipped)"


def judge_of(rates: str) -> tuple[dict[bool, list[Answer]], str]:
    """A judge that passes the given shares of faithful and hallucinated answers: each class's pool holds
    exactly that share of passing answers (drawn with replacement, so the stream's pass rates are exact)."""
    try:
        faithful, hallucinated = (float(x) for x in rates.split(","))
    except ValueError:
        raise SystemExit(f"--pass-rates {rates!r}: two shares, FAITHFUL,HALLUCINATED (0.45,0.30)") from None
    if not (0 <= faithful <= 1 and 0 <= hallucinated <= 1):
        raise SystemExit(f"--pass-rates {rates!r}: each share within 0..1")
    pool: dict[bool, list[Answer]] = {}
    for hallucinated_class, rate in ((False, faithful), (True, hallucinated)):
        passing = round(rate * _SIMULATED)
        pool[hallucinated_class] = [
            Answer(hallucinated_class, 1.0, "faithful") if i < passing
            else Answer(hallucinated_class, 0.0, "hallucinated")
            for i in range(_SIMULATED)
        ]  # fmt: skip
    return pool, f"simulated judge passing {faithful:g} of faithful, {hallucinated:g} of hallucinated answers"


_SIMULATED = 10_000  # answers per class of a simulated judge: its pass rates exact to 1e-4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, nargs="?", help="labelled JSONL (or --pass-rates)")
    parser.add_argument(
        "--pass-rates",
        metavar="FAITHFUL,HALLUCINATED",
        help="no file: a judge passing these shares of faithful and of hallucinated answers",
    )
    parser.add_argument("--json", action="store_true", help="only the JSON line (and notes on stderr)")
    parser.add_argument("--streams", type=int, default=100, help="streams per step (default 100)")
    parser.add_argument("--after", type=int, default=10_000, help="answers after the step at most")
    parser.add_argument("--measure-half", default="1", choices=("0", "1", "all"))
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--drop", action="append", default=[], metavar="KEY=VALUE", help="drop setting")
    parser.add_argument("--judges", default=",".join(JUDGES), help="of offline,llm_baseline (choosing: one)")
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"of {','.join(KINDS + DEFAULTS)} (default: the first two)"
    )
    args = parser.parse_args()
    started = time.monotonic()
    try:
        drop = {k: json.loads(v) for k, v in (item.split("=", 1) for item in args.drop)}
    except ValueError as exc:
        parser.error(f"--drop takes KEY=VALUE with a JSON value (min_drop=0.02, critical_drop=null): {exc}")
    run = {"judges": tuple(args.judges.split(",")), "kinds": tuple(args.kinds.split(","))}
    known_kinds = set(KINDS + DEFAULTS)
    if not set(run["judges"]) <= set(JUDGES) or not set(run["kinds"]) <= known_kinds or not all(run.values()):
        parser.error(f"--judges: some of {','.join(JUDGES)}; --kinds: some of {','.join(KINDS + DEFAULTS)}")
    try:
        config = rule(drop, run["kinds"])
    except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
        parser.error(f"--drop: {' '.join(str(exc).split())}")
    if (args.path is None) == (args.pass_rates is None):
        parser.error("give a labelled JSONL file or --pass-rates FAITHFUL,HALLUCINATED (one of them)")
    if args.pass_rates is not None:
        pool, note = judge_of(args.pass_rates)
        name = f"pass-rates {args.pass_rates}"
    else:
        pool, note = load(args.path, args.measure_half)
        name = args.path.name
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    say(f"# {name}: {note}; {len(pool[False])} faithful, {len(pool[True])} hallucinated")
    if not pool[True] or not pool[False]:
        message = "the file has one label only: no stream with 5% hallucinated answers can be built"
        say(message)
        unknown = {"median": None, "p90": None, "missed": None, "limit": None}
        empty = {"false_alarms_per_10k": None, "step_15": unknown, "step_30": unknown}
        print(json.dumps({"variants": {f"{k}_{j}": empty for j in JUDGES for k in KINDS}, "error": message}))
        return
    jobs = [(args.seed * 100_000 + s, args.after, s) for s in range(args.streams)]
    with ProcessPoolExecutor(args.workers, initializer=_init, initargs=(pool, config, run)) as workers:
        results = list(workers.map(stream, jobs, chunksize=max(1, len(jobs) // (4 * args.workers))))
    variants = report(results, pool, args.after, run)
    if not args.json:
        table(variants, args, drop)
    cpu = sum(resource.getrusage(who).ru_utime for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    wall = time.monotonic() - started
    say(
        f"{wall:.0f} s on {args.workers} workers, {cpu:.0f} s of CPU (load changes the first, not the second)"
    )
    print(json.dumps({"variants": variants, "file": name, "records": note, "drop": drop}))


def table(variants: dict[str, Any], args: argparse.Namespace, drop: dict[str, Any]) -> None:
    print(f"\n{args.streams} streams, healthy week then steps; drop settings {drop or 'shipped'}\n")
    print("| variant | false alarms / 10k (streams with any) | 5->15%: median / p90 / missed / limit "
          "| 5->30%: median / p90 / missed / limit |")  # fmt: skip
    print("|---|---|---|---|")
    for name, v in variants.items():
        cells = [
            f"{s['median'] or 'never'} / {s['p90'] or 'never'} / {s['missed']:.0%} / {s['limit']}"
            if s
            else "(not run: --after 0)"
            for s in (v.get("step_15"), v.get("step_30"))
        ]
        low, high = v["streams_with_false_alarms_95ci"]
        alarms = (
            f"{v['false_alarms_per_10k']} ({v['streams_with_false_alarms']:.1%}, 95% CI {low:.1%}-{high:.1%}"
            f"{''.join(f'; {test} {n}' for test, n in v['false_alarms_by_test'].items())})"
        )
        print(f"| {name} | {alarms} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
