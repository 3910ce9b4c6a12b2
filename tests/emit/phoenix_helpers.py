"""What the Phoenix tests share: records, a span Phoenix knows, and what landed on it, read back through
Phoenix's own REST API."""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx2
from _helpers import wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracescore.model import EvaluationRecord, MetricStatus

# Phoenix inserts spans and annotations asynchronously: what a test wrote is polled for, gently.
in_phoenix = functools.partial(wait_until, every_s=0.2)

PROJECT = "default"  # where Phoenix puts spans whose resource names no project


@dataclass(frozen=True)
class SpanIds:
    trace_id: str
    span_id: str


def record(span: SpanIds, **fields: Any) -> EvaluationRecord:
    values: dict[str, Any] = {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "service_name": "rag-api",
        "route": "/billing",
        "metric": "faithfulness",
        "score": 0.5,
        "label": "partially_faithful",
        "status": MetricStatus.OK,
        "reason": "one of two claims is unsupported",
        "judge": "offline",
        "timestamp": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "details": {"claims": 2},
    }
    return EvaluationRecord(**{**values, **fields})


def traced_span(base_url: str, api: httpx2.Client) -> SpanIds:
    """A fresh span, exported to the Phoenix at `base_url` over OTLP/HTTP and visible through its REST API."""
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{base_url}/v1/traces")))
    with provider.get_tracer("tests").start_as_current_span("answer") as span:
        context = span.get_span_context()
    provider.shutdown()
    ids = SpanIds(format(context.trace_id, "032x"), format(context.span_id, "016x"))

    def spans() -> list[dict[str, Any]]:
        response = api.get(f"/v1/projects/{PROJECT}/spans", params={"span_id": ids.span_id})
        return response.json()["data"] if response.status_code == 200 else []

    in_phoenix(spans, f"span {ids.span_id}")
    return ids


def annotations(api: httpx2.Client, span: SpanIds) -> dict[str, list[dict[str, Any]]]:
    """The span's annotations in Phoenix, by name."""
    response = api.get(
        f"/v1/projects/{PROJECT}/span_annotations", params={"span_ids": span.span_id, "limit": 100}
    )
    response.raise_for_status()
    by_name: dict[str, list[dict[str, Any]]] = {}
    for annotation in response.json()["data"]:
        by_name.setdefault(annotation["name"], []).append(annotation)
    return by_name


def traced_answer(base_url: str, bootstrap: str, topic: str, output: str) -> SpanIds:
    """An app's RAG answer (`output` to "How long does the battery last?", the context saying 14 hours):
    its span sent to the Phoenix at `base_url` (OTLP) and to Kafka's `topic`, as an app and its Collector
    do."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracescore.export import encode_trace_messages
    from tracescore.testing.kafka_topics import input_producer

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "rag-api"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{base_url}/v1/traces")))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("tracescore").start_as_current_span("answer") as span:
        span.set_attributes(
            {
                "openinference.span.kind": "CHAIN",
                "input.value": "How long does the battery last?",
                "retrieval.documents.0.document.content": "The battery lasts 14 hours.",
                "output.value": output,
            }
        )
        context = span.get_span_context()
    provider.shutdown()
    producer = input_producer(bootstrap, [topic], acks="all")
    for key, value in encode_trace_messages(memory.get_finished_spans()):
        producer.send(topic, key=key, value=value).get(30)
    producer.close()
    return SpanIds(format(context.trace_id, "032x"), format(context.span_id, "016x"))


def consume_command(
    bootstrap: str, topic_prefix: str, phoenix_endpoint: str, idle_timeout_s: float
) -> list[str]:
    """`tracescore consume --phoenix-endpoint` on the test's topics (spans topic `<prefix>.spans`)."""
    return [
        sys.executable, "-m", "tracescore.cli", "consume",
        "--bootstrap-servers", bootstrap,
        "--topic", f"{topic_prefix}.spans",
        "--group-id", f"{topic_prefix}.group",
        "--evaluations-topic", f"{topic_prefix}.evaluations",
        "--dlq-topic", f"{topic_prefix}.dlq",
        "--idle-timeout", f"{idle_timeout_s:g}",
        "--phoenix-endpoint", phoenix_endpoint,
    ]  # fmt: skip
