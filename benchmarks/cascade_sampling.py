"""How many hallucinated answers reach the LLM judge when only B% of spans may go to it?

    python benchmarks/cascade_sampling.py [PATH] [--spans N] [--streams R] [--budgets 2,5,10,20]

Honest split: the labelled dev set's questions are split by index (even: calibration, odd: measurement).
The cascade threshold is chosen on the calibration half only: the one catching the most hallucinations
while the spans it escalates (on a 5% hallucination stream) plus the baseline fit in 10%. The curve is
measured on the other half: R streams of N spans drawn from its records (5% hallucinated answers, random
trace ids, spread over one UTC hour), each run through CascadePolicy exactly as the consumer does (admit,
offline Faithfulness + OfflineJudge via `evaluate`, escalate, charge) with an LLM token budget of B% of the
stream's spans for that hour. Uniform sampling is measured on the same streams (a trace-id hash at B%).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from tracescore._rag_span import DecodedSpan, RagSpan
from tracescore.sample import CascadeConfig, CascadePolicy, SamplingConfig, suspicion
from tracescore.sample._hashing import keep
from tracescore.score._types import MetricResult, RagRecord
from tracescore.score.judges._offline import OfflineJudge
from tracescore.score.metrics import Faithfulness, evaluate

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
HALLUCINATION_RATE = 0.05
TARGET_BUDGET = 0.10
TOKENS_PER_LLM_EVALUATION = 1_500  # any fixed figure: budgets are set in evaluations' worth of tokens
HOUR_START = 1_700_000_000 // 3600 * 3600  # a UTC hour boundary


@dataclass(frozen=True)
class Scored:
    record: RagRecord
    question: int
    hallucinated: bool
    offline: list[MetricResult]


async def score_all(path: Path) -> list[Scored]:
    judge, metrics = OfflineJudge(), [Faithfulness()]
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        record = RagRecord(
            id=raw["id"], query=raw["query"], contexts=tuple(raw["contexts"]), answer=raw["answer"]
        )
        question = int(raw["id"].split("-")[2])  # halueval-qa-<question>-<grounded|hallucinated>
        offline = await evaluate(record, metrics, judge)
        rows.append(Scored(record, question, raw["label"] == "hallucinated", offline))
    return rows


def calibrate(rows: list[Scored], baseline: float) -> tuple[float, float, float]:
    """(threshold, hallucinations caught, expected escalated share) chosen on `rows`."""
    best: tuple[float, float, float] | None = None
    # Highest first: on a tie the higher threshold wins, catching more on data with in-between scores.
    for threshold in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1):
        cascade = CascadeConfig(threshold=threshold)
        flagged = [suspicion(r.offline, cascade) is not None for r in rows]
        caught = _mean(f for f, r in zip(flagged, rows, strict=True) if r.hallucinated)
        false_alarms = _mean(f for f, r in zip(flagged, rows, strict=True) if not r.hallucinated)
        share = HALLUCINATION_RATE * caught + (1 - HALLUCINATION_RATE) * false_alarms
        fits = share * (1 - baseline) + baseline <= TARGET_BUDGET
        # Most caught; on a tie, fewest escalated (the budget then lasts longer).
        if fits and (best is None or (caught, -share) > (best[1], -best[2])):
            best = (threshold, caught, share)
    if best is None:
        sys.exit("no threshold fits the target budget on the calibration half")
    return best


def stream(rows: list[Scored], spans: int, rng: random.Random) -> list[tuple[RagSpan, Scored]]:
    grounded = [r for r in rows if not r.hallucinated]
    hallucinated = [r for r in rows if r.hallucinated]
    out = []
    for i in range(spans):
        row = rng.choice(hallucinated if rng.random() < HALLUCINATION_RATE else grounded)
        span = DecodedSpan(
            trace_id=format(rng.getrandbits(128), "032x"),
            span_id=format(rng.getrandbits(64), "016x"),
            name="rag",
            service_name="rag-api",
            scope_name="tracescore",
            attributes={},
            end_time_unix_nano=(HOUR_START + i * 3600 // spans) * 10**9,
        )
        out.append((RagSpan(span=span, record=row.record, route="/ask"), row))
    return out


@dataclass
class Run:
    recall: float
    uniform_recall: float
    llm_share: float
    baseline: int
    cascade: int
    budget_skips: int


def run(spans: list[tuple[RagSpan, Scored]], budget: float, config: SamplingConfig) -> Run:
    now = [float(HOUR_START)]
    tokens = round(budget * len(spans)) * TOKENS_PER_LLM_EVALUATION
    config = config.model_copy(
        update={
            "llm_budget": config.llm_budget.model_copy(
                update={
                    "tokens_per_hour": tokens,
                    "estimated_tokens_per_evaluation": TOKENS_PER_LLM_EVALUATION,
                }
            )
        }
    )
    policy = CascadePolicy(config, metrics=("faithfulness",), clock=lambda: now[0])
    reached = uniform = escalated = hallucinated = 0
    for interaction, row in spans:
        now[0] = interaction.span.end_time_unix_nano / 1e9
        decision = policy.admit(interaction)
        assert decision.sampled, decision
        escalation = policy.escalate(interaction, row.offline)
        if escalation.to_llm:
            escalated += 1
            policy.charge(TOKENS_PER_LLM_EVALUATION, reserved=escalation.reserved_tokens)
        if row.hallucinated:
            hallucinated += 1
            reached += escalation.to_llm
            uniform += keep(interaction.span.trace_id, "uniform", budget)
    return Run(
        recall=reached / max(1, hallucinated),
        uniform_recall=uniform / max(1, hallucinated),
        llm_share=escalated / len(spans),
        baseline=policy.selections["baseline"],
        cascade=policy.selections["cascade"],
        budget_skips=policy.skips["budget"],
    )


def _mean(values: object) -> float:
    items = list(values)  # type: ignore[call-overload]
    return sum(items) / max(1, len(items))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--spans", type=int, default=4000, help="spans per stream (default 4000)")
    parser.add_argument("--streams", type=int, default=20, help="streams per budget (default 20)")
    parser.add_argument("--budgets", default="2,5,10,20", help="LLM budgets in %% of spans")
    args = parser.parse_args()

    rows = asyncio.run(score_all(args.path))
    calibration = [r for r in rows if r.question % 2 == 0]
    measurement = [r for r in rows if r.question % 2 == 1]
    baseline = SamplingConfig().cascade.baseline_rate
    threshold, caught, share = calibrate(calibration, baseline)
    print(
        f"calibration half ({len(calibration)} records, even questions): threshold {threshold:g} catches "
        f"{caught:.1%} of hallucinations, escalates {share:.1%} of a 5% stream (+ baseline {baseline:.0%})"
    )
    print(
        f"measured on the other half ({len(measurement)} records, odd questions), {args.streams} streams of "
        f"{args.spans} spans, {HALLUCINATION_RATE:.0%} hallucinated\n"
    )
    config = SamplingConfig().model_copy(update={"cascade": CascadeConfig(threshold=threshold)})
    print(
        "| LLM budget | hallucinations reaching the LLM judge: cascade | uniform sampling, same streams "
        "| spans sent to the LLM judge | of which baseline | suspicious spans stopped by the budget |"
    )
    print("|---|---|---|---|---|---|")
    for percent in (float(b) for b in args.budgets.split(",")):
        runs = [
            run(stream(measurement, args.spans, random.Random(seed)), percent / 100, config)
            for seed in range(args.streams)
        ]
        recalls = [r.recall for r in runs]
        spread = f"streams: {min(recalls):.0%}-{max(recalls):.0%}"
        print(
            f"| {percent:g}% | **{statistics.mean(recalls):.1%}** ({spread}) "
            f"| {statistics.mean(r.uniform_recall for r in runs):.1%} "
            f"| {statistics.mean(r.llm_share for r in runs):.2%} "
            f"| {statistics.mean(r.baseline for r in runs) / args.spans:.2%} "
            f"| {statistics.mean(r.budget_skips for r in runs):.0f} |"
        )


if __name__ == "__main__":
    main()
