"""What one route costs `tracescore alert` in memory under the default rule, against an earlier tree in the
same run.

    python benchmarks/alert_memory.py [--cases 20x100,20x1100,300x1100,10x10000] [--llm-share 0.0]
        [--against DIR]   # git -C <repo> archive <commit> tracescore | tar -x -C DIR

Each case is ROUTESxANSWERS: an `AlertEvaluator` of `default_rule()` fed, route after route, ANSWERS offline
records each (`add`, then `evaluate`, as the service does), ten seconds apart, four in five faithful. With
`--llm-share`, that share of the answers also gets the LLM judge's baseline record (π = 0.05) after 60 more
answers of its route: a late record of an answer the drop part counted already, which replaces its first
count (and a pair the estimate keeps).

Every measurement is a process of its own (`--child`), importing the tree under test first on its path: the
bytes tracemalloc sees held once the routes are fed, per route; and, in another process without tracemalloc,
the growth of the peak resident set over the feeding (the allocator's pages included), per route, and the
feeding's CPU time (a ratio old/new only means something from one run on a quiet machine). With
`--against`, the earlier tree is measured the same way, case by case, alternately with this one. The last
line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LATE_AFTER = 60  # answers of its route before an answer's LLM record is read (beyond the rule's window, 50)
BASELINE_PI = 0.05


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def _feed(routes: int, answers: int, llm_share: float) -> Any:
    """The evaluator, fed (imported here: the child's tree is first on its path)."""
    from tracescore.alert import AlertConfig, AlertEvaluator, default_rule
    from tracescore.model import EvaluationRecord, MetricStatus

    evaluator = AlertEvaluator(AlertConfig(rules=[default_rule()]))
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for route in range(routes):
        late: dict[int, EvaluationRecord] = {}
        for i in range(answers + LATE_AFTER):
            at = start + timedelta(seconds=10 * i)
            records = []
            if i < answers:
                score = 0.9 if rng.random() < 0.8 else 0.2
                offline = EvaluationRecord(
                    trace_id=f"{route:08x}{i:024x}", span_id=f"{i:016x}", service_name="rag-api",
                    route=f"/r{route}", metric="faithfulness", score=score,
                    label="faithful" if score >= 0.5 else "hallucinated", status=MetricStatus.OK,
                    judge="offline", annotator_kind="CODE", timestamp=at,
                )  # fmt: skip
                records.append(offline)
                if rng.random() < llm_share:
                    late[i + LATE_AFTER] = offline
            if (answered := late.pop(i, None)) is not None:
                score = 0.9 if rng.random() < 0.85 else 0.1
                records.append(
                    answered.model_copy(
                        update={
                            "score": score, "label": "faithful" if score >= 0.5 else "hallucinated",
                            "judge": "openai:gpt-4o-mini", "annotator_kind": "LLM", "selection": "baseline",
                            "inclusion_probability": BASELINE_PI, "offline_score": answered.score,
                            "offline_label": answered.label, "timestamp": at,
                        }
                    )
                )  # fmt: skip
            for record in records:
                key = evaluator.add(record)
                assert key is not None
                evaluator.evaluate(key, at)
    return evaluator


def child(args: argparse.Namespace) -> dict[str, Any]:
    import tracescore

    tree = Path(tracescore.__file__).resolve().parents[1]
    assert tree == Path(args.tree).resolve(), f"imported {tree}, not {args.tree}"
    _feed(1, 10, 0.0)  # the imports and caches every route shares, before the baseline
    if args.child == "traced":
        tracemalloc.start()
        evaluator = _feed(args.routes, args.answers, args.llm_share)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        per_route = held / args.routes
        cpu = None
    else:
        before, started = _rss_bytes(), time.process_time()
        evaluator = _feed(args.routes, args.answers, args.llm_share)
        cpu = time.process_time() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        per_route = (peak - before) / args.routes
    assert len(evaluator._routes) == args.routes
    return {"bytes_per_route": round(per_route), "cpu_s": cpu}


def measure(tree: Path, mode: str, routes: int, answers: int, llm_share: float) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", mode, "--tree", str(tree)]
    command += ["--routes", str(routes), "--answers", str(answers), "--llm-share", str(llm_share)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="20x100,20x1100,300x1100,10x10000", help="ROUTESxANSWERS,...")
    parser.add_argument("--llm-share", type=float, default=0.0)
    parser.add_argument("--modes", default="traced,rss", help="tracemalloc's; the RSS's growth")
    parser.add_argument("--against", type=Path, default=None, help="an earlier tree (its tracescore/ inside)")
    parser.add_argument("--child", choices=["traced", "rss"], help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    parser.add_argument("--routes", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--answers", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return 0
    trees = {"new": REPO} if args.against is None else {"old": args.against.resolve(), "new": REPO}
    rows = []
    for case in args.cases.split(","):
        routes, answers = (int(part) for part in case.split("x"))
        row: dict[str, Any] = {"routes": routes, "answers": answers, "llm_share": args.llm_share}
        for mode in args.modes.split(","):
            for name, tree in trees.items():  # alternately, case by case
                got = measure(tree, mode, routes, answers, args.llm_share)
                row[f"{name}_{mode}_mb"] = round(got["bytes_per_route"] / 1e6, 3)
                if got["cpu_s"] is not None:  # the feeding's CPU time (add + evaluate), without tracemalloc
                    row[f"{name}_cpu_s"] = round(got["cpu_s"], 2)
        for mode in args.modes.split(",") if "old" in trees else ():
            row[f"{mode}_ratio"] = round(row[f"new_{mode}_mb"] / row[f"old_{mode}_mb"], 3)
        if "old_cpu_s" in row:
            row["cpu_ratio"] = round(row["new_cpu_s"] / row["old_cpu_s"], 3)
        print(
            f"{routes} routes x {answers:,} answers: "
            + ", ".join(f"{k} {v}" for k, v in row.items() if k.endswith(("_mb", "_s", "ratio"))),
            flush=True,
        )
        rows.append(row)
    print(json.dumps({"cases": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
