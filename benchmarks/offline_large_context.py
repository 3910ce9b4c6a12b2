"""Does the offline judge's time grow linearly with a record's context, up to megabytes?

    python benchmarks/offline_large_context.py [--trees OLD NEW] [--sizes 50000 500000 2000000 5000000]

Scores one record with the three default metrics (`evaluate`, the offline judge) as its context grows, two
kinds of context: repetitive (one sentence repeated; the per-block cache serves most of it) and distinct
(every sentence new), each one line without newlines (as a trace's assembled context can be). The judge's
`max_context_chars` is lifted so that the whole context is read: what is measured is the judge's own
growth. Each figure is the fastest of `--repeat` records, each in a fresh process (the per-block cache
starts empty). The machine is
shared and noisy, so the figures that mean something are ratios within one run: each size's time over the
smallest size's (linear growth: the ratio of the sizes) and, with `--trees`, NEW over OLD, the trees run
alternately. A tree without the setting is measured as it is (it had no cap). A last row times the largest
record with the shipped default cap, which bounds it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

QUESTION = "When was the river bridge built?"
ANSWER = "The river bridge was built in 1887 by Company7. It stands near Harbor7."
_WORDS = (
    "alpha beta gamma delta river stone market harbor council garden engine castle valley school letter "
    "winter summer forest bridge island"
).split()
_REPEATED = "The Oberoi Group is a hotel company with its head office in Delhi. "
UNCAPPED = 10**10


def context(kind: str, chars: int) -> str:
    """`chars` characters of one line: one sentence repeated, or every sentence distinct (seeded)."""
    if kind == "repetitive":
        return (_REPEATED * (chars // len(_REPEATED) + 1))[:chars]
    pick = random.Random(7).choice
    out, size, i = [], 0, 0
    while size < chars:
        sentence = (
            f"The {pick(_WORDS)} {pick(_WORDS)} number {i} was built in {1000 + i % 1000} by Company{i} "
            f"near {pick(_WORDS).title()}{i % 977}. "
        )
        out.append(sentence)
        size += len(sentence)
        i += 1
    return "".join(out)[:chars]


def one(kind: str, chars: int, capped: bool) -> float:
    """Seconds to score one record, in this process (run by `main` in a fresh one per figure)."""
    from tracescore.model import RagRecord
    from tracescore.score import evaluate
    from tracescore.score.judges import OfflineJudge

    try:
        from tracescore.score.judges import OfflineJudgeSettings
    except ImportError:  # a tree before the setting: it reads every context whole
        judge = OfflineJudge()
    else:
        judge = OfflineJudge(settings=None if capped else OfflineJudgeSettings(max_context_chars=UNCAPPED))
    record = RagRecord(query=QUESTION, contexts=(context(kind, chars),), answer=ANSWER)
    start = time.perf_counter()
    results = evaluate(record, judge=judge)
    elapsed = time.perf_counter() - start
    assert all(r.status.value == "ok" for r in results), [(r.metric, r.reason) for r in results]
    return elapsed


def _timed(tree: str, kind: str, chars: int, capped: bool) -> float:
    """Seconds to score one record in a fresh process importing `tree`."""
    env = {**os.environ, "PYTHONPATH": tree}
    args = [sys.executable, __file__, "--one", kind, str(chars)] + (["--capped"] if capped else [])
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True, cwd=tree)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trees", nargs="+", default=[os.getcwd()], help="source trees, run alternately")
    parser.add_argument("--sizes", nargs="+", type=int, default=[50_000, 500_000, 2_000_000, 5_000_000])
    parser.add_argument("--repeat", type=int, default=2, help="processes per figure; the fastest counts")
    parser.add_argument("--one", nargs=2, metavar=("KIND", "CHARS"), help=argparse.SUPPRESS)
    parser.add_argument("--capped", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps({"seconds": one(args.one[0], int(args.one[1]), args.capped)}))
        return 0
    trees = [os.path.abspath(t) for t in args.trees]
    names = [f"tree{i}" for i in range(len(trees))]
    for name, tree in zip(names, trees, strict=True):
        print(f"{name}: {tree}")
    base = args.sizes[0]
    for kind in ("repetitive", "distinct"):
        seconds: dict[tuple[str, int], float] = {}
        for chars in args.sizes:
            for name, tree in zip(names, trees, strict=True):  # alternately, size by size
                seconds[name, chars] = min(_timed(tree, kind, chars, False) for _ in range(args.repeat))
        print(f"\n{kind} context, time / time at {base:,} chars (size ratio in brackets)")
        header = "  chars      " + "".join(f"{n:>10}" for n in names)
        print(header + ("   last/first" if len(names) > 1 else ""))
        for chars in args.sizes:
            ratios = "".join(f"{seconds[n, chars] / seconds[n, base]:>10.1f}" for n in names)
            last_first = seconds[names[-1], chars] / seconds[names[0], chars]
            versus = f"{last_first:>12.2f}" if len(names) > 1 else ""
            print(f"  {chars:>9,} [{chars / base:>4.0f}]{ratios}{versus}")
        largest = args.sizes[-1]
        capped = _timed(trees[-1], kind, largest, capped=True)
        print(
            f"  {largest:,} chars with the default cap ({names[-1]}): "
            f"{capped / seconds[names[-1], base]:.1f} x the {base:,}-char record, uncapped"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
