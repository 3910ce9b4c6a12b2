"""The CPU a `tracescore` process spends starting: `--version`, `consume --help`, each service from its
start to its first poll of Kafka, and each service's whole run on an empty topic (started, idle for a
second, stopped: what a test's service process costs at the least), against a floor (the libraries every
service needs: click, kafka-python, pydantic-settings), in the same run.

    python benchmarks/service_start.py [--rounds 5] [--code DIR ...]

Each case is a process of its own (bytecode written, as `make test` runs them: the first round of each tree
writes it and is not counted); its CPU (user + sys) is read from the process's own rusage when it ends. A
service ends itself at its first `KafkaConsumer.poll` (what it imported, built and checked before reading:
the settings, the misspelt-variable check, the clients). The cases are taken in turn and each case's trees
one after the other (their order turned each round), so the load of a shared machine falls on each alike;
the medians are printed as ratios to the floor, the last line JSON. `--code` (repeatable) runs the
tracescore of other trees, e.g. `git archive <commit> | tar -x -C /tmp/before`: `--code /tmp/before --code
.` compares two.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

REPO = Path(__file__).resolve().parents[1]
FLOOR = "import click, kafka, pydantic_settings"
# A service's first poll ends its process: what it did before that is its start.
FIRST_POLL = """
import os, sys
import kafka
kafka.KafkaConsumer.poll = lambda *args, **kwargs: os._exit(0)
from tracescore.cli import main
sys.argv[0] = "tracescore"
main()
"""
RUN = "from tracescore.cli import main; main()"


SERVICES = ("consume", "alert", "conversations")
CASES = ("floor", "--version", "consume --help", *SERVICES, *(f"{service} run" for service in SERVICES))


def command(case: str, bootstrap: str) -> list[str]:
    """The case's command line, on a group and topics of its own (so no process waits on another's); a
    whole run's input topics are created first (an empty topic: it stops once idle for a second)."""
    prefix = f"start{uuid.uuid4().hex[:8]}"
    service, _, run = case.partition(" ")
    topics = {
        "consume": ["--topic", f"{prefix}.spans", "--group-id", prefix, "--evaluations-topic",
                    f"{prefix}.evaluations", "--dlq-topic", f"{prefix}.dlq", "--evaluation-spans-topic",
                    f"{prefix}.evaluation-spans"],
        "alert": ["--evaluations-topic", f"{prefix}.evaluations", "--group-id", f"{prefix}.alert"],
        "conversations": ["--evaluations-topic", f"{prefix}.evaluations", "--conversations-topic",
                          f"{prefix}.conversations", "--group-id", f"{prefix}.conversations"],
    }  # fmt: skip
    if case == "floor":
        return ["-c", FLOOR]
    if service not in topics:
        return ["-c", RUN, *case.split()]
    args = [service, "--bootstrap-servers", bootstrap, *topics[service]]
    if not run:
        return ["-c", FIRST_POLL, *args]
    input_producer(
        bootstrap, [f"{prefix}.spans" if service == "consume" else f"{prefix}.evaluations"]
    ).close()
    return ["-c", RUN, *args, "--idle-timeout", "1"]


def cpu_of(args: list[str], code: Path) -> float:
    """The CPU-s (user + sys) of `python args` run on the tracescore of `code`; it must exit 0."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(code)  # and run from there: the tree's own `tracescore` comes first
    process = subprocess.Popen(
        [sys.executable, *args], cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(
            f"{args[2:]} in {code} exited {process.returncode}: {process.stderr.read().decode()}"
        )
    process.stderr.close()
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--code", type=Path, action="append", help="a tracescore tree (repeatable)")
    options = parser.parse_args()
    trees = [path.resolve() for path in options.code or [REPO]]
    seconds: dict[str, dict[str, list[float]]] = {str(t): {} for t in trees}
    with KafkaBroker() as broker:
        for round_ in range(options.rounds + 1):  # round 0 writes each tree's bytecode
            for case in CASES:
                # the trees one after the other in each case, their order turned each round
                for tree in trees if round_ % 2 else trees[::-1]:
                    cpu = cpu_of(command(case, broker.bootstrap_servers), tree)
                    if round_:
                        seconds[str(tree)].setdefault(case, []).append(cpu)
            print(f"round {round_} done", file=sys.stderr, flush=True)
    result = {}
    for tree, by_case in seconds.items():
        floor = statistics.median(by_case["floor"])
        result[tree] = {
            case: {
                "median_cpu_s": round(statistics.median(cpu), 3),
                "x_floor": round(statistics.median(cpu) / floor, 2),
            }
            for case, cpu in by_case.items()
        }
        print(tree)
        for case, figures in result[tree].items():
            print(f"  {case:18} {figures['median_cpu_s']:6.3f} CPU-s  {figures['x_floor']:5.2f}x the floor")
    if len(trees) == 2:
        before, after = (result[str(t)] for t in trees)
        result["after/before"] = {
            case: round(after[case]["median_cpu_s"] / before[case]["median_cpu_s"], 2) for case in before
        }
        print("after/before:", result["after/before"])
    print(json.dumps(result))


if __name__ == "__main__":
    main()
