"""Conversations lost or repeated when `tracescore conversations` is killed mid-run and restarted.

    python benchmarks/conversations_crash.py [--conversations 300] [--kill-at 60] [--signal kill|term]
                                             [--spread] [--idle-timeout 20] [--runs 2] [--code DIR]

Starts a real Kafka broker and puts `--conversations` three-turn conversations on an evaluations topic, as
`tracescore consume` writes them (one record per turn, keyed by trace id, spread over the topic's
partitions): all at once, or with `--spread` one conversation starting every 0.1 s with a turn a second, as
a scoring consumer running alongside writes them. Then runs `tracescore conversations --quiet-seconds 3` as
a process, stops it with `--signal` once `--kill-at` conversation records are on its topic, and runs it
again (`--idle-timeout`) until it has read everything and has nothing left to write. Counts what the
conversations topic holds at the end: conversations with a record, records of a conversation written
twice (the same revision), records of fewer than three turns. The last line is JSON. `--code` runs the
service of another tree, e.g. `git archive <commit> tracescore | tar -x -C /tmp/before`.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from _runs import ConversationsProcess, add_run_options, on_one_broker, read_values
from kafka import KafkaConsumer, TopicPartition

from tracescore.model import EvaluationRecord, MetricStatus, read_conversation_record
from tracescore.testing.kafka_topics import input_producer

TURNS = 3
START_EVERY_S = 0.1  # --spread: 300 conversations start over 30 s
TURN_GAP_S = 1.0


def turn_records(conversations: int) -> list[EvaluationRecord]:
    start = datetime.now(UTC) - timedelta(minutes=5)
    return [
        EvaluationRecord(
            trace_id=f"{c * TURNS + n + 1:032x}",
            span_id=f"{c * TURNS + n + 1:016x}",
            service_name="chat-api",
            route="/chat",
            metric="faithfulness",
            score=1.0,
            label="faithful",
            status=MetricStatus.OK,
            judge="offline",
            session_id=f"conversation-{c}",
            timestamp=start + timedelta(seconds=n),
        )
        for c in range(conversations)
        for n in range(TURNS)
    ]


def feed(bootstrap: str, topic: str, conversations: int, spread: bool) -> None:
    producer = input_producer(bootstrap, [topic], acks="all", linger_ms=20)
    records = turn_records(conversations)
    due = sorted(
        (c * START_EVERY_S + n * TURN_GAP_S, c * TURNS + n)
        for c in range(conversations)
        for n in range(TURNS)
    )
    start = time.monotonic()
    for at, index in due:
        if spread:
            time.sleep(max(0.0, start + at - time.monotonic()))
        key, value = records[index].to_kafka()
        producer.send(topic, key=key, value=value)
    producer.flush()
    producer.close()


def wait_for_records(bootstrap: str, topic: str, process: subprocess.Popen[bytes], count: int) -> int:
    """Records on `topic` once `count` are there (or the process ended), counted as they arrive."""
    watcher = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    seen = 0
    deadline = time.monotonic() + 300
    try:
        tps: list[TopicPartition] = []
        while time.monotonic() < deadline and process.poll() is None and seen < count:
            if not tps:
                tps = [TopicPartition(topic, p) for p in watcher.partitions_for_topic(topic) or ()]
                if tps:
                    watcher.assign(tps)
                    watcher.seek_to_beginning(*tps)
                else:
                    time.sleep(0.1)
                continue
            seen += sum(len(batch) for batch in watcher.poll(timeout_ms=20).values())
    finally:
        watcher.close()
    return seen


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    service = ConversationsProcess(bootstrap, f"crash{uuid.uuid4().hex[:8]}", args.code, "3")
    evaluations, conversations = service.evaluations, service.conversations
    feeding = threading.Thread(target=feed, args=(bootstrap, evaluations, args.conversations, args.spread))
    feeding.start()
    command, env = service.command, service.env
    first = subprocess.Popen(command, env=env, cwd=args.code, stderr=subprocess.DEVNULL)
    at_stop = wait_for_records(bootstrap, conversations, first, args.kill_at)
    first.send_signal(signal.SIGKILL if args.signal == "kill" else signal.SIGTERM)
    first.wait(120)
    feeding.join()
    started = time.monotonic()
    second = subprocess.run(
        [*command, "--idle-timeout", str(args.idle_timeout)],
        env=env, cwd=args.code, capture_output=True, text=True, check=False,
    )  # fmt: skip
    records = [read_conversation_record(v) for v in read_values(bootstrap, conversations)]
    copies = Counter((r.conversation_id, r.revision) for r in records)
    recorded = {r.conversation_id for r in records}
    return {
        "conversations": args.conversations,
        "records_at_stop": at_stop,
        "with_a_record": len(recorded),
        "lost": args.conversations - len(recorded),
        "records": len(records),
        "repeated": sum(n - 1 for n in copies.values()),
        "incomplete": sum(r.turns < TURNS for r in records),
        "restart_exit": second.returncode,
        "restart_seconds": round(time.monotonic() - started, 1),
        "restart_summary": (second.stderr.strip().splitlines() or [""])[-1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=300)
    parser.add_argument("--kill-at", type=int, default=60, help="conversation records on the topic")
    parser.add_argument("--signal", choices=("kill", "term"), default="kill")
    parser.add_argument("--spread", action="store_true", help="turns arrive over 30 s while the service runs")
    parser.add_argument("--idle-timeout", type=float, default=20.0, help="of the restarted process")
    add_run_options(parser, runs=2)
    args = parser.parse_args(argv)
    results = on_one_broker(
        args.runs,
        lambda bootstrap: run(bootstrap, args),
        shown=lambda result: {k: v for k, v in result.items() if k != "restart_summary"},
    )
    print(json.dumps({"signal": args.signal, "spread": args.spread, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
