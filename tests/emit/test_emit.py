"""Evaluation spans (children of the scored span) and evaluation records (JSON on Kafka)."""

from __future__ import annotations

import dataclasses
import json
import time
from datetime import UTC, datetime

from opentelemetry.trace import SpanKind, StatusCode

from tracescore import semconv
from tracescore.consume import decode_message
from tracescore.emit import evaluation_record, evaluation_span
from tracescore.export import encode_trace_messages
from tracescore.extract import extract
from tracescore.model import (
    HISTORY_TURNS_KEPT,
    SCHEMA_VERSION,
    ConversationSource,
    DecodedSpan,
    Interaction,
    MetricResult,
    MetricStatus,
    RagRecord,
    Trace,
    Usage,
    read_evaluation_record,
    turn_digest,
)

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SPAN_ID = "b7ad6b7169203331"


def scored_span() -> Interaction:
    span = DecodedSpan(
        trace_id=TRACE_ID,
        span_id=SPAN_ID,
        name="answer",
        service_name="rag-api",
        scope_name="tracescore",
        attributes={},
        end_time_unix_nano=1,
    )
    record = RagRecord(id=f"{TRACE_ID}:{SPAN_ID}", query="q", contexts=("c",), answer="a")
    return Interaction(span=span, record=record, route="/billing")


OK_RESULT = MetricResult(
    metric="faithfulness",
    score=0.5,
    label="partially_faithful",
    reason="one of two claims is unsupported",
    judge="openai:gpt-4o-mini",
    details={"claims": 2},
    usage=Usage(calls=1, prompt_tokens=100, completion_tokens=20),
)
ERROR_RESULT = MetricResult(
    metric="faithfulness",
    score=None,
    status=MetricStatus.ERROR,
    reason="judge timed out",
    judge="openai:gpt-4o-mini",
)


# --- evaluation_span --------------------------------------------------------------------------------


def test_evaluation_span_is_a_child_of_the_scored_span() -> None:
    start = time.time_ns()
    span = evaluation_span(scored_span(), OK_RESULT, start_ns=start, end_ns=start + 1_000)
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None
    assert format(span.parent.span_id, "016x") == SPAN_ID
    assert format(span.parent.trace_id, "032x") == TRACE_ID
    assert span.context.span_id != span.parent.span_id
    assert span.context.trace_flags.sampled
    assert span.kind is SpanKind.INTERNAL
    assert (span.start_time, span.end_time) == (start, start + 1_000)
    assert span.instrumentation_scope.name == semconv.EVALUATOR_SCOPE


def test_evaluation_span_carries_the_score() -> None:
    span = evaluation_span(scored_span(), OK_RESULT, start_ns=1, end_ns=2)
    attrs = span.attributes
    assert attrs[semconv.GEN_AI_EVALUATION_NAME] == "faithfulness"
    assert attrs[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.5
    assert attrs[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "partially_faithful"
    assert attrs[semconv.GEN_AI_EVALUATION_EXPLANATION] == "one of two claims is unsupported"
    assert attrs[semconv.TRACESCORE_JUDGE] == "openai:gpt-4o-mini"
    assert attrs[semconv.TRACESCORE_ROUTE] == "/billing"
    assert attrs[semconv.TRACESCORE_EVALUATED_SPAN_ID] == SPAN_ID
    assert span.status.status_code is StatusCode.UNSET

    [event] = span.events
    assert event.name == semconv.EVALUATION_EVENT
    assert event.timestamp == 2
    assert event.attributes[semconv.GEN_AI_EVALUATION_NAME] == "faithfulness"
    assert event.attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.5
    assert event.attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] == "partially_faithful"


def test_error_result_gives_an_error_span_without_a_score() -> None:
    span = evaluation_span(scored_span(), ERROR_RESULT, start_ns=1, end_ns=2)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "judge timed out"
    assert semconv.GEN_AI_EVALUATION_SCORE_VALUE not in span.attributes
    assert span.attributes[semconv.GEN_AI_EVALUATION_NAME] == "faithfulness"


def test_evaluation_span_end_defaults_to_now() -> None:
    before = time.time_ns()
    span = evaluation_span(scored_span(), OK_RESULT, start_ns=before)
    assert before <= span.end_time <= time.time_ns()


def test_evaluation_span_round_trips_and_is_skipped_by_the_consumer() -> None:
    span = evaluation_span(scored_span(), OK_RESULT, start_ns=1, end_ns=2)
    [(key, value)] = encode_trace_messages([span])
    assert key == TRACE_ID.encode()

    [decoded] = decode_message(value)
    assert decoded.trace_id == TRACE_ID
    assert decoded.span_id == format(span.context.span_id, "016x")
    assert decoded.service_name == "tracescore"
    assert decoded.scope_name == semconv.EVALUATOR_SCOPE
    assert decoded.attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] == 0.5

    assert [(link.context.span_id, link.context.trace_id) for link in span.links] == [
        (int(SPAN_ID, 16), int(TRACE_ID, 16))
    ], "linked to the evaluated span"
    found = extract(Trace(TRACE_ID, (decoded,)))
    assert found.interactions == [], "an evaluation span is never read as a RAG answer"


