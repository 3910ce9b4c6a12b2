"""Evaluation records per interaction when `tracescore consume` members join, leave or crash during a run.

    python benchmarks/rebalance_duplicates.py [--spans 12000] [--partitions 6] [--runs 3]
        [--scenarios together join leave storm kill] [--protocols eager cooperative] [--repo PATH]

Starts a real Apache Kafka 4 broker (`KafkaBroker`), writes `--spans` RAG spans through the SDK as an
application does (`tracescore.init` + `@tracescore.rag` + KafkaSpanExporter, its default layout: one
message per partition per export) on a topic of `--partitions` partitions, then, for each scenario,
rebalance protocol and run, a new consumer group of real `python -m tracescore.cli consume` processes (the
offline judge, faithfulness) reads the whole topic, each run with evaluation, evaluation-span and DLQ topics
of its own. Scenarios:

- together: two members started at the same moment (the issue's case);
- join: one member, a second joins once ~25% of the records are written;
- leave: two members, one stopped with SIGTERM once ~50% are written (it leaves the group cleanly);
- storm: one member throughout, a second joining and, ~3 s after it was given partitions, leaving (SIGTERM),
  again and again until the topic is read;
- kill: two members, one killed with SIGKILL once ~50% are written (at least once: the survivor re-scores
  what the dead member had not committed).

Counts come from the evaluations topic read back: records, distinct (trace, span, metric), records twice,
interactions with no record; and from each member's closing summary, the spans all members decoded and
kept (`spans=`) and those they decoded again after a rebalance but skipped as scored by the previous owner
(`handed_over_spans_skipped=`): their sum less `--spans` is the rebalances' re-reading (GenAI log events
skipped so, `handed_over_log_events_skipped=`, are not spans and are not summed). A killed member
writes no summary, so in the kill rows that column counts the survivor only.

`--repo` runs the members from another checkout (e.g. the code before a change, `git archive <commit> | tar
-x -C /tmp/before`): the protocol goes through TRACESCORE_REBALANCE_PROTOCOL, which a version without that
setting ignores (it rebalances eagerly).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic

import tracescore
from tracescore.export import KafkaSpanExporter
from tracescore.testing.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ("together", "join", "leave", "storm", "kill")
PROTOCOLS = ("eager", "cooperative")
# The summary's counts of spans decoded: whole names (`=` after them), so `handed_over_log_events_skipped`,
# log records and not spans, is never summed with them.
_DECODED_SPANS = ("spans", "handed_over_spans_skipped")
IDLE_TIMEOUT_S = 8  # a member stops this long after its partitions are read to their end
# A member that must outlive the others' comings and goings (the storm's steady member; the kill's survivor,
# which gets the dead member's partitions only after its session timeout) waits longer.
LONG_IDLE_TIMEOUT_S = 30
SESSION_TIMEOUT_MS = 6_000  # the broker's minimum: a killed member's partitions move on quickly
RUN_LIMIT_S = 900.0
STORM_STAY_S = 3.0  # how long a storm's visitor keeps the partitions it was given
_GIVEN = re.compile(r"assigned partitions: \[.")  # a member's log line once it holds partitions


@tracescore.rag(route="/ask")
def answer(query: str, contexts: list[str]) -> str:
    return "Paris is the capital of France."


def produce(bootstrap: str, topic: str, spans: int) -> None:
    """Spans through the SDK's default path; flushed every 500 calls (the processor's queue holds 2048)."""
    exporter = KafkaSpanExporter(bootstrap, topic)
    instrumentation = tracescore.init(service_name="rebalance-bench", exporter=exporter)
    for i in range(1, spans + 1):
        answer(f"What is the capital of France? ({i})", ["Paris is the capital of France."])
        if i % 500 == 0:
            instrumentation.force_flush()
    tracescore.shutdown(timeout_s=60)
    if exporter.accounting.delivered != spans or exporter.accounting.total_dropped():
        raise RuntimeError(f"exported {exporter.accounting.delivered} of {spans} spans")


@dataclass
class Run:
    bootstrap: str
    spans_topic: str
    prefix: str
    protocol: str
    repo: Path
    logs: list[Path] = field(default_factory=list)

    @property
    def evaluations(self) -> str:
        return f"{self.prefix}.evaluations"

    def member(self, idle_timeout_s: float = IDLE_TIMEOUT_S) -> subprocess.Popen[bytes]:
        args = [
            "--bootstrap-servers", self.bootstrap, "--topic", self.spans_topic,
            "--group-id", f"{self.prefix}.group", "--evaluations-topic", self.evaluations,
            "--dlq-topic", f"{self.prefix}.dlq",
            "--evaluation-spans-topic", f"{self.prefix}.evaluation-spans",
            "--idle-timeout", str(idle_timeout_s), "--session-timeout-ms", str(SESSION_TIMEOUT_MS),
            "--status-interval", os.environ.get("BENCH_STATUS_S", "0"),
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(self.repo), "TRACESCORE_REBALANCE_PROTOCOL": self.protocol}
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"{self.prefix}.{uuid.uuid4().hex[:6]}.log"
        self.logs.append(path)
        command = [sys.executable, "-m", "tracescore.cli", "consume", *args]
        with path.open("wb") as log:
            return subprocess.Popen(command, cwd=self.repo, env=env, stdout=log, stderr=subprocess.STDOUT)

    def decoded(self) -> int:
        """Spans the members decoded, from their closing summaries (kept, and skipped as scored before)."""
        total = 0
        for path in self.logs:
            text = path.read_text(errors="replace")
            for name in _DECODED_SPANS:
                found = re.findall(rf"\b{name}=(\d+)", text)
                total += int(found[-1]) if found else 0
        return total

    def written(self) -> int:
        """Messages on the evaluations topic so far (one per record)."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        try:
            partitions = consumer.partitions_for_topic(self.evaluations) or set()
            tps = [TopicPartition(self.evaluations, p) for p in partitions]
            return sum(consumer.end_offsets(tps).values()) if tps else 0
        finally:
            consumer.close()

    def records(self) -> list[tuple[str, str, str]]:
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        try:
            tps = [
                TopicPartition(self.evaluations, p) for p in consumer.partitions_for_topic(self.evaluations)
            ]
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            end = consumer.end_offsets(tps)
            out = []
            while any(consumer.position(tp) < end[tp] for tp in tps):
                for batch in consumer.poll(timeout_ms=500).values():
                    for message in batch:
                        record = json.loads(message.value)
                        out.append((record["trace_id"], record["span_id"], record["metric"]))
            return out
        finally:
            consumer.close()


