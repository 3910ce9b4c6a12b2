"""The sampled path through an LLM judge: throughput against the C/L bound, and end-to-end latency.

    python benchmarks/consumer_latency.py [PATH] [--latency 0.25] [--concurrency 16] [--spans 400]
                                         [--load 0.5] [--seconds 30]

Starts a real Kafka broker and the local OpenAI-compatible judge server (`tracescore.testing.JudgeServer`,
in a process of its own so its threads do not share the consumer's GIL) answering every chat call after a
fixed latency L. The consumer is `EvaluationConsumer` with the openai judge (`OpenAIJudge`, the real
`openai` client) and Faithfulness, which makes two judge calls per span (answer analysis, then verdicts),
one after the other; the judge's concurrency limit and the consumer's `max_in_flight` are both C.

(a) Throughput: `--spans` HaluEval QA spans produced up front, then consumed; the rate is taken over the
    middle 80% of evaluations (ramp-up and tail excluded). Bound: C concurrent calls of L seconds are C/L
    judge calls/s, i.e. C/(2L) spans/s.
(b) Latency: a new topic fed at `--load` x the capacity measured in (a) for `--seconds` by an application
    process (`@tracescore.rag`, SDK defaults: 1 s batch delay), while the consumer (default assembly grace
    2 s) runs; latency is from each span's end (its OTLP end time) to the moment Kafka acknowledged its
    evaluation record, split at the input message's Kafka timestamp (export) and the rest (consumer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from consumer_throughput import DEFAULT_PATH, create_topic, load, produce
from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from tracescore.consume import ConsumerSettings, EvaluationConsumer, NotOtlp, decode_message
from tracescore.consume._judging import Judged
from tracescore.consume._pipeline import Admitted
from tracescore.model import EvaluationRecord, Trace
from tracescore.score.judges import OpenAIJudge, OpenAIJudgeSettings
from tracescore.score.metrics import Faithfulness, evaluate_record
from tracescore.testing.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[1]

_SERVER = """
import json, sys
from tracescore.testing.judge_server import JudgeServer
server = JudgeServer(latency_s={latency}).start()
print(server.base_url, flush=True)
sys.stdin.read()
print(json.dumps(server.stats.__dict__), flush=True)
"""

_APP = """
import time, tracescore
tracescore.init(service_name="bench-latency", kafka_bootstrap={bootstrap!r}, topic={topic!r})

@tracescore.rag(route="/qa")
def answer(query, contexts, reply):
    return reply

rows = {rows!r}
started = time.monotonic()
for i in range({count}):
    time.sleep(max(0.0, started + i / {rate} - time.monotonic()))  # paced: a steady load
    query, contexts, reply = rows[i % len(rows)]
    answer(query, contexts, reply)
tracescore.shutdown()
"""


class JudgeProcess:
    def __init__(self, latency_s: float) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_SERVER.format(latency=latency_s))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()

    def close(self) -> dict[str, int]:
        stdout, _ = self.process.communicate("", timeout=60)
        return json.loads(stdout.strip().splitlines()[-1])


class TracedConsumer(EvaluationConsumer):
    """Notes when each span was polled, released by the trace assembler and scored (wall clock, ns), to split
    the consumer's share of the latency. Private hooks, used only for this breakdown."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.polled: dict[tuple[int, int], int] = {}
        self.marks: dict[str, dict[str, int]] = {}
        self._extract_and_admit = self._pipeline.extract_and_admit
        self._pipeline.extract_and_admit = self._timed_extract_and_admit  # type: ignore[method-assign]

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        now = time.time_ns()
        self.polled.update({(m.partition, m.offset): now for m in batch})
        super()._take(batch)

    def _timed_extract_and_admit(self, traces: list[Trace]) -> list[Admitted]:
        now = time.time_ns()
        for trace in traces:
            polled = min(self.polled.get((tp.partition, o), now) for tp, o in trace.offsets.items())
            for span in trace.spans:
                self.marks[span.span_id] = {"polled": polled, "released": now}
        return self._extract_and_admit(traces)

    def _write(self, judged: Judged) -> None:
        span_id = judged.interaction.span.span_id
        if span_id in self.marks:
            self.marks[span_id]["scored"] = time.time_ns()
        super()._write(judged)


