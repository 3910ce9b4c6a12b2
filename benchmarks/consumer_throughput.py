"""How many RAG spans per second `EvaluationConsumer` scores end to end through a real Kafka broker, and what
Kafka adds on top of the offline judge's own scoring.

    python benchmarks/consumer_throughput.py [PATH] [--spans 5000] [--poll-records 50 500]

Starts a real Apache Kafka 4 broker (`KafkaBroker`), produces `--spans` RAG spans the way an application
does (`tracescore.init` + `@tracescore.rag` + KafkaSpanExporter: one OTLP ExportTraceServiceRequest per
trace, keyed by trace id), with HaluEval QA records cycled for the query, context and answer. Then, in the
same process and on the same records, it times: the offline judge alone (Faithfulness, no Kafka), and
`EvaluationConsumer` (offline judge, Faithfulness, `max_records = --spans`) once per `--poll-records`
value, each run a new consumer group reading the topic from the start and writing evaluation records and
evaluation spans to topics of its own, committing after every batch. Stops the broker at the end.

Also printed, to explain the figures: the loop's time split (scoring, decode+emit, ack wait, commit, poll),
pysbd's share of the judge, the judge with its context-split cache bypassed (the cycled records repeat 250
contexts), and the bytes kafka-python runs its CRC32C over, with that CRC's speed here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import cycle, islice
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka.record import util as kafka_record_util

import tracescore
from tracescore.consume import ConsumerSettings, EvaluationConsumer
from tracescore.export import KafkaSpanExporter
from tracescore.model import MetricResult, RagRecord
from tracescore.score._segment import split_sentences
from tracescore.score.judges import OfflineJudge, _offline_text
from tracescore.score.judges._offline_text import _blocks, _split_block
from tracescore.score.metrics import Faithfulness, evaluate_record
from tracescore.testing.kafka_broker import KafkaBroker

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
JUDGE_BATCH = 500  # records per asyncio.gather in the judge-alone run, like one large consumer batch


@tracescore.rag(route="/qa")
def answer(query: str, contexts: list[str], reply: str) -> str:
    return reply


def load(path: Path, n: int) -> list[RagRecord]:
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    base = [RagRecord(query=r["query"], contexts=tuple(r["contexts"]), answer=r["answer"]) for r in rows]
    return list(islice(cycle(base), n))


def create_topic(bootstrap: str, topic: str) -> None:
    # Created up front (broker default partitions) so the producer never races the topic's auto-creation.
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, records: Sequence[RagRecord]) -> float:
    """Spans through the real SDK path; returns spans/s. Flushes every 500 calls because the
    BatchSpanProcessor's queue (2048) would otherwise drop spans of a loop faster than Kafka acks."""
    exporter = KafkaSpanExporter(bootstrap, topic)
    instrumentation = tracescore.init(service_name="bench-rag-app", exporter=exporter)
    started = time.perf_counter()
    for i, record in enumerate(records, 1):
        answer(record.query, list(record.contexts), record.answer)
        if i % 500 == 0:
            instrumentation.force_flush()
    tracescore.shutdown()
    elapsed = time.perf_counter() - started
    delivered, dropped = exporter.accounting.delivered, exporter.accounting.total_dropped()
    if delivered != len(records) or dropped:
        raise RuntimeError(f"exported {delivered} spans, {dropped} dropped")
    return len(records) / elapsed


def clear_caches() -> None:
    # The offline judge caches context sentence splits; every timed run starts cold, so runs compare fairly.
    _split_block.cache_clear()


def judge_alone(records: Sequence[RagRecord]) -> float:
    """Records/s of evaluate_record(record, [Faithfulness()], OfflineJudge()): what the consumer does minus
    Kafka."""
    metrics, judge = [Faithfulness()], OfflineJudge()

    async def batch(chunk: Sequence[RagRecord]) -> list[list[MetricResult]]:
        return list(await asyncio.gather(*(evaluate_record(r, metrics, judge) for r in chunk)))

    clear_caches()
    with asyncio.Runner() as runner:
        started = time.perf_counter()
        for i in range(0, len(records), JUDGE_BATCH):
            runner.run(batch(records[i : i + JUDGE_BATCH]))
        return len(records) / (time.perf_counter() - started)


def judge_alone_uncached(records: Sequence[RagRecord]) -> float:
    """The judge alone with its context sentence-split cache bypassed: what unique retrieved passages cost.
    (The cycled HaluEval records repeat 250 contexts, so the timed runs mostly hit that cache.)"""
    cached = _offline_text._split_block
    _offline_text._split_block = cached.__wrapped__  # type: ignore[attr-defined]
    try:
        return judge_alone(records)
    finally:
        _offline_text._split_block = cached