def _wait(condition: Callable[[], bool], limit_s: float = RUN_LIMIT_S, every_s: float = 0.2) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the run did not finish")
        time.sleep(every_s)


def _exits(*members: subprocess.Popen[bytes]) -> None:
    _wait(lambda: all(m.poll() is not None for m in members))


def together(run: Run, spans: int) -> None:
    _exits(run.member(), run.member())


def join(run: Run, spans: int) -> None:
    first = run.member()
    _wait(lambda: run.written() >= spans // 4)
    _exits(first, run.member())


def leave(run: Run, spans: int) -> None:
    first, second = run.member(), run.member()
    _wait(lambda: run.written() >= spans // 2)
    second.send_signal(signal.SIGTERM)
    _exits(first, second)


def _given_or_gone(member: subprocess.Popen[bytes], log: Path) -> bool:
    return member.poll() is not None or _GIVEN.search(log.read_text(errors="replace")) is not None


def storm(run: Run, spans: int) -> None:
    steady = run.member(LONG_IDLE_TIMEOUT_S)
    while steady.poll() is None and run.written() < spans:
        visitor = run.member()
        # Each visitor is given partitions before it leaves: on a loaded machine a process takes longer than
        # the stay to start and join, and a visitor stopped before that moves nothing.
        _wait(partial(_given_or_gone, visitor, run.logs[-1]))
        time.sleep(STORM_STAY_S)
        visitor.send_signal(signal.SIGTERM)
        _exits(visitor)
    _exits(steady)


def kill(run: Run, spans: int) -> None:
    first, second = run.member(LONG_IDLE_TIMEOUT_S), run.member()
    _wait(lambda: run.written() >= spans // 2)
    second.send_signal(signal.SIGKILL)
    _exits(first, second)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=12_000)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scenarios", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    parser.add_argument("--protocols", nargs="+", choices=PROTOCOLS, default=list(PROTOCOLS))
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout whose members run")
    args = parser.parse_args(argv)
    scenarios = {"together": together, "join": join, "leave": leave, "storm": storm, "kill": kill}
    with KafkaBroker(partitions=args.partitions) as broker:
        bootstrap = broker.bootstrap_servers
        topic = f"rebalance-{uuid.uuid4().hex[:8]}.spans"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(topic, args.partitions, 1)])
        admin.close()
        produce(bootstrap, topic, args.spans)
        print(f"{args.spans} spans on {args.partitions} partitions; members from {args.repo}")
        print()
        print(
            "| scenario | protocol | run | records | distinct | scored twice | without a record "
            "| spans decoded again | seconds |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for name in args.scenarios:
            for protocol in args.protocols:
                for index in range(1, args.runs + 1):
                    run = Run(bootstrap, topic, f"r{uuid.uuid4().hex[:8]}", protocol, args.repo)
                    started = time.monotonic()
                    scenarios[name](run, args.spans)
                    seconds = time.monotonic() - started
                    counts = Counter(run.records())
                    twice = sum(n - 1 for n in counts.values())
                    missing = args.spans - len(counts)
                    again = run.decoded() - args.spans
                    cells = (name, protocol, index, sum(counts.values()), len(counts), twice, missing, again)
                    print("| " + " | ".join(map(str, cells)) + f" | {seconds:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
