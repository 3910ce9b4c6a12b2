"""The unsampled path (decode + assemble + extract: `trace_assembly.in_process`) of this checkout against
another revision's, in one run: rounds alternate the two trees in fresh processes on the same messages, so
load from elsewhere on the machine falls on both. Prints CPU spans/s per shape and the ratio this / other.

    python benchmarks/unsampled_against.py REV [--traces 5000] [--rounds 9]

Shapes: `trace_assembly`'s OpenInference traces (CHAIN -> RETRIEVER, EMBEDDING, PROMPT, LLM) and its
`@tracescore.rag` spans in the SDK's per-partition layout, and every recorded fixture
(`tests/extract/fixtures`, one message per trace: every convention's recogniser) repeated 20 times. The other
revision's `tracescore/` and `benchmarks/` are exported with `git archive` to a temporary folder (no
worktree); each child process is pinned to one core where the OS allows it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "extract" / "fixtures"
# Run in each tree: its own trace_assembly.in_process over the shared messages; prints {shape: spans/CPU-s}.
CHILD = """
import os, pickle, sys
tree, messages = sys.argv[1], sys.argv[2]
sys.path[:0] = [tree, os.path.join(tree, "benchmarks")]
if hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {0})
import tracescore, trace_assembly
from tracescore.consume import AssemblySettings
assert tracescore.__file__.startswith(tree), tracescore.__file__
shapes = pickle.load(open(messages, "rb"))
rates = {}
for shape, batch in shapes.items():
    trace_assembly.in_process(batch[:200], AssemblySettings(grace_s=0))  # warm up
    rates[shape] = trace_assembly.in_process(batch, AssemblySettings(grace_s=0))[1]
print(repr(rates))
"""


def build(traces: int) -> dict[str, list[tuple[int | None, bytes | None, bytes]]]:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import trace_assembly

    fixtures = [
        (None, None, (manifest.parent / name).read_bytes())
        for manifest in sorted(FIXTURES.glob("*/manifest.json"))
        for name in json.loads(manifest.read_text(encoding="utf-8"))["scenarios"]
    ]
    return {
        "openinference": trace_assembly.build_messages(traces, 5),
        "tracescore per_partition": trace_assembly.build_tracescore_messages(traces, "per_partition"),
        "recorded fixtures x20": fixtures * 20,
    }


def export(revision: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", revision, "tracescore", "benchmarks"], cwd=REPO, capture_output=True, check=True
    ).stdout
    into.mkdir()
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def rates(tree: Path, messages: Path) -> dict[str, float]:
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), str(messages)],
        capture_output=True,
        text=True,
        check=True,
        cwd=tempfile.gettempdir(),  # never this checkout's folder: each child imports its own tree
    )
    result: dict[str, float] = ast.literal_eval(child.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revision", help="the other revision (a commit, branch or tag)")
    parser.add_argument("--traces", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        other = export(args.revision, Path(folder) / "other")
        messages = Path(folder) / "messages.pickle"
        messages.write_bytes(pickle.dumps(build(args.traces)))
        runs: dict[str, list[dict[str, float]]] = {"this": [], "other": []}
        for number in range(args.rounds):
            order = ("this", "other") if number % 2 == 0 else ("other", "this")
            for label in order:
                runs[label].append(rates(REPO if label == "this" else other, messages))
    print(f"unsampled path, spans per CPU second, median of {args.rounds} alternating rounds")
    print(f"{'shape':26s} {args.revision[:12]:>12s} {'this':>12s}  this/other (per round)")
    for shape in runs["this"][0]:
        this = [run[shape] for run in runs["this"]]
        them = [run[shape] for run in runs["other"]]
        ratios = [a / b for a, b in zip(this, them, strict=True)]
        print(
            f"{shape:26s} {statistics.median(them):12,.0f} {statistics.median(this):12,.0f}  "
            f"{statistics.median(this) / statistics.median(them):.3f} ({min(ratios):.3f}..{max(ratios):.3f})"
        )
    if os.environ.get("PYTHONPATH"):
        print("(PYTHONPATH was set: each child puts its own tree first)")


if __name__ == "__main__":
    main()