# --- evaluation_record ------------------------------------------------------------------------------


def test_evaluation_record_json() -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    record = evaluation_record(scored_span(), OK_RESULT, "00f067aa0ba902b7", now=now)
    key, value = record.to_kafka()
    body = json.loads(value)

    assert key == TRACE_ID.encode()
    assert body["schema_version"] == SCHEMA_VERSION == 1
    assert body["trace_id"] == TRACE_ID
    assert body["span_id"] == SPAN_ID
    assert body["evaluation_span_id"] == "00f067aa0ba902b7"
    assert body["service_name"] == "rag-api"
    assert body["route"] == "/billing"
    assert body["metric"] == "faithfulness"
    assert body["score"] == 0.5
    assert body["label"] == "partially_faithful"
    assert body["status"] == "ok"
    assert body["reason"] == "one of two claims is unsupported"
    assert body["judge"] == "openai:gpt-4o-mini"
    assert datetime.fromisoformat(body["timestamp"]) == now
    assert body["details"] == {"claims": 2}
    assert body["usage"]["prompt_tokens"] == 100


def test_the_record_names_the_conversation_and_the_user_of_the_turn() -> None:
    turn = dataclasses.replace(scored_span(), session_id="s-1", user_id="u-7")
    record = read_evaluation_record(evaluation_record(turn, OK_RESULT, None).to_kafka()[1])
    assert (record.session_id, record.user_id) == ("s-1", "u-7")
    assert evaluation_record(scored_span(), OK_RESULT, None).user_id is None


def test_a_turn_that_resent_a_history_of_any_length_names_only_its_most_recent_pairs() -> None:
    history = tuple(turn_digest(f"question {n}", f"answer {n}") for n in range(100_000))
    turn = dataclasses.replace(
        scored_span(), session_id="history:0", conversation_source=ConversationSource.HISTORY, history=history
    )
    record = read_evaluation_record(evaluation_record(turn, OK_RESULT, None).to_kafka()[1])
    assert record.history_turns == list(history[-HISTORY_TURNS_KEPT:]), "the nearest turns, oldest first"
    assert len(evaluation_record(turn, OK_RESULT, None).to_kafka()[1]) < 16_000, "a bounded record"


def test_evaluation_record_of_an_error_and_default_timestamp() -> None:
    before = datetime.now(UTC)
    record = evaluation_record(scored_span(), ERROR_RESULT, None)
    body = json.loads(record.to_kafka()[1])
    assert body["status"] == "error"
    assert body["score"] is None
    assert body["evaluation_span_id"] is None
    stamp = datetime.fromisoformat(body["timestamp"])
    assert stamp.tzinfo is not None
    assert before <= stamp <= datetime.now(UTC)
