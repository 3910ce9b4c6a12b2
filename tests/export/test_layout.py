"""The exporter's message layouts: per partition (default) and per trace, as bytes (encode_partition_messages)
and through a real broker, where a trace's spans must land exactly where a message keyed by its trace id
lands with a plain KafkaProducer."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Sequence

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.partitioner import murmur2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from tracescore.export import KafkaProducerSettings, KafkaSpanExporter, encode_partition_messages
from tracescore.testing.kafka_topics import read_topic


class _SeededIds(IdGenerator):
    """Trace and span ids from a seeded generator: which partition each trace lands on (and so which
    instrumentation scopes a partition's message holds) is the same in every run."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self._rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self._rng.getrandbits(128) or 1


def make_traces(
    traces: int, spans_per_trace: Sequence[int] = (1, 2, 3), text_bytes: int = 200
) -> list[ReadableSpan]:
    """`traces` traces of 1-3 spans (root and children, two instrumentation scopes), ended interleaved as
    concurrent requests end, with `text_bytes` of attribute text per span."""
    rng = random.Random(7)
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: "rag-api"}), id_generator=_SeededIds(traces)
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracers = [provider.get_tracer("tracescore"), provider.get_tracer("openinference.instrumentation")]
    for index in range(traces):
        with tracers[0].start_as_current_span(f"rag-{index}") as root:
            root.set_attribute("input.value", f"question {index} " + "x" * text_bytes)
            for child in range(rng.choice(spans_per_trace) - 1):
                with tracers[child % 2].start_as_current_span(f"rag-{index}.{child}") as span:
                    span.set_attribute("output.value", "y" * text_bytes)
    provider.shutdown()
    spans = list(memory.get_finished_spans())
    rng.shuffle(spans)
    return spans


def java_partition(trace_id: int, partitions: Sequence[int]) -> int:
    """Where Kafka's Java client (and kafka-python's DefaultPartitioner) puts a message keyed by the trace id:
    positive murmur2 of the key modulo the partition count, over the sorted partition ids."""
    ordered = sorted(partitions)
    return ordered[(murmur2(format(trace_id, "032x").encode()) & 0x7FFFFFFF) % len(ordered)]


def decoded(value: bytes) -> list[tuple[int, int, str]]:
    """(trace id, span id, name) of every span in one message."""
    request = ExportTraceServiceRequest.FromString(value)
    return [
        (int.from_bytes(s.trace_id, "big"), int.from_bytes(s.span_id, "big"), s.name)
        for rs in request.resource_spans
        for ss in rs.scope_spans
        for s in ss.spans
    ]


def ids(spans: Sequence[ReadableSpan]) -> list[tuple[int, int, str]]:
    return sorted((s.context.trace_id, s.context.span_id, s.name) for s in spans)


# --- encode_partition_messages ----------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [[0], [0, 1, 2], [4, 0, 2, 1, 3, 5, 6, 7, 8, 9, 10, 11]])
def test_each_trace_goes_where_the_default_partitioner_puts_its_trace_id_key(partitions: list[int]) -> None:
    spans = make_traces(300)
    messages = encode_partition_messages(spans, partitions, 1 << 20)
    assert len(messages) == len({java_partition(s.context.trace_id, partitions) for s in spans})
    seen = []
    for partition, _key, value, count in messages:
        content = decoded(value)
        assert count == len(content)
        assert {java_partition(trace_id, partitions) for trace_id, _, _ in content} == {partition}
        seen += content
    assert sorted(seen) == ids(spans), "every span exactly once"


def test_a_partition_that_fits_is_one_message_with_the_otlp_encoders_bytes() -> None:
    spans = make_traces(50)
    by_partition = defaultdict(list)
    for span in spans:
        by_partition[java_partition(span.context.trace_id, [0, 1, 2])].append(span)
    for partition, _key, value, _count in encode_partition_messages(spans, [0, 1, 2], 1 << 20):
        # Same content as the OTLP exporters would send for those spans (traces grouped together).
        expected = ExportTraceServiceRequest.FromString(
            encode_spans(by_partition[partition]).SerializeToString()
        )
        assert sorted(decoded(value)) == sorted(decoded(expected.SerializeToString()))
        request = ExportTraceServiceRequest.FromString(value)
        assert len(request.resource_spans) == 1, "one resource for all the traces, not one per trace"
        assert {ss.scope.name for ss in request.resource_spans[0].scope_spans} == {
            "tracescore",
            "openinference.instrumentation",
        }


