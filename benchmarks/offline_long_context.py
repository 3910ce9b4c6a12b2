"""How long does the offline judge take on a long context? (Formerly a wall-clock assert in the tests.)

    python benchmarks/offline_long_context.py [--chars N] [--repeat R]

Builds a context of N characters (default 100,000) of filler sentences with one needle sentence in the
middle, asks the offline judge for verdicts on a supported and an unsupported claim about the needle, and
prints the median and worst time over R runs. The verdicts are checked too, so a fast wrong answer fails.
The tests check the verdicts only; the time is measured here, where a slow machine is not a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from tracescore.model import Verdict
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics._faithfulness import VERDICTS_TASK, VerdictsInput

NEEDLE = "The bridge over the river was completed in 1887."


def long_context(chars: int) -> str:
    filler: list[str] = []
    while sum(len(s) + 1 for s in filler) < chars:
        i = len(filler)
        filler.append(f"Report {i} covers the weather in region {i} during the spring season.")
    middle = len(filler) // 2
    return " ".join([*filler[:middle], NEEDLE, *filler[middle:]])[:chars]


async def one_run(context: str) -> float:
    data = VerdictsInput(
        question="When was the bridge over the river completed?",
        context=context,
        claims=["The bridge was completed in 1887.", "The bridge was completed in 1901."],
    )
    started = time.perf_counter()
    judgement = await OfflineJudge().run(VERDICTS_TASK, data)
    elapsed = time.perf_counter() - started
    verdicts = [v.verdict for v in judgement.output.verdicts]
    if verdicts != [Verdict.FULLY_SUPPORTED, Verdict.NO_EVIDENCE]:
        raise SystemExit(f"wrong verdicts on a {len(context):,}-character context: {verdicts}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    context = long_context(args.chars)
    if NEEDLE not in context:
        raise SystemExit(f"--chars {args.chars} is too short to hold the needle")
    times = [asyncio.run(one_run(context)) for _ in range(args.repeat)]
    print(
        f"offline judge, {len(context):,}-character context, {args.repeat} runs: "
        f"median {statistics.median(times):.3f}s, worst {max(times):.3f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
