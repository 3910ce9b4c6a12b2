"""What the service benchmarks share: the options that pick the runs and the tree to run (`--runs`, `--code`),
the runs on one real broker, `tracescore conversations` as a process on topics of its own, reading a topic
back, and the report's two last lines (a sentence, then the JSON the figures are quoted from).

The command lines and outputs of the benchmarks that use it are theirs: this only keeps them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic

__all__ = ["REPO", "ConversationsProcess", "add_run_options", "on_one_broker", "read_values", "report"]

REPO = Path(__file__).resolve().parents[1]
Result = dict[str, Any]


def add_run_options(parser: argparse.ArgumentParser, runs: int) -> None:
    """`--runs` (each on topics of its own, one broker) and `--code` (the tracescore tree whose service
    runs)."""
    parser.add_argument("--runs", type=int, default=runs)
    parser.add_argument(
        "--code", type=Path, default=REPO, help="the tracescore tree to run (an export of an earlier commit)"
    )


def on_one_broker(
    runs: int, run: Callable[[str], Result], shown: Callable[[Result], object] = lambda result: result
) -> list[Result]:
    """`run(bootstrap)` `runs` times on one real broker, each result printed (`shown` of it) as it ends."""
    results = []
    with KafkaBroker() as broker:
        for _ in range(runs):
            result = run(broker.bootstrap_servers)
            print(shown(result), flush=True)
            results.append(result)
    return results


@dataclass(frozen=True)
class ConversationsProcess:
    """`tracescore conversations` of the tree `code`, as a process, on topics `prefix.*` of its own;
    `settings`: more of its environment variables."""

    bootstrap: str
    prefix: str
    code: Path
    quiet_seconds: str
    settings: Mapping[str, str] = field(default_factory=dict)

    @property
    def evaluations(self) -> str:
        return f"{self.prefix}.evaluations"

    @property
    def conversations(self) -> str:
        return f"{self.prefix}.conversations"

    @property
    def command(self) -> list[str]:
        return [
            sys.executable, "-c", "from tracescore.cli import main; main()", "conversations",
            "--bootstrap-servers", self.bootstrap, "--evaluations-topic", self.evaluations,
            "--conversations-topic", self.conversations, "--group-id", f"{self.prefix}.conversations",
            "--quiet-seconds", self.quiet_seconds,
        ]  # fmt: skip

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(self.code),  # and run from there: the tree's own `tracescore` comes first
            "TRACESCORE_CONVERSATIONS_TURNS_TOPIC": f"{self.prefix}.turns",
            "TRACESCORE_CONVERSATIONS_STATE_TOPIC": f"{self.prefix}.state",  # the name every version reads
            "TRACESCORE_CONVERSATIONS_SPANS_TOPIC": f"{self.prefix}.spans",
            **self.settings,
        }


def read_values(bootstrap: str, topic: str) -> list[bytes]:
    """Every value on `topic` now (none if it does not exist)."""
    return [m.value for m in read_topic(bootstrap, topic) if m.value is not None]


def report(sentence: str, result: Mapping[str, Any]) -> None:
    """The figures said once for people, then as JSON on the last line (what BENCHMARKS.md quotes)."""
    print(sentence)
    print(json.dumps(result))