def test_messages_are_cut_to_max_bytes_and_a_cut_trace_keeps_its_partition() -> None:
    spans = make_traces(120, spans_per_trace=(3, 6, 12), text_bytes=400)
    max_bytes = 6_000
    messages = encode_partition_messages(spans, [0, 1, 2], max_bytes)
    assert all(len(value) <= max_bytes for _, _, value, _ in messages)
    seen = []
    partitions_of: dict[int, set[int]] = defaultdict(set)
    messages_of: dict[int, int] = defaultdict(int)
    for partition, _key, value, count in messages:
        content = decoded(value)
        assert count == len(content)
        seen += content
        for trace_id in {t for t, _, _ in content}:
            partitions_of[trace_id].add(partition)
            messages_of[trace_id] += 1
    assert sorted(seen) == ids(spans), "every span exactly once"
    assert any(n > 1 for n in messages_of.values()), "some trace was cut across messages"
    assert all(len(p) == 1 for p in partitions_of.values())
    assert all(partitions_of[t] == {java_partition(t, [0, 1, 2])} for t in partitions_of)
    # Packed, not one span per message: the limit is used.
    assert sum(len(value) for _, _, value, _ in messages) > 0.8 * max_bytes * (len(messages) - 3)


def test_a_span_bigger_than_max_bytes_is_a_message_of_its_own() -> None:
    small = make_traces(10, spans_per_trace=(1,))
    big = make_traces(1, spans_per_trace=(1,), text_bytes=20_000)
    messages = encode_partition_messages([*small, *big], [0], 5_000)
    [alone] = [m for m in messages if len(m[2]) > 5_000]
    assert alone[3] == 1 and decoded(alone[2]) == ids(big)
    assert alone[1] == format(big[0].context.trace_id, "032x").encode()
    assert sum(count for *_, count in messages) == 11


def test_key_is_the_hex_trace_id_for_one_trace_and_none_for_several() -> None:
    one = make_traces(1, spans_per_trace=(3,))
    [(_, key, _, count)] = encode_partition_messages(one, [0, 1, 2], 1 << 20)
    assert key == format(one[0].context.trace_id, "032x").encode() and count == 3
    many = make_traces(40)
    for _, key, value, _ in encode_partition_messages(many, [0], 1 << 20):
        assert len({t for t, _, _ in decoded(value)}) > 1 and key is None
    # Cut into one trace per message: every message is keyed by its trace.
    for _, key, value, _ in encode_partition_messages(many, [0], 1):
        [trace_id] = {t for t, _, _ in decoded(value)}
        assert key == format(trace_id, "032x").encode()


def test_no_spans_no_messages_and_no_partitions_is_an_error() -> None:
    assert encode_partition_messages([], [0, 1], 1_000) == []
    with pytest.raises(ValueError, match="at least one partition"):
        encode_partition_messages(make_traces(1), [], 1_000)


# --- the setting ------------------------------------------------------------------------------------


def test_messages_fit_one_producer_batch_and_the_request_size() -> None:
    assert KafkaProducerSettings().span_message_max_bytes() == 256 * 1024
    assert (
        KafkaProducerSettings(batch_size=1 << 20, max_request_size=1 << 20).span_message_max_bytes() < 1 << 20
    )
    assert KafkaProducerSettings(max_request_size=1024).span_message_max_bytes() > 0


# --- through the broker -----------------------------------------------------------------------------


def _create(bootstrap: str, *topics: str, partitions: int = 3) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1) for topic in topics])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            described = admin.describe_topics(list(topics))
            if all(len(t["partitions"]) == partitions for t in described):
                return
            time.sleep(0.2)
        raise AssertionError(f"topics {topics} not ready")
    finally:
        admin.close()


def _probe_partitions(bootstrap: str, topic: str, trace_ids: set[int]) -> dict[int, int]:
    """The partition a plain KafkaProducer picks for a message keyed by each hex trace id."""
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        futures = {t: producer.send(topic, key=format(t, "032x").encode(), value=b"probe") for t in trace_ids}
        return {t: future.get(timeout=60).partition for t, future in futures.items()}
    finally:
        producer.close()


