"""Conversation records where people look: a session annotation in a real Phoenix (its sessions are the
spans' `session.id`), an evaluation span under the last turn for any other backend, and OTel metrics that
count each conversation once."""

from __future__ import annotations

import functools
import json
import time
from datetime import UTC, datetime
from typing import Any

import httpx2
import pytest
from _helpers import wait_until
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tracescore import semconv
from tracescore.emit import ConversationMetrics, PhoenixAnnotations, PhoenixSettings, conversation_span
from tracescore.model import ConversationRecord, MetricStatus, WorstTurn
from tracescore.testing.phoenix import PhoenixServer

# Phoenix inserts spans and annotations asynchronously: what a test wrote is polled for, gently.
in_phoenix = functools.partial(wait_until, every_s=0.2)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def conversation(trace_ids: list[str], span_ids: list[str], **fields: Any) -> ConversationRecord:
    values: dict[str, Any] = {
        "conversation_id": "session-s2",
        "service_name": "chat-api",
        "route": "/chat",
        "started_at": T0,
        "metric": "faithfulness",
        "judge": "offline",
        "annotator_kind": "CODE",
        "selection": None,
        "turns": len(trace_ids),
        "turns_judged": len(trace_ids),
        "turns_scored": len(trace_ids),
        "turns_passed": len(trace_ids) - 1,
        "turns_flagged": 1,
        "complete": True,
        "score": (len(trace_ids) - 1) / max(1, len(trace_ids)),
        "share_lower": 0.09,
        "share_upper": 0.91,
        "confidence": 0.95,
        "label": "flagged",
        "status": MetricStatus.OK,
        "reason": "1 of 2 scored turns pass faithfulness; worst: ...",
        "worst_turn": None,
        "trace_ids": trace_ids,
        "span_ids": span_ids,
        "first_turn_at": T0,
        "last_turn_at": T0,
        "timestamp": T0,
    }
    if trace_ids:
        values["worst_turn"] = WorstTurn(
            trace_id=trace_ids[-1], span_id=span_ids[-1], score=0.0, label="hallucinated"
        )
    return ConversationRecord(**{**values, **fields})


def test_the_span_is_a_child_of_the_last_turn_linked_to_every_turn() -> None:
    traces, spans = [f"{n:032x}" for n in (1, 2)], [f"{n:016x}" for n in (1, 2)]
    span = conversation_span(conversation(traces, spans), start_ns=1)
    assert span is not None and span.parent is not None
    assert (format(span.context.trace_id, "032x"), format(span.parent.span_id, "016x")) == (
        traces[1],
        spans[1],
    )
    assert [format(link.context.span_id, "016x") for link in span.links] == spans
    attributes = dict(span.attributes or {})
    assert attributes[semconv.SESSION_ID] == attributes[semconv.GEN_AI_CONVERSATION_ID] == "session-s2"
    assert attributes[semconv.GEN_AI_EVALUATION_NAME] == "conversation_faithfulness"
    assert attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "flagged"
    assert attributes["tracescore.conversation.turns"] == 2
    assert conversation_span(conversation([], [], turns=0), start_ns=1) is None


def test_the_span_says_what_every_evaluation_span_says() -> None:
    span = conversation_span(conversation([f"{1:032x}"], [f"{1:016x}"]), start_ns=1, end_ns=2)
    assert span is not None
    attributes = dict(span.attributes or {})
    assert attributes[semconv.OPENINFERENCE_SPAN_KIND] == "EVALUATOR"
    assert json.loads(str(attributes[semconv.OUTPUT_VALUE]))["label"] == "flagged"
    assert attributes[semconv.TRACESCORE_JUDGE] == "offline"
    assert attributes[semconv.TRACESCORE_ANNOTATOR_KIND] == "CODE"
    assert attributes["tracescore.evaluated_service"] == "chat-api"
    assert attributes["tracescore.evaluation.status"] == "ok"
    [event] = span.events
    assert event.name == semconv.EVALUATION_EVENT and event.timestamp == 2
    assert dict(event.attributes or {}) == {
        k: v for k, v in attributes.items() if k.startswith("gen_ai.evaluation.")
    }


def test_metrics_count_a_conversation_once_and_its_revisions_apart() -> None:
    reader = InMemoryMetricReader()
    out = ConversationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    record = conversation([f"{n:032x}" for n in (1, 2)], [f"{n:016x}" for n in (1, 2)])
    out.recorded(record)
    out.recorded(record.model_copy(update={"revision": 1, "supersedes": 0, "label": "passed"}))
    points = {
        metric.name: [(dict(p.attributes), getattr(p, "value", None)) for p in metric.data.data_points]
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
    }
    [(attributes, count)] = points["tracescore.conversations"]
    assert count == 1 and attributes["outcome"] == "flagged" and attributes["selection"] == "none"
    assert [value for _, value in points["tracescore.conversations.revised"]] == [1]


# --- against the real Phoenix ---------------------------------------------------------------------------


def test_a_conversation_record_becomes_an_annotation_on_its_phoenix_session(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client
) -> None:
    session = f"session-{time.time_ns()}"
    provider = TracerProvider(resource=Resource.create({"service.name": "chat-api"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{phoenix_server.base_url}/v1/traces"))
    )
    traces, spans = [], []
    for turn in range(2):  # two turns of the conversation, as an app records them (session.id per turn)
        with provider.get_tracer("tests").start_as_current_span(f"turn {turn}") as span:
            span.set_attribute(semconv.SESSION_ID, session)
            context = span.get_span_context()
        traces.append(format(context.trace_id, "032x"))
        spans.append(format(context.span_id, "016x"))
    provider.shutdown()
    record = conversation(traces, spans, conversation_id=session)

    def annotations() -> list[dict[str, Any]]:
        response = phoenix_api.get(
            "/v1/projects/default/session_annotations", params={"session_ids": session}
        )
        return response.json()["data"] if response.status_code == 200 else []

    with PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_server.base_url)) as sink:
        assert sink.send_sessions([record]) == 1
        [landed] = in_phoenix(annotations, f"an annotation on session {session}")
        assert landed["name"] == "conversation_faithfulness" and landed["annotator_kind"] == "CODE"
        assert landed["result"]["label"] == "flagged" and landed["result"]["score"] == pytest.approx(0.5)
        assert landed["metadata"]["trace_ids"] == traces
        # A revision (a later turn) overwrites it; another judge tier keeps its own.
        sink.send_sessions([record.model_copy(update={"revision": 1, "score": 1.0, "label": "passed"})])
        sink.send_sessions(
            [
                record.model_copy(
                    update={"judge": "openai:m", "annotator_kind": "LLM", "selection": "baseline"}
                )
            ]
        )

        def settled() -> list[dict[str, Any]] | None:
            found = annotations()
            return found if len(found) == 2 and any(a["result"]["label"] == "passed" for a in found) else None

        both = in_phoenix(settled, "the revision and the LLM tier")
        assert sorted(a["annotator_kind"] for a in both) == ["CODE", "LLM"]
