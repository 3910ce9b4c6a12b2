"""The SDK's Kafka message layouts compared through a real broker: per trace (the Collector's
`partition_traces_by_id` layout) and per partition (the default), for one-span `@tracescore.rag` traces.

    python benchmarks/export_layout.py [--spans 40000] [--partitions 3] [--bootstrap HOST:PORT]

Spans are made once by the real SDK (`tracescore.init` + `@tracescore.rag`, 3 documents of 1 KB), then
for each layout:
- export: KafkaSpanExporter.export() in batches of 512 (the export thread's batch) and force_flush();
  CPU of the whole process (the export thread's encoding and kafka-python's IO thread), per span;
- read: a plain kafka-python consumer polls the topic to its end and decodes every message with
  `tracescore.consume.decode_message`; CPU per span. That is the layout-dependent part of
  `tracescore consume` (assembly, extraction and sampling follow, the same for both layouts).
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Sequence

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.consume import decode_message
from tracescore.export import KafkaProducerSettings, KafkaSpanExporter
from tracescore.testing.kafka_broker import KafkaBroker

BATCH = 512  # BoundedSpanProcessor's default max_batch_size
DOC = "The Aurora X2 battery lasts 14 hours of mixed use and charges to 80 percent in 35 minutes. "


@tracescore.rag(route="/qa")
def answer(query: str, contexts: list[str], reply: str) -> str:
    return reply


def make_spans(count: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    instrumentation = tracescore.init(service_name="bench-rag-app", exporter=memory)
    docs = [(f"Document {d}: " + DOC * 12)[:1024] for d in range(3)]
    for i in range(count):
        answer(f"How long does the Aurora X2 battery last? ({i})", docs, "14 hours.")
        if i % 1000 == 999:
            instrumentation.force_flush()
    instrumentation.force_flush()
    spans = list(memory.get_finished_spans())
    tracescore.shutdown()
    if len(spans) != count:
        raise RuntimeError(f"the SDK exported {len(spans)} of {count} spans")
    return spans


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def export(bootstrap: str, topic: str, layout: str, spans: Sequence[ReadableSpan]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) to export and flush every span."""
    exporter = KafkaSpanExporter(bootstrap, topic, settings=KafkaProducerSettings(trace_messages=layout))
    warm = spans[:BATCH]  # the producer connects and learns the topic's partitions outside the timing
    exporter.export(warm)
    if not exporter.force_flush(120_000):
        raise RuntimeError("warm-up export failed")
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(BATCH, len(spans), BATCH):
        exporter.export(spans[start : start + BATCH])
    flushed = exporter.force_flush(300_000)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    exporter.shutdown()
    if not flushed or exporter.accounting.delivered != len(spans) or exporter.accounting.dropped:
        raise RuntimeError(
            f"{layout}: delivered {exporter.accounting.delivered}, {exporter.accounting.dropped}"
        )
    return cpu, wall


def read(bootstrap: str, topic: str, expected_spans: int) -> tuple[float, int, int]:
    """(CPU seconds, messages, bytes) to poll the topic to its end and decode every message."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        spans = messages = size = 0
        cpu = time.process_time()
        deadline = time.monotonic() + 300
        while spans < expected_spans and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                for record in batch:
                    spans += len(decode_message(record.value))
                    messages += 1
                    size += len(record.value)
        cpu = time.process_time() - cpu
    finally:
        consumer.close()
    if spans != expected_spans:
        raise RuntimeError(f"read {spans} of {expected_spans} spans")
    return cpu, messages, size


def run(bootstrap: str, spans: Sequence[ReadableSpan], partitions: int) -> None:
    prefix = f"layout-{uuid.uuid4().hex[:8]}"
    for layout in ("per_trace", "per_partition"):
        topic = f"{prefix}.{layout}"
        create_topic(bootstrap, topic, partitions)
        timed = len(spans) - BATCH
        export_cpu, export_wall = export(bootstrap, topic, layout, spans)
        read_cpu, messages, size = read(bootstrap, topic, len(spans))
        print(
            f"{layout:>13}: {messages} messages ({len(spans) / messages:.1f} spans, "
            f"{size / messages / 1024:.0f} KiB each); export {timed / export_cpu:,.0f} spans/CPU-s "
            f"({timed / export_wall:,.0f} spans/s wall); "
            f"poll + decode {len(spans) / read_cpu:,.0f} spans/CPU-s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--spans", type=int, default=40_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--bootstrap", help="an existing broker (default: start one)")
    args = parser.parse_args()
    spans = make_spans(args.spans)
    print(f"{len(spans)} one-span @tracescore.rag traces, {args.partitions} partitions, batches of {BATCH}")
    if args.bootstrap:
        run(args.bootstrap, spans, args.partitions)
        return
    with KafkaBroker(partitions=args.partitions) as broker:
        run(broker.bootstrap_servers, spans, args.partitions)


if __name__ == "__main__":
    main()