def export_all(
    bootstrap: str, topic: str, spans: list[ReadableSpan], settings: KafkaProducerSettings | None = None
) -> None:
    """Export `spans` in one batch and wait until Kafka has every one."""
    exporter = KafkaSpanExporter(bootstrap, topic, settings=settings)
    try:
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        assert exporter.force_flush(60_000)
    finally:
        exporter.shutdown(timeout_millis=10_000)
    assert exporter.accounting.delivered == len(spans) and not exporter.accounting.dropped


@pytest.mark.kafka
def test_per_partition_through_the_broker_puts_each_trace_where_its_key_lands(
    bootstrap: str, topic_prefix: str
) -> None:
    topic, probe = f"{topic_prefix}.spans", f"{topic_prefix}.probe"
    _create(bootstrap, topic, probe)
    spans = make_traces(200)
    traces = {s.context.trace_id for s in spans}
    export_all(bootstrap, topic, spans)

    records = read_topic(bootstrap, topic, timeout_s=30)
    assert len(records) < len(traces)
    partitions_of: dict[int, set[int]] = defaultdict(set)
    seen = []
    for record in records:
        content = decoded(record.value)
        seen += content
        for trace_id in {t for t, _, _ in content}:
            partitions_of[trace_id].add(record.partition)
        if record.key is not None:
            assert {t for t, _, _ in content} == {int(record.key, 16)}
    assert sorted(seen) == ids(spans)
    assert all(len(p) == 1 for p in partitions_of.values()), "a trace's spans on one partition"
    landed = _probe_partitions(bootstrap, probe, traces)
    assert {t: p for t, (p,) in partitions_of.items()} == landed
    assert len(set(landed.values())) == 3


@pytest.mark.kafka
def test_per_trace_through_the_broker_is_one_message_per_trace_keyed_by_its_id(
    bootstrap: str, topic_prefix: str
) -> None:
    topic, probe = f"{topic_prefix}.spans", f"{topic_prefix}.probe"
    _create(bootstrap, topic, probe)
    spans = make_traces(60)
    export_all(bootstrap, topic, spans, KafkaProducerSettings(trace_messages="per_trace"))

    records = read_topic(bootstrap, topic, timeout_s=30)
    traces = {s.context.trace_id for s in spans}
    assert len(records) == len(traces)
    landed = _probe_partitions(bootstrap, probe, traces)
    for record in records:
        assert record.key is not None
        [trace_id] = {t for t, _, _ in decoded(record.value)}
        assert record.key == format(trace_id, "032x").encode()
        assert record.partition == landed[trace_id]
    assert sorted(s for r in records for s in decoded(r.value)) == ids(spans)


@pytest.mark.kafka
def test_a_span_over_the_request_size_is_dropped_alone(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.spans"
    _create(bootstrap, topic)
    small = make_traces(20, spans_per_trace=(1,), text_bytes=10)
    big = make_traces(1, spans_per_trace=(1,), text_bytes=5_000)
    exporter = KafkaSpanExporter(bootstrap, topic, settings=KafkaProducerSettings(max_request_size=2_048))
    try:
        assert exporter.export([*small[:10], *big, *small[10:]]) is SpanExportResult.FAILURE
        assert not exporter.force_flush(60_000), "a span was dropped"
    finally:
        exporter.shutdown(timeout_millis=10_000)
    assert exporter.accounting.delivered == 20
    assert exporter.accounting.dropped == {"unavailable": 1}
    records = read_topic(bootstrap, topic, timeout_s=30)
    assert sorted(s for r in records for s in decoded(r.value)) == ids(small)


@pytest.mark.kafka
def test_an_invalid_topic_is_a_counted_drop_never_an_exception(bootstrap: str) -> None:
    exporter = KafkaSpanExporter(
        bootstrap, "not a valid topic!", settings=KafkaProducerSettings(max_block_ms=2_000)
    )
    spans = make_traces(5)
    try:
        assert exporter.export(spans) is SpanExportResult.FAILURE
    finally:
        exporter.shutdown(timeout_millis=1_000)
    assert exporter.accounting.dropped == {"unavailable": len(spans)}
