"""GenAI messages written as OTel log records, through the real Collector and scored:

    the real opentelemetry-util-genai (EVENT_ONLY) --OTLP/HTTP traces + logs--> Collector
        (collectors/otlp-to-kafka.yaml + genai-log-events.yaml) --> one spans topic --> tracescore consumer

The app is the otel_genai fixture's RAG (fixtures/scenarios/otel_genai.py) in its recorder's env (the util
1.3b0 and the OTel SDK it pins, built by fixtures/record.py, reused): with content capture EVENT_ONLY its
spans carry no text, the chat's messages are only in its `gen_ai.client.inference.operation.details` log
record. Its SDK's span and log record processors hand each batch to an exporter that POSTs the OTLP encoders'
protobuf (what the SDK's OTLP/HTTP exporters send; that package is not in the recorder's env) to the
Collector's /v1/traces and /v1/logs. The Collector writes both to the spans topic, log records keyed by trace
id like the spans (partition_logs_by_trace_id), and the consumer scores each interaction from its log record.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections import defaultdict
from pathlib import Path

import pytest
from _helpers import consumer_settings
from collector_helpers import COLLECTORS, REPO, CollectorProcess, create_topics, egress_to_file

from tracescore.consume import AssemblyCount, EvaluationConsumer, decode_message
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.collector import ingest_env
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer, read_topic, wait_for_records

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from envs import SOURCES  # noqa: E402
from record import ensure_env  # noqa: E402

pytestmark = pytest.mark.kafka

PARTITIONS = 6
APP = """
import json, os, sys, urllib.request

from otel_genai import MODEL, rag  # the recording's app (it sets SPAN_ONLY on import)

os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "EVENT_ONLY"  # read by the handler

from _corpus import INTERACTIONS, QUESTION
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.util.genai.handler import TelemetryHandler

endpoint = sys.argv[1]


def post(path, body):
    request = urllib.request.Request(
        endpoint + path, data=body, headers={"Content-Type": "application/x-protobuf"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, response.status


class Spans(SpanExporter):
    def export(self, spans):
        post("/v1/traces", encode_spans(spans).SerializeToString())
        return SpanExportResult.SUCCESS


class Logs(LogRecordExporter):
    def export(self, batch):
        post("/v1/logs", encode_logs(batch).SerializeToString())
        return LogRecordExportResult.SUCCESS

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=30_000):
        return True


resource = Resource.create({"service.name": "aurora-support-genai-live"})
tracer_provider = TracerProvider(resource=resource)
tracer_provider.add_span_processor(SimpleSpanProcessor(Spans()))
logger_provider = LoggerProvider(resource=resource)
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(Logs()))
handler = TelemetryHandler(
    tracer_provider=tracer_provider,
    logger_provider=logger_provider,
    instrumentation_scope_name="aurora_support.rag",
)
tracer = tracer_provider.get_tracer("app")
runs = {}
for interaction in INTERACTIONS:
    with tracer.start_as_current_span("request") as root:
        rag(handler, QUESTION, interaction.answer, True)
    runs[format(root.get_span_context().trace_id, "032x")] = interaction.faithful
print(json.dumps(runs))
"""


def test_genai_events_written_as_log_records_are_scored_through_the_collector(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    env = SOURCES["otel_genai"]
    ensure_env(env, rebuild=False)
    bootstrap = kafka_broker.bootstrap_servers
    prefix = f"g{uuid.uuid4().hex[:10]}"
    topic = f"{prefix}.spans"
    create_topics(bootstrap, [topic], PARTITIONS)
    collector_env, http_port = ingest_env(bootstrap, topic)
    with CollectorProcess(
        otelcol,
        [COLLECTORS / "otlp-to-kafka.yaml", COLLECTORS / "genai-log-events.yaml"],
        collector_env,
        tmp_path / "otelcol.log",
    ):
        app = subprocess.run(
            [str(env.python), "-c", textwrap.dedent(APP), f"http://127.0.0.1:{http_port}"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=FIXTURES / "scenarios",
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(FIXTURES / "scenarios")},
            check=False,
        )
        assert app.returncode == 0, app.stderr
        runs: dict[str, bool] = json.loads(app.stdout.splitlines()[-1])
        # Per trace at least one message of spans and one of log records (the Collector batches per trace).
        written = wait_for_records(bootstrap, topic, 2 * len(runs))

    # The log records are keyed by trace id like the spans: on their partition, whoever wrote first.
    kinds: dict[str, set[str]] = defaultdict(set)
    partitions: dict[str, set[int]] = defaultdict(set)
    span_ids: set[str] = set()
    for message in read_topic(bootstrap, topic):
        decoded = decode_message(message.value)
        kind = "spans" if type(decoded) is list else "logs"  # a logs message gives a list of its own type
        if kind == "spans":
            span_ids.update(span.span_id for span in decoded)
        trace_ids = {item.trace_id for item in decoded}
        assert [message.key.decode()] == sorted(trace_ids), kind
        kinds[message.key.decode()].add(kind)
        partitions[message.key.decode()].add(message.partition)
    assert len(written) >= 2 * len(runs)
    assert dict(kinds) == {trace_id: {"spans", "logs"} for trace_id in runs}
    assert all(len(held) == 1 for held in partitions.values()), partitions

    seen: list[EvaluationRecord] = []
    stats = EvaluationConsumer(
        consumer_settings(bootstrap, prefix),
        judge=OfflineJudge(),
        metrics=[Faithfulness()],
        on_evaluation=seen.append,
    ).run()

    scored = {record.trace_id: (record.convention, record.label) for record in seen}
    expected = {
        trace_id: ("genai", "faithful" if faithful else "hallucinated") for trace_id, faithful in runs.items()
    }
    assert scored == expected
    assert dict(stats.skipped) == {} and stats.dead_letters == 0
    assert stats.assembly[AssemblyCount.LOG_EVENTS] == len(runs)
    _assert_the_egress_forwards(otelcol, bootstrap, topic, span_ids, tmp_path)


def test_the_egress_collector_skips_log_records_on_the_spans_topic_without_holding_back_the_spans(
    otelcol: Path, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    """Log records first, then spans, on one partition: an unreadable message held back every later one
    there until a rebalance (`message_marking.on_permanent_error: false`)."""
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"e{uuid.uuid4().hex[:10]}.spans"
    create_topics(bootstrap, [topic], 1)
    entry = json.loads((FIXTURES / "otel_genai" / "manifest.json").read_text())["scenarios"]
    recorded = entry["event_only_faithful.binpb"]
    spans = (FIXTURES / "otel_genai" / "event_only_faithful.binpb").read_bytes()
    logs = (FIXTURES / "otel_genai" / recorded["logs"]["file"]).read_bytes()
    producer = input_producer(bootstrap, [topic], acks="all")
    for value in (logs, spans):
        producer.send(topic, key=recorded["trace_id"].encode(), value=value).get(30)
    producer.close()

    _assert_the_egress_forwards(
        otelcol, bootstrap, topic, {s.span_id for s in decode_message(spans)}, tmp_path
    )


def _assert_the_egress_forwards(
    otelcol: Path, bootstrap: str, topic: str, span_ids: set[str], tmp: Path
) -> None:
    """The egress Collector (kafka-to-backend.yaml) reads `topic` as traces and forwards every span in it:
    the log records' messages are no traces to it, never holding back the spans after them."""
    backend, log = egress_to_file(otelcol, bootstrap, topic, len(span_ids), tmp, timeout_s=30)
    assert {span["spanId"] for span in backend} == span_ids, log