def segmentation_seconds(records: Sequence[RagRecord]) -> tuple[float, float]:
    """pysbd's share of a judge run, replayed alone: every answer is split (Faithfulness does it per record,
    uncached), every context block goes through the judge's cached splitter from a cold cache."""
    started = time.perf_counter()
    for record in records:
        split_sentences(record.answer)
    answers = time.perf_counter() - started
    clear_caches()
    started = time.perf_counter()
    for record in records:
        for block in _blocks("\n\n".join(record.contexts)):
            _split_block(block)
    return answers, time.perf_counter() - started


def crc32c_implementation() -> str:
    """kafka-python checks fetched and builds produced record batches with CRC32C: C if `crc32c` is
    installed, else its pure-Python fallback."""
    impl = kafka_record_util._crc32c
    return "pure Python (kafka.record._crc32c)" if impl.__module__.startswith("kafka.") else impl.__module__


def crc32c_mb_per_s() -> float:
    buffer = memoryview(bytes(range(256)) * 2048)  # 512 KB
    rates = []
    for _ in range(3):
        started = time.perf_counter()
        kafka_record_util.calc_crc32c(buffer)
        rates.append(len(buffer) / (time.perf_counter() - started) / 1e6)
    return statistics.median(rates)


class TimedConsumer(EvaluationConsumer):
    """Adds clocks around the loop thread's steps and nothing else (private hooks, used only for this split).
    Judges run on their own thread now; the loop's time is decoding, emitting, committing and polling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batches = 0
        self.t_take = self.t_emit = self.t_commit = 0.0
        self.first_batch_at: float | None = None
        self.last_commit_at = 0.0
        # Bytes fetched and produced: kafka-python computes a CRC32C over every one of them.
        self.bytes_in = self.bytes_out = 0

    def run(self) -> Any:
        self._connect()
        assert self._producer is not None
        send = self._producer.send

        def counting_send(topic: str, *, key: bytes | None = None, value: bytes, **kw: Any) -> Any:
            self.bytes_out += len(value) + len(key or b"")
            return send(topic, key=key, value=value, **kw)

        self._producer.send = counting_send  # type: ignore[method-assign]
        return super().run()

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        started = time.perf_counter()
        if self.first_batch_at is None:
            self.first_batch_at = started
        self.batches += 1
        self.bytes_in += sum(len(m.value or b"") + len(m.key or b"") for m in batch)
        super()._take(batch)
        self.t_take += time.perf_counter() - started

    def _collect(self) -> None:
        started = time.perf_counter()
        super()._collect()
        super()._settle()
        self.t_emit += time.perf_counter() - started

    def _maybe_commit(self, force: bool) -> None:
        started = time.perf_counter()
        super()._maybe_commit(force)
        self.last_commit_at = time.perf_counter()
        self.t_commit += self.last_commit_at - started


@dataclass
class ConsumerRun:
    poll_records: int
    wall_s: float
    loop_s: float
    consumer: TimedConsumer
    judge_rate: float = 0.0  # the judge alone, mean of the runs just before and after this one
    crc_rate: float = 0.0  # kafka-python's CRC32C in MB/s, likewise measured just before and after


def consume(bootstrap: str, topic: str, n: int, poll_records: int) -> ConsumerRun:
    run_id = uuid.uuid4().hex[:8]
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        topic=topic,
        group_id=f"bench-{run_id}",
        evaluations_topic=f"bench.{run_id}.evaluations",
        dlq_topic=f"bench.{run_id}.dlq",
        # Not the input topic: a later run would otherwise read this run's evaluation spans too.
        evaluation_spans_topic=f"bench.{run_id}.evaluation-spans",
        max_poll_records=poll_records,
        max_records=n,
        idle_timeout_s=30,  # a safety net only: max_records ends a healthy run
    )
    consumer = TimedConsumer(settings, judge=OfflineJudge(), metrics=[Faithfulness()])
    clear_caches()
    started = time.perf_counter()
    stats = consumer.run()
    wall = time.perf_counter() - started
    if stats.scored != n or stats.evaluations != n or stats.dead_letters:
        raise RuntimeError(f"expected {n} scored spans, got {stats}")
    assert consumer.first_batch_at is not None
    return ConsumerRun(poll_records, wall, consumer.last_commit_at - consumer.first_batch_at, consumer)


def print_runs(
    n: int,
    judge_rates: list[float],
    segmentation: tuple[float, float],
    uncached_rate: float,
    runs: list[ConsumerRun],
) -> None:
    judge_rate = statistics.median(judge_rates)
    print(
        f"\noffline judge alone (Faithfulness, no Kafka): {judge_rate:.0f} records/s median "
        f"(runs before, between and after the consumer runs: {', '.join(f'{r:.0f}' for r in judge_rates)})"
    )
    answers, contexts = segmentation
    print(
        f"  pysbd sentence segmentation alone, as a judge run does it: answers {answers:.1f} s + "
        f"contexts {contexts:.1f} s = {(answers + contexts) / (n / judge_rate):.0%} of the judge's "
        f"{n / judge_rate:.1f} s"
    )
    print(f"  with the context split cache bypassed (every context new): {uncached_rate:.0f} records/s")
    print(
        f"\n{'max_poll_records':>16} {'batches':>8} {'wall s':>7} {'spans/s':>8} {'loop s':>7} "
        f"{'loop spans/s':>13} {'judge rec/s':>12} {'judge/loop':>11}"
    )
    for run in runs:
        c = run.consumer
        loop_rate = n / run.loop_s
        print(
            f"{run.poll_records:>16} {c.batches:>8} {run.wall_s:7.1f} {n / run.wall_s:8.0f} "
            f"{run.loop_s:7.1f} {loop_rate:13.0f} {run.judge_rate:12.0f} {run.judge_rate / loop_rate:10.2f}x"
        )
    print("\nwhere the Kafka thread's time goes (s; % of loop); judges run on their own thread")
    columns = ("decode+assemble", "emit+acks", "commit", "poll+wait")
    print(f"{'max_poll_records':>16} " + " ".join(f"{c:>15}" for c in columns))
    for run in runs:
        c = run.consumer
        other = run.loop_s - c.t_take - c.t_emit - c.t_commit
        parts = [c.t_take, c.t_emit, c.t_commit, other]
        print(f"{run.poll_records:>16} " + " ".join(f"{p:7.1f} ({p / run.loop_s:4.0%})" for p in parts))
    print(f"\nkafka-python CRC32C: {crc32c_implementation()}")
    for run in runs:
        c = run.consumer
        crc_s = (c.bytes_in + c.bytes_out) / (run.crc_rate * 1e6)
        print(
            f"{run.poll_records:>16}: {c.bytes_in / n:.0f} B in + {c.bytes_out / n:.0f} B out per span at "
            f"{run.crc_rate:.1f} MB/s -> ~{crc_s / n * 1e3:.2f} ms/span of CRC32C, "
            f"~{crc_s / run.loop_s:.0%} of the loop"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--spans", type=int, default=5_000, help="RAG spans produced and scored")
    parser.add_argument("--poll-records", type=int, nargs="+", default=[50, 500], help="max_poll_records")
    args = parser.parse_args(argv)
    if not args.path.exists():
        print(f"no such file: {args.path}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    # kafka-python warns about partition metadata while a new group first joins; that is start-up, not news.
    logging.getLogger("kafka").setLevel(logging.ERROR)
    records = load(args.path, args.spans)
    print(
        f"{len(records)} RAG spans from {args.path.name} (cycled), mean chars: "
        f"query {statistics.mean(len(r.query) for r in records):.0f}, "
        f"context {statistics.mean(sum(map(len, r.contexts)) for r in records):.0f}, "
        f"answer {statistics.mean(len(r.answer) for r in records):.0f}"
    )
    judge_alone(records[:200])  # warm-up: imports, regex compilation, pydantic schemas

    started = time.perf_counter()
    with KafkaBroker() as broker:
        print(f"broker up in {time.perf_counter() - started:.1f}s at {broker.bootstrap_servers}")
        topic = f"bench.{uuid.uuid4().hex[:8]}.spans"
        create_topic(broker.bootstrap_servers, topic)
        rate = produce(broker.bootstrap_servers, topic, records)
        print(f"produced through @tracescore.rag + KafkaSpanExporter: {rate:.0f} spans/s")
        # The judge alone runs before, between and after the consumer runs; each consumer run is compared
        # with the two judge runs next to it, because this machine's speed drifts within a minute.
        judge_rates, crc_rates = [judge_alone(records)], [crc32c_mb_per_s()]
        runs = []
        for poll_records in args.poll_records:
            runs.append(consume(broker.bootstrap_servers, topic, args.spans, poll_records))
            judge_rates.append(judge_alone(records))
            crc_rates.append(crc32c_mb_per_s())
            runs[-1].judge_rate = (judge_rates[-2] + judge_rates[-1]) / 2
            runs[-1].crc_rate = (crc_rates[-2] + crc_rates[-1]) / 2
        segmentation = segmentation_seconds(records)
        uncached_rate = judge_alone_uncached(records[:1000])
    print_runs(args.spans, judge_rates, segmentation, uncached_rate, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
