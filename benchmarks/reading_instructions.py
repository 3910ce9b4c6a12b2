"""Instructions a trace for each part of the unsampled path, counted by valgrind (issue 33 item 2).

    python benchmarks/reading_instructions.py [--traces 2000] [--layout per_partition] [--parts ...]
                                              [--against FOLDER]...

Time on this machine moves with the other engineers' load by more than a part costs; instructions do not.
The messages are `reading_hot_cold.py`'s (the SDK's `@tracescore.rag` spans, one span a trace), read in
process as the consumer reads them: `Pipeline.take` per 20 messages, `ready()` a grace period later, and
`extract_and_admit` with the policy at rate 0. Each part is a fresh process under `valgrind --tool=callgrind`
that counts only inside the part (`--toggle-collect` on `functools.reduce`, through which the part is called),
after one uncounted pass:

- `take`, `release`, `read`: the three stages, each counted once whole (`Pipeline.take`, `ready()`,
  `extract_and_admit`);
- `find`, `revise`, `screen`: extract's reading, the revision record and the policy's screen, per trace;
- `candidates`, `found`, and each step the tracescore reader runs (`step:<name>`): the reading's parts.

A part called per trace is counted through a wrapper whose own cost (`wrapper`: the same wrapper around a
no-op of two arguments) is taken off. `--against FOLDER`: the same parts of another tree (a folder holding its
`tracescore/`), in the same run. Needs valgrind; ~1-2 CPU minutes a part at 2,000 traces.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import pickle
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WRAPPED = 1_000  # calls of the wrapper counted alone
PER_CALL = ("find", "revise", "screen", "candidates", "found")
_COLLECTED = re.compile(r"Collected : (\d+)")


def child(part: str, path: str) -> None:
    """One part counted: `reduce` switches valgrind's collection on for what runs inside it."""
    import tracescore.consume._pipeline as pipeline_module
    import tracescore.extract._reader as reader_module
    from tracescore.consume import ConsumerSettings, ConsumerStats, TraceAssembler
    from tracescore.consume._shared_policy import SharedPolicy
    from tracescore.extract import DEFAULT_RECOGNIZERS
    from tracescore.sample import CascadePolicy, SamplingConfig

    with open(path, "rb") as f:
        messages = pickle.load(f)
    batches = [messages[i : i + 20] for i in range(0, len(messages), 20)]
    counting = [False]

    def counted(step: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if counting[0]:
                return functools.reduce(lambda _, __: step(*args), [0], None)
            return step(*args)

        return call

    if part == "wrapper":
        noop = counted(lambda a, b: None)
        counting[0] = True
        for _ in range(WRAPPED):
            noop(1, 2)
        return
    reader = DEFAULT_RECOGNIZERS[0]  # the tracescore reader: every trace here is one of its spans
    names = [step.name for step in reader_module.STEPS if step.applies(reader.convention)]
    if part == "find":
        pipeline_module.find = counted(pipeline_module.find)
    elif part == "candidates":
        reader.convention.candidates = counted(reader.convention.candidates)  # type: ignore[method-assign]
    elif part == "found":
        reader_module.found = counted(reader_module.found)
    elif part.startswith("step:"):
        steps = list(reader._steps)
        index = names.index(part[5:])
        steps[index] = counted(steps[index])
        reader._steps = tuple(steps)

    def one_pass(count: bool) -> None:
        now = [0.0]
        policy = SharedPolicy(CascadePolicy(SamplingConfig(default_rate=0.0), metrics=["faithfulness"]))
        assembler = TraceAssembler(ConsumerSettings().assembly, clock=lambda: now[0])
        pipeline = pipeline_module.Pipeline(assembler, ConsumerStats(), policy=policy)
        if part == "revise":
            assembler.revise = counted(assembler.revise)  # type: ignore[method-assign]
        if part == "screen":
            policy.screen = counted(policy.screen)  # type: ignore[method-assign]

        def stage(name: str, run: Callable[[], Any]) -> Any:
            if count and part == name:
                return functools.reduce(lambda _, __: run(), [0], None)
            return run()

        gc.disable()  # the collector's passes fall where they fall: not a part's
        stage("take", lambda: [pipeline.take(batch) for batch in batches])
        now[0] += 100.0
        released = stage("release", assembler.ready)
        counting[0] = count
        stage("read", lambda: pipeline.extract_and_admit(released))
        counting[0] = False
        gc.enable()
        if pipeline.stats.traces != pipeline.stats.spans:  # one span a trace: every one read
            raise RuntimeError(f"read {pipeline.stats.traces} traces of {pipeline.stats.spans} spans")

    one_pass(False)  # caches, interned keys, the interpreter's specialisations
    one_pass(True)


def count(tree: Path, part: str, path: str) -> int:
    command = [
        *("valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce"),
        *("--callgrind-out-file=/dev/null", sys.executable, __file__, "--child", part, path),
    ]
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    got = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    return int(_COLLECTED.findall(got.stderr)[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=2_000)
    parser.add_argument("--layout", choices=("per_trace", "per_partition"), default="per_partition")
    parser.add_argument("--parts", default="take,release,read,find,revise,screen,candidates,found,steps")
    parser.add_argument("--against", type=Path, action="append", default=[])
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    sys.path.insert(0, str(REPO / "benchmarks"))
    import reading_hot_cold  # a sibling script: the same messages

    from tracescore.extract import DEFAULT_RECOGNIZERS
    from tracescore.extract._reader import STEPS

    convention = DEFAULT_RECOGNIZERS[0].convention
    parts = [p for p in args.parts.split(",") if p != "steps"]
    if "steps" in args.parts.split(","):
        parts += [f"step:{step.name}" for step in STEPS if step.applies(convention)]
    trees = [REPO, *args.against]
    print(f"building {args.traces} @tracescore.rag traces through the SDK ({args.layout}) ...", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "records.pkl")
        with open(path, "wb") as f:
            pickle.dump(reading_hot_cold.records(args.layout, args.traces), f)
        wrapper = count(REPO, "wrapper", path) / WRAPPED  # a call's
        print(f"instructions a trace (each per-call part less the wrapper's {wrapper:,.0f} a call)")
        print(f"{'part':28s}" + "".join(f"{tree.name[:14]:>16s}" for tree in trees))
        for part in parts:
            row = []
            for tree in trees:
                collected = count(tree, part, path)
                if part in PER_CALL or part.startswith("step:"):
                    collected -= wrapper * args.traces  # one call a trace: one interaction each
                row.append(f"{collected / args.traces:16,.0f}")
            print(f"{part:28s}" + "".join(row), flush=True)


if __name__ == "__main__":
    main()
