"""The real OpenTelemetry Collector in tracescore's pipeline, against the real Kafka broker.

    app --OTLP/HTTP--> Collector (otlp-to-kafka.yaml) --> spans topic --> tracescore consumer
                                                          |    ^                |
                                                          |    +-- evaluation --+
                                                          v        spans
                       Collector (kafka-to-backend.yaml, its OTLP backend swapped for a file)

The application's exporter also hands every batch, unchanged, to tracescore's own KafkaSpanExporter in both
layouts (per trace to a second topic, per partition to a third), so what the Collector writes is compared
with what tracescore writes. That both configs are valid for this Collector build: test_collector_configs.py.
"""

from __future__ import annotations

import json
import sys
import textwrap
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _zygote import run
from collector_helpers import (
    COLLECTORS,
    REPO,
    CollectorProcess,
    create_topics,
    egress_to_file,
)
from google.protobuf.json_format import MessageToDict
from kafka.consumer.fetcher import ConsumerRecord
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from service_processes import checkout_env

from tracescore.consume import (
    ConsumerSettings,
    ConsumerStats,
    EvaluationConsumer,
    decode_message,
)
from tracescore.extract import extract
from tracescore.model import EvaluationRecord, Trace
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.collector import ingest_env
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic, wait_for_records

pytestmark = pytest.mark.kafka

PARTITIONS = 6
CONTEXT = [
    "The Oberoi Group is a hotel company with its head office in Delhi.",
    "It was founded in 1934 and operates 31 luxury hotels.",
]
ANSWERS = {
    "Where is the Oberoi Group's head office?": "The head office is in Delhi.",
    "What kind of company is the Oberoi Group?": "The Oberoi Group is a hotel company.",
    "When was the Oberoi Group founded?": "It was founded in 1934.",
    "How many hotels does the Oberoi Group operate?": "It operates 31 luxury hotels.",
    "Who founded the Oberoi Group?": "It was founded by Ratan Tata in Mumbai in 1952.",
    "Where is the Oberoi Group listed?": "It is listed on the London Stock Exchange since 1990.",
}
UNFAITHFUL = {"Who founded the Oberoi Group?", "Where is the Oberoi Group listed?"}

# A separate process, as a real application: tracescore.init with an OTLP/HTTP exporter pointing at the
# Collector. The exporter is a tee that also hands each batch to tracescore's KafkaSpanExporter, in its
# per-trace layout (the Collector's) and in its default per-partition layout.
APP = """
import json
import sys

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import tracescore
from tracescore.export import KafkaProducerSettings, KafkaSpanExporter

endpoint, bootstrap, direct_topic, batched_topic = sys.argv[1:5]
answers, context = json.loads(sys.argv[5]), json.loads(sys.argv[6])


class Tee(SpanExporter):
    def __init__(self, *exporters):
        self.exporters = exporters
        self.failures = 0

    def export(self, spans):
        results = [exporter.export(spans) for exporter in self.exporters]
        self.failures += sum(result is not SpanExportResult.SUCCESS for result in results)
        return SpanExportResult.FAILURE if self.failures else SpanExportResult.SUCCESS

    def shutdown(self):
        for exporter in self.exporters:
            exporter.shutdown()

    def force_flush(self, timeout_millis=30_000):
        return all(exporter.force_flush(timeout_millis) for exporter in self.exporters)


tee = Tee(
    OTLPSpanExporter(endpoint=endpoint),
    KafkaSpanExporter(bootstrap, direct_topic, settings=KafkaProducerSettings(trace_messages="per_trace")),
    KafkaSpanExporter(bootstrap, batched_topic),
)
tracescore.init(service_name="collector-app", exporter=tee)


@tracescore.rag(route="/ask")
def answer(query, contexts):
    return answers[query]


for query in answers:
    answer(query, context)
tracescore.shutdown()
sys.exit(1 if tee.failures else 0)
"""


@dataclass
class PipelineRun:
    bootstrap: str
    spans_topic: str
    direct_topic: str
    collector_messages: list[ConsumerRecord]  # what the Collector wrote, before the consumer ran
    direct_messages: list[ConsumerRecord]  # what KafkaSpanExporter wrote for the same spans, per trace
    batched_messages: list[ConsumerRecord]  # ... per partition (its default)
    stats: ConsumerStats
    evaluations: list[EvaluationRecord]