def consumer(
    bootstrap: str,
    topic: str,
    base_url: str,
    concurrency: int,
    seen: Callable[[EvaluationRecord], None],
    **overrides: object,
) -> TracedConsumer:
    run = uuid.uuid4().hex[:8]
    settings = ConsumerSettings.model_validate(
        {
            "bootstrap_servers": bootstrap, "topic": topic, "group_id": f"bench-{run}",
            "evaluations_topic": f"bench.{run}.evaluations", "dlq_topic": f"bench.{run}.dlq",
            "evaluation_spans_topic": f"bench.{run}.evaluation-spans", "max_in_flight": concurrency,
            **overrides,
        }
    )  # fmt: skip
    judge = OpenAIJudge(
        OpenAIJudgeSettings(base_url=base_url, api_key="unused", model="judge-test", concurrency=concurrency)
    )
    return TracedConsumer(settings, judge=judge, metrics=[Faithfulness()], on_evaluation=seen)


def throughput(bootstrap: str, base_url: str, records: list, concurrency: int) -> tuple[float, float]:
    """(spans/s over the middle 80% of evaluations, whole-run spans/s)."""
    topic = f"bench.{uuid.uuid4().hex[:8]}.spans"
    create_topic(bootstrap, topic)
    produce(bootstrap, topic, records)
    times: list[float] = []
    member = consumer(
        bootstrap, topic, base_url, concurrency, lambda _: times.append(time.monotonic()),
        max_records=len(records), idle_timeout_s=60,
    )  # fmt: skip
    started = time.monotonic()
    stats = member.run()
    if stats.scored != len(records) or stats.judge_errors:
        raise RuntimeError(f"expected {len(records)} clean scores, got {stats}")
    low, high = int(len(times) * 0.1), int(len(times) * 0.9)
    middle = (high - low) / (times[high] - times[low])
    return middle, len(times) / (times[-1] - started)


def judge_alone(base_url: str, records: list, concurrency: int) -> float:
    """Spans/s of the same judge and metric with no Kafka at all (C records at once, middle 80%): the
    ceiling the consumer can reach on this machine, to tell the consumer's cost from the client's."""
    judge = OpenAIJudge(
        OpenAIJudgeSettings(base_url=base_url, api_key="unused", model="judge-test", concurrency=concurrency)
    )
    times: list[float] = []

    async def run_all() -> None:
        limit = asyncio.Semaphore(concurrency)

        async def one(record: Any) -> None:
            async with limit:
                await evaluate_record(record, [Faithfulness()], judge)
                times.append(time.monotonic())

        await asyncio.gather(*(one(r) for r in records))

    asyncio.run(run_all())
    low, high = int(len(times) * 0.1), int(len(times) * 0.9)
    return (high - low) / (times[high] - times[low])


