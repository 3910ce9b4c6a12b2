"""KafkaSpanExporter and its encoding: the bytes it writes, and delivery through a real Kafka broker (the
session broker for the happy path, a broker of this module's own for outages, and a closed port for "no
broker at all")."""

from __future__ import annotations

import gc
import logging
import threading
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.consume.kafka_helpers import run_instrumented_app
from tracescore.export import (
    BoundedSpanProcessor,
    KafkaProducerSettings,
    KafkaSpanExporter,
    encode_trace_messages,
)
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic


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


# --- KafkaSpanExporter through a real broker --------------------------------------------------------


def _pipeline(exporter: KafkaSpanExporter, **processor: Any) -> tuple[TracerProvider, BoundedSpanProcessor]:
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "rag-api"}))
    bounded = BoundedSpanProcessor(exporter, **processor)
    provider.add_span_processor(bounded)
    return provider, bounded


def _make(provider: TracerProvider, count: int, start: int = 0) -> None:
    tracer = provider.get_tracer("tracescore")
    for index in range(start, start + count):
        with tracer.start_as_current_span(f"rag-{index}") as span:
            span.set_attribute("input.value", f"question {index}")


@pytest.mark.kafka
def test_every_span_reaches_the_topic_and_is_counted_delivered(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.spans"
    exporter = KafkaSpanExporter(bootstrap, topic)
    provider, bounded = _pipeline(exporter, schedule_delay_s=0.05)
    _make(provider, 20)
    bounded.shutdown(timeout_millis=60_000)

    records = read_topic(bootstrap, topic, timeout_s=30)
    names = set()
    for record in records:
        request = ExportTraceServiceRequest.FromString(record.value)
        spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        # Per partition: keyed by the trace id when the message holds one trace, else no key.
        traces = {s.trace_id.hex().encode() for s in spans}
        assert record.key == (traces.pop() if len(traces) == 1 else None)
        names.update(s.name for s in spans)
    assert names == {f"rag-{i}" for i in range(20)}
    assert exporter.accounting.delivered == 20
    assert not exporter.accounting.dropped


@pytest.mark.kafka
def test_an_application_s_first_export_to_a_topic_not_created_yet_logs_no_error(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The first start of an app before any consumer: the broker would auto-create the topic at the first
    # send, which kafka-python logs as "ERROR Topic X not found in cluster metadata" in the app's log.
    topic = f"{topic_prefix}.first"
    exporter = KafkaSpanExporter(bootstrap, topic)
    provider, bounded = _pipeline(exporter, schedule_delay_s=60)
    _make(provider, 5)
    with caplog.at_level(logging.DEBUG):
        try:
            assert bounded.force_flush(60_000) and exporter.accounting.delivered == 5
        finally:
            bounded.shutdown(timeout_millis=10_000)
    errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], errors
    assert f"created topics: {topic}" in caplog.messages, "created by the exporter, not auto-created"
    assert len(read_topic(bootstrap, topic, timeout_s=30)) >= 1


# A user's app (run_instrumented_app adds tracescore.init and shutdown): it logs warnings and errors to
# stderr, as apps do. The race is replayed deterministically: each transport the SDK's clients close then
# has its socket read, as kafka-python's network thread does when it woke for a readable socket just before
# the close (it finds the transport gone and logs a traceback).
RACING_APP = """
import logging

from kafka.net.transport import KafkaTCPTransport

logging.basicConfig(level=logging.WARNING)
close = KafkaTCPTransport.close


def close_racing_a_read(self):
    close(self)
    self._sock_recv()


KafkaTCPTransport.close = close_racing_a_read


@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "The head office is in Delhi."


answer("Where is the Oberoi Group's head office?", ["The Oberoi Group's head office is in Delhi."])
"""


@pytest.mark.kafka
def test_an_app_shutting_down_the_sdk_prints_no_traceback_of_kafka_pythons_close_race(
    bootstrap: str, topic_prefix: str
) -> None:
    """kafka-python logs an ERROR with a traceback when its network thread reads a socket the SDK's close
    just closed (nothing is lost): the commands drop it, and an application's log must not show it either."""
    done = run_instrumented_app(bootstrap, f"{topic_prefix}.spans", RACING_APP)
    assert "Traceback" not in done.stderr and "Error receiving network data" not in done.stderr, done.stderr
    assert len(read_topic(bootstrap, f"{topic_prefix}.spans", timeout_s=30)) >= 1


@pytest.mark.kafka
def test_force_flush_returns_once_spans_are_delivered_to_a_topic_still_being_created(
    bootstrap: str, topic_prefix: str
) -> None:
    # Created now and not waited for: the first sends meet a partition without a leader yet and are retried
    # by the producer, so "handed to the exporter" and "delivered" are seconds apart.
    topic = f"{topic_prefix}.new"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 3, 1)])
    finally:
        admin.close()
    exporter = KafkaSpanExporter(bootstrap, topic)
    provider, bounded = _pipeline(exporter, schedule_delay_s=60)  # only the flush sends anything
    _make(provider, 20)
    try:
        assert bounded.force_flush(60_000)
        assert exporter.accounting.delivered == 20, "force_flush() returned True before delivery"
        assert not exporter.accounting.dropped
        names = set()
        for record in read_topic(bootstrap, topic, timeout_s=30):
            request = ExportTraceServiceRequest.FromString(record.value)
            names.update(s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
        assert names == {f"rag-{i}" for i in range(20)}
        _make(provider, 5, start=20)
        assert bounded.force_flush(60_000) and exporter.accounting.delivered == 25
    finally:
        bounded.shutdown(timeout_millis=10_000)


def test_force_flush_is_false_when_spans_were_dropped(closed_port: int) -> None:
    exporter = KafkaSpanExporter(
        f"127.0.0.1:{closed_port}", "spans", settings=KafkaProducerSettings(max_block_ms=500)
    )
    provider, bounded = _pipeline(exporter, schedule_delay_s=60)
    _make(provider, 3)
    try:
        assert not bounded.force_flush(30_000), "no broker: nothing was delivered"
        assert exporter.accounting.dropped == {"unavailable": 3}
        assert bounded.force_flush(30_000), "nothing ended since the last flush, nothing dropped since"
    finally:
        bounded.shutdown(timeout_millis=1_000)


def test_no_broker_at_all_costs_counted_drops_and_a_bounded_shutdown(
    caplog: pytest.LogCaptureFixture, closed_port: int
) -> None:
    # The worker waits 20 s for a broker; shutdown must not inherit that wait.
    exporter = KafkaSpanExporter(
        f"127.0.0.1:{closed_port}", "spans", settings=KafkaProducerSettings(max_block_ms=20_000)
    )
    provider, bounded = _pipeline(exporter, max_queue_size=100, max_batch_size=10, schedule_delay_s=0.01)
    _make(provider, 3_000)  # never raises, whatever the exporter is doing

    done = threading.Event()
    with caplog.at_level(logging.WARNING, logger="tracescore.export"):
        shutdown = threading.Thread(target=lambda: (bounded.shutdown(timeout_millis=1_000), done.set()))
        shutdown.start()
        assert done.wait(10), "shutdown() did not return within its 1 s bound (allowing 10 s of slack)"

    accounting = exporter.accounting
    assert accounting.delivered == 0
    assert sum(accounting.dropped.values()) == 3_000, accounting.dropped
    assert accounting.dropped["queue_full"] >= 2_800
    drop_logs = [r for r in caplog.records if r.name == "tracescore.export" and "dropped" in r.getMessage()]
    assert len(drop_logs) == 1, [r.getMessage() for r in drop_logs]  # one summary, never one line per span
    assert "3000 spans" in drop_logs[0].getMessage()


@pytest.fixture(autouse=True, scope="module")
def _reap_producers_left_by_outages() -> Iterator[None]:
    """kafka-python leaves the sockets of failed connection attempts (a bootstrap that never found a broker,
    reconnects to a stopped one) to the garbage collector. Collect them here, once the export threads left
    waiting for a broker are done, so they never reach a later test's resource checks."""
    yield
    for thread in threading.enumerate():
        if thread.name == "tracescore-export":
            thread.join(60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.fixture(scope="module")
def own_broker() -> Iterator[KafkaBroker]:
    # Outages are staged on this module's own broker, so the session broker stays up for every other test.
    with KafkaBroker(partitions=1) as broker:
        yield broker


@pytest.mark.kafka
def test_an_outage_inside_the_delivery_timeout_loses_and_drops_nothing(
    own_broker: KafkaBroker, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.outage"
    exporter = KafkaSpanExporter(own_broker.bootstrap_servers, topic)
    provider, bounded = _pipeline(exporter, schedule_delay_s=0.05)
    _make(provider, 100)
    assert bounded.force_flush(60_000)
    own_broker.stop()
    try:
        _make(provider, 200, start=100)  # handed to the producer while the broker is down
        assert not bounded.force_flush(2_000), "nothing can be delivered while the broker is down"
        assert exporter.accounting.delivered == 100
    finally:
        own_broker.start()
    assert bounded.force_flush(90_000), "delivered once the broker is back, inside the delivery timeout"
    assert exporter.accounting.delivered == 300
    bounded.shutdown(timeout_millis=90_000)

    names = set()
    for record in read_topic(own_broker.bootstrap_servers, topic, timeout_s=30):
        request = ExportTraceServiceRequest.FromString(record.value)
        names.update(s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
    assert names == {f"rag-{i}" for i in range(300)}
    assert exporter.accounting.delivered == 300
    assert not exporter.accounting.dropped, exporter.accounting.dropped


@pytest.mark.kafka
def test_records_pending_when_the_broker_is_gone_are_counted_at_a_bounded_shutdown(
    own_broker: KafkaBroker, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.gone"
    exporter = KafkaSpanExporter(own_broker.bootstrap_servers, topic)
    provider, bounded = _pipeline(exporter, schedule_delay_s=0.05)
    _make(provider, 10)
    assert bounded.force_flush(60_000)
    assert exporter.accounting.delivered == 10, "force_flush() returned before the records were delivered"
    own_broker.stop()
    try:
        _make(provider, 50, start=10)
        # Handed to the producer, which cannot deliver them: the flush says so within its bound.
        assert not bounded.force_flush(2_000)
        done = threading.Event()
        errors: list[BaseException] = []

        def stop() -> None:
            try:
                bounded.shutdown(timeout_millis=1_000)
            except BaseException as exc:  # must not happen: shutdown never raises into the app
                errors.append(exc)
            done.set()

        threading.Thread(target=stop).start()
        assert done.wait(30), "shutdown() did not return within its 1 s bound (allowing 30 s of slack)"
    finally:
        own_broker.start()
    assert errors == []
    assert exporter.accounting.delivered == 10
    assert exporter.accounting.dropped == {"shutdown": 50}


# --- settings -------------------------------------------------------------------------------------


def test_producer_defaults_are_safe_for_the_application() -> None:
    config = KafkaProducerSettings().producer_config()
    assert config["acks"] == "all" and config["enable_idempotence"] is True
    assert config["compression_type"] == "gzip" and config["linger_ms"] > 0
    assert config["security_protocol"] == "PLAINTEXT" and "sasl_mechanism" not in config


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_settings_reach_the_producer_and_the_secret_stays_out_of_reprs(mechanism: str) -> None:
    settings = KafkaProducerSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism=mechanism,
        sasl_username="svc",
        sasl_password="s3cr3t-pw",
        ssl_cafile="/etc/ca.pem",
    )
    config = settings.producer_config()
    assert config["sasl_mechanism"] == mechanism
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("svc", "s3cr3t-pw")
    assert config["ssl_cafile"] == "/etc/ca.pem"
    assert "s3cr3t-pw" not in repr(settings) and "s3cr3t-pw" not in str(settings.model_dump())


def test_sasl_without_credentials_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="needs sasl_mechanism, sasl_username and sasl_password"):
        KafkaProducerSettings(security_protocol="SASL_SSL")
    with pytest.raises(ValueError, match="needs security_protocol SASL_PLAINTEXT or SASL_SSL"):
        KafkaProducerSettings(sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p")
