"""The CPU a `tracescore` process spends after its last exit handler, against the whole process, on real
exits: each service giving up on a closed port (its settings read and checked, its clients built) and
`consume --help`; each ended by the interpreter (`tracescore.cli.main()`, the group: modules torn down,
objects freed) and by the program (`tracescore.cli.run()`, the console script's: the process ends once the
exit handlers ran and the output is flushed).

    python benchmarks/service_exit.py [--rounds 6]

Each case is a process of its own, bytecode written (as `make test` runs them). The first exit handler
registered runs last: it writes the process's own CPU (user + sys) at that point; the whole process's comes
from `os.wait4` when it has ended; the difference is what the end costs. Cases and the two ends are taken in
turn each round, so a shared machine's load falls on each alike; medians are printed, and the ratio of the
program's whole process to the interpreter's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# Registered before tracescore is imported, so it runs after every handler the process registers.
MARKED_RUN = """
import atexit, resource, sys

def _mark():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open({mark!r}, "w") as out:
        out.write(str(usage.ru_utime + usage.ru_stime))

atexit.register(_mark)
sys.argv = ["tracescore", *{args!r}]
from tracescore.cli import {entry}
{entry}()
"""
ENDS = {"interpreter": "main", "program": "run"}
CLOSED = ["--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "1"]
CASES = {
    "consume": ["consume", *CLOSED],
    "alert": ["alert", *CLOSED],
    "conversations": ["conversations", *CLOSED],
    "consume --help": ["consume", "--help"],
}


def one(args: list[str], entry: str, folder: Path) -> tuple[float, float]:
    """The whole process's CPU-s and the part after its last exit handler."""
    mark = folder / "mark"
    mark.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = MARKED_RUN.format(mark=str(mark), args=args, entry=entry)
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    _, _, usage = os.wait4(process.pid, 0)
    whole = usage.ru_utime + usage.ru_stime
    return whole, whole - float(mark.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    rounds = parser.parse_args().rounds
    taken: dict[tuple[str, str], list[tuple[float, float]]] = {
        (name, end): [] for name in CASES for end in ENDS
    }
    with tempfile.TemporaryDirectory() as folder:
        for args in CASES.values():  # bytecode written, not counted
            one(args, "main", Path(folder))
        for _ in range(rounds):
            for name, args in CASES.items():
                for end, entry in ENDS.items():
                    taken[name, end].append(one(args, entry, Path(folder)))
    for name in CASES:
        wholes = {}
        for end in ENDS:
            runs = taken[name, end]
            whole = wholes[end] = statistics.median(run[0] for run in runs)
            after = statistics.median(run[1] for run in runs)
            print(
                f"{name:15s} {end:11s} whole {whole:.3f} CPU-s, after its exit handlers {after:.3f} "
                f"({after / whole:.0%}), {rounds} rounds"
            )
        print(f"{name:15s} program / interpreter: {wholes['program'] / wholes['interpreter']:.2f}x")


if __name__ == "__main__":
    main()