def latency(
    bootstrap: str, base_url: str, records: list, concurrency: int, rate: float, seconds: float
) -> dict:
    topic = f"bench.{uuid.uuid4().hex[:8]}.spans"
    create_topic(bootstrap, topic)
    count = int(rate * seconds)
    acked: dict[str, int] = {}

    def seen(record: EvaluationRecord) -> None:
        acked[record.span_id] = time.time_ns()  # called once Kafka acknowledged the record
        if len(acked) >= count:
            member.stop()

    member = consumer(bootstrap, topic, base_url, concurrency, seen)
    thread = threading.Thread(target=member.run)
    thread.start()
    while member.first_assigned_at is None:  # joining the group is start-up, not latency
        time.sleep(0.05)
    rows = [(r.query, list(r.contexts), r.answer) for r in records[:100]]
    app = _APP.format(bootstrap=bootstrap, topic=topic, rows=rows, count=count, rate=rate)
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(app)], check=True, cwd=REPO, timeout=seconds * 4 + 120
    )
    thread.join(seconds * 4 + 120)
    # Span end times and the Kafka timestamp (producer CreateTime) of the message that carried each span.
    reader = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000)
    reader.assign([TopicPartition(topic, p) for p in reader.partitions_for_topic(topic)])
    reader.seek_to_beginning()
    ends: dict[str, tuple[int, int]] = {}
    for message in reader:
        try:
            for span in decode_message(message.value):
                ends[span.span_id] = (span.end_time_unix_nano, message.timestamp * 1_000_000)
        except NotOtlp:
            continue
    reader.close()
    stages: dict[str, list[float]] = {"fetch": [], "assembly": [], "judge": [], "emit+ack": []}
    for span_id, (_, ts) in ends.items():
        mark = member.marks.get(span_id, {})
        if span_id in acked and "scored" in mark:
            stages["fetch"].append((mark["polled"] - ts) / 1e9)
            stages["assembly"].append((mark["released"] - mark["polled"]) / 1e9)
            stages["judge"].append((mark["scored"] - mark["released"]) / 1e9)
            stages["emit+ack"].append((acked[span_id] - mark["scored"]) / 1e9)
    total = sorted((acked[s] - end) / 1e9 for s, (end, _) in ends.items() if s in acked)
    export = sorted((ts - end) / 1e9 for s, (end, ts) in ends.items() if s in acked)
    consume = sorted((acked[s] - ts) / 1e9 for s, (_, ts) in ends.items() if s in acked)

    def p(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return {
        "spans": count, "evaluated": len(total), "rate": rate,
        "p50": p(total, 0.5), "p95": p(total, 0.95), "max": total[-1],
        "stages": {k: (p(sorted(v), 0.5), p(sorted(v), 0.95)) for k, v in stages.items()},
        "export_p95": p(export, 0.95), "consumer_p50": p(consume, 0.5), "consumer_p95": p(consume, 0.95),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--latency", type=float, default=0.25, help="judge server latency L per call, s")
    parser.add_argument("--concurrency", type=int, default=16, help="C: judge concurrency and max_in_flight")
    parser.add_argument("--spans", type=int, default=400, help="spans for the throughput run")
    parser.add_argument("--load", type=float, default=0.5, help="latency run's load, share of capacity")
    parser.add_argument("--seconds", type=float, default=30, help="latency run's length")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    records = load(args.path, args.spans)
    judge = JudgeProcess(args.latency)
    try:
        with KafkaBroker() as broker:
            # The judge alone before and after the consumer run: this machine's speed drifts within a minute.
            alone = [judge_alone(judge.base_url, records, args.concurrency)]
            middle, whole = throughput(broker.bootstrap_servers, judge.base_url, records, args.concurrency)
            alone.append(judge_alone(judge.base_url, records, args.concurrency))
            lat = latency(
                broker.bootstrap_servers, judge.base_url, records, args.concurrency,
                rate=args.load * middle, seconds=args.seconds,
            )  # fmt: skip
    finally:
        server = judge.close()
    c, latency_s = args.concurrency, args.latency
    calls_per_span = server["chat_requests"] / (3 * args.spans + lat["spans"])
    bound = c / latency_s / calls_per_span
    print(f"judge latency L = {latency_s} s, C = {c} (judge concurrency = consumer max_in_flight)")
    print(
        f"judge calls per span: {calls_per_span:.2f}; "
        f"most calls in flight at the server: {server['max_in_flight']}"
    )
    print(f"bound C/L = {c / latency_s:.1f} calls/s = {bound:.1f} spans/s")
    print(f"(a) throughput, middle 80%: {middle:.1f} spans/s = {middle / bound:.0%} of the bound")
    ceiling = sum(alone) / 2
    print(
        f"    the same judge alone, no Kafka (before, after): {alone[0]:.1f}, {alone[1]:.1f} spans/s = "
        f"{ceiling / bound:.0%} of the bound; the consumer reaches {middle / ceiling:.0%} of the judge alone"
    )
    print(f"    whole run (start to last record, incl. ramp-up): {whole:.1f} spans/s = {whole / bound:.0%}")
    print(
        f"(b) steady load {lat['rate']:.1f} spans/s ({args.load:.0%} of (a)) for {args.seconds:.0f} s: "
        f"{lat['evaluated']}/{lat['spans']} evaluated; span end -> record acknowledged: "
        f"p50 {lat['p50']:.2f} s, p95 {lat['p95']:.2f} s, max {lat['max']:.2f} s"
    )
    print(
        f"    of which export (span end -> Kafka timestamp) p95 {lat['export_p95']:.2f} s; "
        f"consumer (Kafka timestamp -> record acknowledged) p50 {lat['consumer_p50']:.2f} s, "
        f"p95 {lat['consumer_p95']:.2f} s"
    )
    print(
        "    consumer stages p50/p95 s: "
        + ", ".join(f"{k} {a:.2f}/{b:.2f}" for k, (a, b) in lat["stages"].items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
