"""The unsampled path's reading on hot memory against cold, in process, the same messages (issue 33 item 2).

    python benchmarks/reading_hot_cold.py [--traces 20000] [--rounds 5] [--layout per_partition] [--batch 20]

The consumer reads a trace a grace period after its root arrived: by then ~80 MB of other decoded spans came
after it (the whole topic, in `unsampled_floor.py`'s run), so its span, attribute dict and strings are read
from memory, not the CPU's caches. This measures what reading each trace at once would save, at best:

- `cold`: as the consumer does, `Pipeline.take` per batch of `--batch` messages, the traces read once their
  grace is over (every one after the last message);
- `hot`: the same, but the clock moved a grace period after each batch, so each batch's traces are released
  and read right after they were decoded.

The late-span memory keeps every released trace's spans either way, so `hot` holds what reading at once and
confirming at the grace's end would hold, without the confirmation's cost. Each round is a fresh process
pinned to one core that runs the two modes loop by loop in turn (which goes first alternates by round), so a
change in the machine's load falls on both, with the consumer's policy at rate 0 and its collector threshold;
CPU time per stage (`time.thread_time`, the collector's passes apart through `gc.callbacks`), best of 3 loops
of each after one unmeasured, in µs a span. `take`: decode and assembly (`Pipeline.take`); `release`:
`TraceAssembler.ready`; `read`: recognising, revising and screening (`Pipeline.extract_and_admit`).
"""

from __future__ import annotations

import argparse
import ast
import gc
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from collections import namedtuple
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import trace_assembly  # noqa: E402  (sibling scripts, not a package)

from tracescore.consume import ConsumerSettings, ConsumerStats, TraceAssembler  # noqa: E402
from tracescore.consume._pipeline import Pipeline  # noqa: E402
from tracescore.consume._shared_policy import SharedPolicy  # noqa: E402
from tracescore.sample import CascadePolicy, SamplingConfig  # noqa: E402

MODES = ("cold", "hot")
STAGES = ("take", "release", "read", "gc")
T = TypeVar("T")
Record = namedtuple("Record", "topic partition offset value headers")  # what Pipeline.take reads


def records(layout: str, traces: int) -> list[Record]:
    offsets: dict[int, int] = {}
    out = []
    for partition, key, value in trace_assembly.build_tracescore_messages(traces, layout):
        chosen = partition if partition is not None else hash(key) % len(trace_assembly.PARTITIONS)
        offsets[chosen] = offsets.get(chosen, -1) + 1
        out.append(Record("spans", chosen, offsets[chosen], value, []))
    out.sort(key=lambda r: (r.partition, r.offset))  # a poll's messages come by partition
    return out


def loop(batches: list[list[Record]], hot: bool) -> dict[str, float]:
    """One pass over every message: CPU seconds per stage, and the spans read."""
    settings = ConsumerSettings()
    grace = settings.assembly.grace_s
    now = [0.0]
    stats = ConsumerStats()
    policy = SharedPolicy(CascadePolicy(SamplingConfig(default_rate=0.0), metrics=["faithfulness"]))
    pipeline = Pipeline(TraceAssembler(settings.assembly, clock=lambda: now[0]), stats, policy=policy)
    spent = dict.fromkeys(STAGES, 0.0)
    started = [0.0]

    def collected(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.thread_time()
        else:
            spent["gc"] += time.thread_time() - started[0]

    def timed(stage: str, step: Callable[[], T]) -> T:
        before, in_gc = time.thread_time(), spent["gc"]
        out = step()
        spent[stage] += time.thread_time() - before - (spent["gc"] - in_gc)
        return out

    def ready() -> None:  # Pipeline.ready, its two steps timed apart
        released = timed("release", pipeline.assembler.ready)
        timed("read", lambda: pipeline.extract_and_admit(released))

    saved = gc.get_threshold()
    gc.set_threshold(settings.gc_gen0_threshold, *saved[1:])
    gc.callbacks.append(collected)
    try:
        for batch in batches:
            timed("take", lambda batch=batch: pipeline.take(batch))
            now[0] += grace if hot else 0.01  # hot: this batch's traces are due at once
            if hot:
                ready()
        now[0] += grace + 1.0
        ready()
    finally:
        gc.callbacks.remove(collected)
        gc.set_threshold(*saved)
    return {**spent, "spans": stats.spans, "traces": stats.traces}


def child(path: str, batch: int, first: str) -> None:
    """Both modes in one process, loop by loop in turn (`first` first), so a change in the machine's load
    falls on both: the best of 3 loops of each per stage, after one unmeasured loop of each."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    with open(path, "rb") as f:
        messages: list[Record] = pickle.load(f)
    batches = [messages[i : i + batch] for i in range(0, len(messages), batch)]
    order = (first, *(m for m in MODES if m != first))
    best = {mode: dict.fromkeys(STAGES, float("inf")) for mode in MODES}
    traces = {}
    for number in range(4):  # the first: imports, caches, the interpreter's specialisations
        for mode in order if number % 2 == 0 else order[::-1]:
            got = loop(batches, mode == "hot")
            gc.collect()  # the previous loop's buffer gone before the next starts
            traces[mode] = got["traces"]
            if number:
                for stage in STAGES:
                    best[mode][stage] = min(best[mode][stage], got[stage] / got["spans"] * 1e6)
    print(repr({mode: {**best[mode], "traces": traces[mode]} for mode in MODES}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layout", choices=("per_trace", "per_partition"), default="per_partition")
    parser.add_argument("--batch", type=int, default=20, help="messages a Pipeline.take")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[1], args.batch, args.child[0])
        return
    print(f"building {args.traces} @tracescore.rag traces through the SDK ({args.layout}) ...", flush=True)
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "records.pkl")
        with open(path, "wb") as f:
            pickle.dump(records(args.layout, args.traces), f)
        for number in range(args.rounds):
            first = MODES[number % 2]  # who goes first alternates
            command = [sys.executable, __file__, "--batch", str(args.batch), "--child", first, path]
            got = subprocess.run(command, capture_output=True, text=True, check=True)
            both = ast.literal_eval(got.stdout.strip().splitlines()[-1])
            for mode in MODES:
                if both[mode]["traces"] != args.traces:
                    raise RuntimeError(f"{mode} read {both[mode]['traces']} of {args.traces} traces")
                results[mode].append(both[mode])
            print(f"round {number + 1}: " + "; ".join(_row(results[m][-1], m) for m in MODES), flush=True)
    print(f"\nhot / cold, median of {args.rounds} rounds (min..max), µs a span: cold, hot")
    for stage in (*STAGES, "all"):
        cold = [_stage(r, stage) for r in results["cold"]]
        hot = [_stage(r, stage) for r in results["hot"]]
        ratios = [h / c for h, c in zip(hot, cold, strict=True) if c > 0]  # no collection: no ratio
        spread = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}..{max(ratios):.2f})" if ratios else "-"
        print(f"{stage:8s} {spread:18s} {statistics.median(cold):6.2f} {statistics.median(hot):6.2f}")


def _stage(result: dict[str, float], stage: str) -> float:
    return sum(result[s] for s in STAGES) if stage == "all" else result[stage]


def _row(result: dict[str, float], mode: str) -> str:
    return f"{mode} " + " ".join(f"{s} {_stage(result, s):.2f}" for s in (*STAGES, "all"))


if __name__ == "__main__":
    main()