@pytest.fixture(scope="module")
def pipeline(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory
) -> PipelineRun:
    """App -> Collector (otlp-to-kafka.yaml) -> Kafka -> EvaluationConsumer, run once for this module."""
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"c{uuid.uuid4().hex[:10]}"
    spans_topic, direct_topic, batched_topic = f"{prefix}.spans", f"{prefix}.direct", f"{prefix}.batched"
    create_topics(bootstrap, [spans_topic, direct_topic, batched_topic], PARTITIONS)
    tmp = tmp_path_factory.mktemp("otlp-to-kafka")
    env, http_port = ingest_env(bootstrap, spans_topic)
    ingest = CollectorProcess(otelcol, [COLLECTORS / "otlp-to-kafka.yaml"], env, tmp / "otelcol.log")
    with ingest:
        app = run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(APP),
                f"http://127.0.0.1:{http_port}/v1/traces",
                bootstrap,
                direct_topic,
                batched_topic,
                json.dumps(ANSWERS),
                json.dumps(CONTEXT),
            ],
            timeout=120,
            cwd=REPO,
            env=checkout_env(),
        )
        assert app.returncode == 0, f"app failed:\n{app.stderr}\nCollector log:\n{ingest.log()}"
        collector_messages = wait_for_records(bootstrap, spans_topic, len(ANSWERS))
        assert len(collector_messages) == len(ANSWERS), ingest.log()
    direct_messages = read_topic(bootstrap, direct_topic)
    assert len(direct_messages) == len(ANSWERS)
    batched_messages = read_topic(bootstrap, batched_topic)

    evaluations: list[EvaluationRecord] = []
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        topic=spans_topic,
        group_id=f"{prefix}.group",
        evaluations_topic=f"{prefix}.evaluations",
        dlq_topic=f"{prefix}.dlq",
        idle_timeout_s=3,
        max_records=len(ANSWERS),
    )
    consumer = EvaluationConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=evaluations.append
    )
    stats = consumer.run()
    return PipelineRun(
        bootstrap,
        spans_topic,
        direct_topic,
        collector_messages,
        direct_messages,
        batched_messages,
        stats,
        evaluations,
    )


def _trace_ids(value: bytes) -> set[str]:
    return {span.trace_id for span in decode_message(value)}


