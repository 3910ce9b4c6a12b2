"""How long `tracescore consume` and `tracescore conversations` take to stop on SIGTERM once their broker is
gone, against the same stop with the broker up (in the same run).

    python benchmarks/stop_without_broker.py [--service consume conversations] [--broker-gone 2] [--runs 2]
                                             [--judge-hangs] [--code DIR]

Each run starts the service as a process against a real broker, on topics of its own, with work read and not
committed yet (consume: a message dead-lettered, committed only every 60 s; conversations: three turns of an
open conversation, `--quiet-seconds 600`), waits until it holds its partitions, then sends SIGTERM: once with
the broker up, once `--broker-gone` seconds after the broker stopped (restarted after). `--judge-hangs`
(consume): one RAG interaction too, whose call to the (local) LLM judge never answers, so the stop's drain
waits as long as it may. Prints each stop's seconds and what the service said about its offsets on the way
out; the last line is JSON. `--code` runs the service of another tree, e.g. `git archive <commit> | tar -x -C
/tmp/before`.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _runs import ConversationsProcess, add_run_options
from conversations_crash import turn_records

from tracescore.testing.judge_server import JudgeServer
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

SERVICES = ("consume", "conversations")
READY = "assigned partitions"
HANGS_S = 3600.0  # a judge reply that never comes within any stop
APP = """
import tracescore
tracescore.init(service_name="stop-bench", bootstrap_servers={bootstrap!r}, topic={topic!r})

@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "Paris is the capital of France."

answer("capital of France?", ["Paris is the capital of France."])
tracescore.shutdown(timeout_s=60)
"""


def started(
    service: str, bootstrap: str, code: Path, judge: JudgeServer | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """The service with work read and not committed, once it holds its partitions (and, with a `judge`, once
    a call to it is under way); its log's path."""
    prefix = f"stop{uuid.uuid4().hex[:8]}"
    calls = judge.stats.chat_requests if judge is not None else 0
    if service == "consume":
        producer = input_producer(bootstrap, [f"{prefix}.spans"])
        producer.send(f"{prefix}.spans", b"not OTLP")  # dead-lettered, its offset committed later
        command = [
            sys.executable, "-c", "from tracescore.cli import main; main()", "consume",
            "--bootstrap-servers", bootstrap, "--topic", f"{prefix}.spans", "--group-id", prefix,
            "--evaluations-topic", f"{prefix}.evaluations", "--dlq-topic", f"{prefix}.dlq",
            "--evaluation-spans-topic", f"{prefix}.evaluation-spans", "--commit-interval", "60",
        ]  # fmt: skip
        env = ConversationsProcess(bootstrap, prefix, code, "600").env
        if judge is not None:  # a RAG interaction, scored by the LLM judge only: its call never answers
            app = APP.format(bootstrap=bootstrap, topic=f"{prefix}.spans")
            subprocess.run([sys.executable, "-c", app], cwd=code, env=env, check=True, timeout=180)
            command += [
                "--judge",
                "openai",
                "--no-cascade",
                "--base-url",
                judge.base_url,
                "--model",
                judge.model,
            ]
            env["TRACESCORE_JUDGE_API_KEY"] = "unused"
    else:
        process = ConversationsProcess(bootstrap, prefix, code, "600")  # the conversation stays open
        producer = input_producer(bootstrap, [process.evaluations])
        for record in turn_records(1):
            producer.send(process.evaluations, key=record.trace_id.encode(), value=record.to_kafka()[1])
        command, env = process.command, process.env
    producer.flush()
    producer.close()
    log = Path(tempfile.mkstemp(prefix=f"{prefix}.", suffix=".log")[1])
    with log.open("wb") as out:
        member = subprocess.Popen(command, env=env, cwd=code, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while READY not in log.read_text(errors="replace") or (
        judge is not None and judge.stats.chat_requests <= calls
    ):
        if member.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{service} never held partitions:\n{log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    time.sleep(1.0)  # its first records read and applied
    return member, log


def stopped(member: subprocess.Popen[bytes], log: Path) -> tuple[float, int | None, list[str]]:
    """SIGTERM: the seconds to exit, its exit status, and what it said about offsets and state on the way."""
    before = len(log.read_text(errors="replace").splitlines())
    at = time.monotonic()
    member.send_signal(signal.SIGTERM)
    try:
        status: int | None = member.wait(180)
    except subprocess.TimeoutExpired:
        member.kill()
        member.wait()
        status = None
    seconds = time.monotonic() - at
    said = [
        line.split(" ", 3)[-1]
        for line in log.read_text(errors="replace").splitlines()[before:]
        if " tracescore" in line and ("commit" in line or "not saved" in line or "stopping" in line)
    ]
    log.unlink()
    return seconds, status, said


def run(
    broker: KafkaBroker, service: str, args: argparse.Namespace, judge: JudgeServer | None
) -> dict[str, Any]:
    judge = judge if service == "consume" else None
    member, log = started(service, broker.bootstrap_servers, args.code, judge)
    up_s, up_status, _ = stopped(member, log)
    member, log = started(service, broker.bootstrap_servers, args.code, judge)
    broker.stop()
    time.sleep(args.broker_gone)
    gone_s, gone_status, said = stopped(member, log)
    broker.start()  # the same address, for the next run
    return {
        "service": service,
        "judge_hangs": judge is not None,
        "stop_s_broker_up": round(up_s, 1),
        "stop_s_broker_gone": round(gone_s, 1),
        "gone_over_up": round(gone_s / up_s, 1),
        "exit_broker_up": up_status,
        "exit_broker_gone": gone_status,
        "said": said,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--service", nargs="+", choices=SERVICES, default=list(SERVICES))
    parser.add_argument("--broker-gone", type=float, default=2.0, help="seconds between its stop and SIGTERM")
    parser.add_argument(
        "--judge-hangs", action="store_true", help="consume: a judge call under way never ends"
    )
    add_run_options(parser, runs=2)
    args = parser.parse_args(argv)
    results = []
    with KafkaBroker() as broker, JudgeServer(latency_s=HANGS_S) as judge:
        for _ in range(args.runs):
            for service in args.service:
                result = run(broker, service, args, judge if args.judge_hangs else None)
                print(result, flush=True)
                results.append(result)
    print(json.dumps({"broker_gone_s": args.broker_gone, "judge_hangs": args.judge_hangs, "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
