"""KafkaSpanExporter and its encoding, with the Kafka producer replaced at its injection seam."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore.export import KafkaSpanExporter, encode_trace_messages


def make_spans() -> list[ReadableSpan]:
    """Three spans in two traces: a root with a child, and a second root."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("tracescore")
    with tracer.start_as_current_span("first") as first:
        first.set_attribute("input.value", "Capital of France?")
        with tracer.start_as_current_span("first.child") as child:
            child.set_attribute("retrieval.documents.0.document.content", "Paris is the capital.")
    with tracer.start_as_current_span("second") as second:
        second.set_attribute("output.value", "Paris.")
    provider.shutdown()
    return list(memory.get_finished_spans())


def attributes_of(span: Any) -> dict[str, Any]:
    return {kv.key: kv.value.string_value for kv in span.attributes}


class _Delivered:
    """A completed delivery future, like kafka-python's FutureRecordMetadata after the broker acked."""

    def __init__(self, error: Exception | None = None) -> None:
        self._error = error
        self.timeouts: list[float | None] = []

    def get(self, timeout: float | None = None) -> None:
        self.timeouts.append(timeout)
        if self._error is not None:
            raise self._error


class RecordingProducer:
    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.sent: list[tuple[str, bytes | None, bytes]] = []
        self.futures: list[_Delivered] = []
        self.flushes = 0
        self.closed = False

    def send(self, topic: str, key: bytes | None = None, value: bytes = b"") -> _Delivered:
        self.sent.append((topic, key, value))
        future = _Delivered(self.error)
        self.futures.append(future)
        return future

    def flush(self, timeout: float | None = None) -> None:
        self.flushes += 1

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


def group_by_trace(spans: Sequence[ReadableSpan]) -> dict[int, list[ReadableSpan]]:
    groups: dict[int, list[ReadableSpan]] = {}
    for span in spans:
        groups.setdefault(span.context.trace_id, []).append(span)
    return groups


# --- encode_trace_messages --------------------------------------------------------------------------


def test_one_message_per_trace_keyed_by_hex_trace_id() -> None:
    spans = make_spans()
    messages = encode_trace_messages(spans)
    groups = group_by_trace(spans)
    assert len(groups) == 2
    assert len(messages) == 2
    assert {key for key, _ in messages} == {format(t, "032x").encode() for t in groups}
    for key, _ in messages:
        assert len(key) == 32
        assert key.decode() == key.decode().lower()
        int(key, 16)


def test_message_value_is_an_otlp_export_request_with_the_spans() -> None:
    spans = make_spans()
    by_key = dict(encode_trace_messages(spans))
    for trace_id, group in group_by_trace(spans).items():
        request = ExportTraceServiceRequest()
        request.ParseFromString(by_key[format(trace_id, "032x").encode()])
        [resource_spans] = request.resource_spans
        resource = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
        assert resource[SERVICE_NAME] == "rag-api"
        decoded = [s for scope in resource_spans.scope_spans for s in scope.spans]
        assert sorted(s.name for s in decoded) == sorted(s.name for s in group)
        for proto_span in decoded:
            assert int.from_bytes(proto_span.trace_id, "big") == trace_id
            original = next(s for s in group if s.name == proto_span.name)
            assert int.from_bytes(proto_span.span_id, "big") == original.context.span_id
            assert attributes_of(proto_span) == dict(original.attributes or {})
        assert {scope.scope.name for scope in resource_spans.scope_spans} == {"tracescore"}


def test_message_bytes_equal_what_the_otlp_exporters_send() -> None:
    spans = make_spans()
    by_key = dict(encode_trace_messages(spans))
    for trace_id, group in group_by_trace(spans).items():
        assert by_key[format(trace_id, "032x").encode()] == encode_spans(group).SerializeToString()


def test_no_spans_no_messages() -> None:
    assert encode_trace_messages([]) == []


# --- KafkaSpanExporter ------------------------------------------------------------------------------


def test_export_sends_each_trace_to_the_topic_and_waits_for_acks() -> None:
    producer = RecordingProducer()
    exporter = KafkaSpanExporter("unused:9092", "rag_spans", producer=producer, timeout_s=3.0)
    spans = make_spans()

    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert [topic for topic, _, _ in producer.sent] == ["rag_spans", "rag_spans"]
    assert [(key, value) for _, key, value in producer.sent] == encode_trace_messages(spans)
    assert all(f.timeouts == [3.0] for f in producer.futures)
    assert exporter.exported_spans == 3
    assert exporter.failed_spans == 0


def test_default_topic_is_otlp_spans() -> None:
    producer = RecordingProducer()
    exporter = KafkaSpanExporter("unused:9092", producer=producer)
    assert exporter.export(make_spans()) is SpanExportResult.SUCCESS
    assert {topic for topic, _, _ in producer.sent} == {"otlp_spans"}


def test_delivery_timeout_is_a_counted_and_logged_failure(caplog: pytest.LogCaptureFixture) -> None:
    producer = RecordingProducer(error=KafkaTimeoutError("no ack from the broker"))
    exporter = KafkaSpanExporter("unused:9092", "rag_spans", producer=producer)
    spans = make_spans()

    with caplog.at_level(logging.ERROR, logger="tracescore.export"):
        assert exporter.export(spans) is SpanExportResult.FAILURE
    assert exporter.failed_spans == len(spans)
    assert exporter.exported_spans == 0
    errors = [r for r in caplog.records if r.name == "tracescore.export" and r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "rag_spans" in errors[0].getMessage()
    assert "no ack from the broker" in errors[0].getMessage()


def test_export_after_shutdown_fails_without_sending() -> None:
    producer = RecordingProducer()
    exporter = KafkaSpanExporter("unused:9092", "rag_spans", producer=producer)
    exporter.shutdown()
    assert producer.flushes == 1
    assert producer.closed

    assert exporter.export(make_spans()) is SpanExportResult.FAILURE
    assert producer.sent == []


def test_force_flush_flushes_the_producer() -> None:
    producer = RecordingProducer()
    exporter = KafkaSpanExporter("unused:9092", producer=producer)
    assert exporter.force_flush() is True
    assert producer.flushes == 1