def _content(value: bytes) -> list[dict[str, Any]]:
    """An ExportTraceServiceRequest as one entry per span with its resource and scope, sorted by span id:
    equal content whatever the order of resources, scopes and spans in the message."""
    request = ExportTraceServiceRequest.FromString(value)
    entries = [
        {
            "resource": MessageToDict(resource_spans.resource),
            "resource_schema_url": resource_spans.schema_url,
            "scope": MessageToDict(scope_spans.scope),
            "scope_schema_url": scope_spans.schema_url,
            "span": MessageToDict(span),
        }
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    return sorted(entries, key=lambda entry: entry["span"]["spanId"])


def _by_trace(messages: list[ConsumerRecord]) -> dict[str, ConsumerRecord]:
    by_trace = {}
    for message in messages:
        (trace_id,) = _trace_ids(message.value)
        by_trace[trace_id] = message
    return by_trace


# b. App -> Collector -> Kafka -> tracescore.


def test_collector_messages_are_keyed_by_hex_trace_id(pipeline: PipelineRun) -> None:
    for message in pipeline.collector_messages:
        trace_ids = _trace_ids(message.value)
        assert len(trace_ids) == 1, "partition_traces_by_id writes one trace per message"
        assert message.key is not None
        key = message.key.decode()
        assert len(key) == 32 and key == key.lower() and key == next(iter(trace_ids))
    assert len({m.key for m in pipeline.collector_messages}) == len(ANSWERS)


def test_collector_spans_decode_as_rag_spans_and_are_scored(pipeline: PipelineRun) -> None:
    rag_spans = []
    for message in pipeline.collector_messages:
        spans = decode_message(message.value)
        found = extract(Trace(spans[0].trace_id, tuple(spans)))
        assert found.skips == [], found.skips
        rag_spans += found.interactions
    assert sorted(r.record.query for r in rag_spans) == sorted(ANSWERS)
    assert {(r.span.service_name, r.route) for r in rag_spans} == {("collector-app", "/ask")}

    stats = pipeline.stats
    assert stats.dead_letters == 0 and stats.skipped == Counter()
    assert stats.scored == len(ANSWERS) and stats.evaluations == len(ANSWERS)
    by_span = {r.span.span_id: r for r in rag_spans}
    scores = {}
    for evaluation in pipeline.evaluations:
        rag = by_span[evaluation.span_id]
        assert evaluation.trace_id == rag.span.trace_id
        assert (evaluation.metric, evaluation.service_name, evaluation.route) == (
            "faithfulness",
            "collector-app",
            "/ask",
        )
        scores[rag.record.query] = evaluation.score
    assert all(scores[q] is not None and scores[q] < 0.5 for q in UNFAITHFUL), scores
    assert all(scores[q] is not None and scores[q] >= 0.5 for q in set(ANSWERS) - UNFAITHFUL), scores


# c. What the Collector writes is what tracescore's KafkaSpanExporter writes.


def test_collector_and_kafka_span_exporter_write_the_same_otlp(pipeline: PipelineRun) -> None:
    collector, direct = _by_trace(pipeline.collector_messages), _by_trace(pipeline.direct_messages)
    assert collector.keys() == direct.keys()
    for trace_id, message in collector.items():
        assert message.key == direct[trace_id].key == trace_id.encode()
        assert _content(message.value) == _content(direct[trace_id].value)
        # The raw bytes differ only in encoding choices, never in content: Go's pdata writes the fields in
        # another order and writes the empty `trace_state` (a zero-length field 4) that Python omits. So
        # the Collector's message, decoded and re-encoded by Python, is byte for byte ours.
        reencoded = ExportTraceServiceRequest.FromString(message.value).SerializeToString()
        assert reencoded == direct[trace_id].value


def test_collector_and_kafka_span_exporter_pick_the_same_partition(pipeline: PipelineRun) -> None:
    collector, direct = _by_trace(pipeline.collector_messages), _by_trace(pipeline.direct_messages)
    assert {t: m.partition for t, m in collector.items()} == {t: m.partition for t, m in direct.items()}
    # With six traces over six partitions, a hasher mismatch (the Collector's default sarama_compat FNV-1a
    # against kafka-python's murmur2) would show; make sure the traces were actually spread.
    assert len({m.partition for m in collector.values()}) > 1


def test_the_per_partition_layout_puts_each_trace_on_the_collector_s_partition(pipeline: PipelineRun) -> None:
    collector = {t: m.partition for t, m in _by_trace(pipeline.collector_messages).items()}
    batched: dict[str, set[int]] = {}
    for message in pipeline.batched_messages:
        for trace_id in _trace_ids(message.value):
            batched.setdefault(trace_id, set()).add(message.partition)
    assert {t: p for t, (p,) in batched.items()} == collector


# d. The Collector's kafka receiver reads the evaluation spans and forwards them with the app's spans.


def test_evaluation_spans_reach_the_backend_in_their_traces(
    otelcol: Path, pipeline: PipelineRun, tmp_path: Path
) -> None:
    in_kafka = [span for m in read_topic(pipeline.bootstrap, pipeline.spans_topic) for span in _spans(m)]
    assert len(in_kafka) == 2 * len(ANSWERS), "the app's spans and one evaluation span per scored span"
    # The documented config with its OTLP backend swapped for a file.
    backend, log = egress_to_file(otelcol, pipeline.bootstrap, pipeline.spans_topic, len(in_kafka), tmp_path)
    assert len(backend) == len(in_kafka), log

    assert {(s["traceId"], s["spanId"]) for s in backend} == {(s["traceId"], s["spanId"]) for s in in_kafka}
    app_spans = {s["spanId"]: s for s in backend if s["scope"] == "tracescore"}
    eval_spans = [s for s in backend if s["scope"] == "tracescore.consumer"]
    assert len(app_spans) == len(eval_spans) == len(ANSWERS)
    for span in eval_spans:
        scored = app_spans[span["parentSpanId"]]
        assert span["traceId"] == scored["traceId"], "the evaluation span joins the scored span's trace"
        assert span["attributes"]["gen_ai.evaluation.name"] == "faithfulness"
        assert span["attributes"]["tracescore.evaluated_span_id"] == scored["spanId"]
        assert 0.0 <= span["attributes"]["gen_ai.evaluation.score.value"] <= 1.0
        assert span["resource"]["service.name"] == "tracescore"


def _spans(message: ConsumerRecord) -> Iterator[dict[str, Any]]:
    for span in decode_message(message.value):
        yield {"traceId": span.trace_id, "spanId": span.span_id}
