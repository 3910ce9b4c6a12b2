"""decode_message (Kafka bytes -> spans) and classify (span -> RAG record or a reason to skip)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import semconv
from tracescore.consume import DecodedSpan, NotOtlp, RagSpan, Skip, classify, decode_message
from tracescore.export import encode_trace_messages
from tracescore.score import RagRecord


@pytest.fixture(scope="module")
def _global_exporter() -> InMemorySpanExporter:
    # `@tracescore.rag` traces through the global provider, which can be set only once per process.
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "decode-tests"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def decorated_spans(_global_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    _global_exporter.clear()
    yield _global_exporter
    _global_exporter.clear()


def local_spans(service: str = "rag-api") -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def round_trip(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[DecodedSpan]:
    return [d for _, value in encode_trace_messages(spans) for d in decode_message(value)]


def decoded(attributes: dict[str, Any], name: str = "answer", scope: str = "tracescore") -> DecodedSpan:
    return DecodedSpan(
        trace_id="0af7651916cd43dd8448eb211c80319c",
        span_id="b7ad6b7169203331",
        name=name,
        service_name="rag-api",
        scope_name=scope,
        attributes=attributes,
        end_time_unix_nano=1,
    )


RAG_ATTRS = {
    semconv.INPUT_VALUE: "Capital of France?",
    semconv.document_content_key(0): "Paris is the capital of France.",
    semconv.document_content_key(1): "France is in Europe.",
    semconv.OUTPUT_VALUE: "Paris.",
}


# --- decode_message ---------------------------------------------------------------------------------


def test_decode_round_trip_of_a_decorated_call(decorated_spans: InMemorySpanExporter) -> None:
    @tracescore.rag(route="/ask")
    def answer(query: str, contexts: list[str]) -> str:
        return "Paris."

    answer("Capital of France?", ["Paris is the capital of France.", "France is in Europe."])
    [original] = decorated_spans.get_finished_spans()
    [span] = round_trip([original])

    assert span.trace_id == format(original.context.trace_id, "032x")
    assert span.span_id == format(original.context.span_id, "016x")
    assert span.name == "answer"
    assert span.scope_name == "tracescore"
    assert span.service_name == trace.get_tracer_provider().resource.attributes[SERVICE_NAME]
    assert span.end_time_unix_nano == original.end_time
    assert span.attributes == dict(original.attributes)

    result = classify(span)
    assert isinstance(result, RagSpan)
    assert result.span is span
    assert result.route == "/ask"
    assert result.record == RagRecord(
        id=f"{span.trace_id}:{span.span_id}",
        query="Capital of France?",
        contexts=("Paris is the capital of France.", "France is in Europe."),
        answer="Paris.",
    )


def test_decode_keeps_attribute_types_and_arrays() -> None:
    provider, exporter = local_spans(service="typed-service")
    with provider.get_tracer("lib").start_as_current_span("typed") as span:
        span.set_attribute("s", "text")
        span.set_attribute("i", 7)
        span.set_attribute("f", 0.5)
        span.set_attribute("b", True)
        span.set_attribute("tags", ["a", "b"])
        span.set_attribute("ints", [1, 2, 3])
    [decoded_span] = round_trip(exporter.get_finished_spans())

    assert decoded_span.service_name == "typed-service"
    assert decoded_span.scope_name == "lib"
    assert decoded_span.attributes == {
        "s": "text",
        "i": 7,
        "f": 0.5,
        "b": True,
        "tags": ["a", "b"],
        "ints": [1, 2, 3],
    }
    assert len(decoded_span.trace_id) == 32
    assert len(decoded_span.span_id) == 16
    assert decoded_span.trace_id == decoded_span.trace_id.lower()


def test_decode_returns_every_span_of_the_message() -> None:
    provider, exporter = local_spans()
    tracer = provider.get_tracer("lib")
    with tracer.start_as_current_span("parent"), tracer.start_as_current_span("child"):
        pass
    [(_, value)] = encode_trace_messages(exporter.get_finished_spans())
    spans = decode_message(value)
    assert sorted(s.name for s in spans) == ["child", "parent"]
    assert len({s.trace_id for s in spans}) == 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(b"\x00", id="nul"),
        pytest.param(json.dumps({"resourceSpans": []}).encode(), id="json"),
        pytest.param(b"\x8f\x13garbage\xff\xfe not protobuf", id="garbage"),
        pytest.param(b"hello world", id="text"),
    ],
)
def test_non_otlp_messages_raise_not_otlp(value: bytes | None) -> None:
    with pytest.raises(NotOtlp) as excinfo:
        decode_message(value)
    assert isinstance(excinfo.value, ValueError)
    message = str(excinfo.value)
    assert message
    assert any(word in message for word in ("empty", "OTLP")), message


# --- classify ---------------------------------------------------------------------------------------


def test_classify_full_rag_span() -> None:
    result = classify(decoded({**RAG_ATTRS, semconv.TRACESCORE_ROUTE: "/billing"}))
    assert isinstance(result, RagSpan)
    assert result.route == "/billing"
    assert result.record.query == "Capital of France?"
    assert result.record.contexts == ("Paris is the capital of France.", "France is in Europe.")
    assert result.record.answer == "Paris."


def test_route_falls_back_to_http_route_then_span_name() -> None:
    with_http = classify(decoded({**RAG_ATTRS, semconv.HTTP_ROUTE: "/v1/ask"}))
    assert isinstance(with_http, RagSpan)
    assert with_http.route == "/v1/ask"

    preferred = classify(
        decoded({**RAG_ATTRS, semconv.HTTP_ROUTE: "/v1/ask", semconv.TRACESCORE_ROUTE: "/billing"})
    )
    assert isinstance(preferred, RagSpan)
    assert preferred.route == "/billing"

    by_name = classify(decoded(RAG_ATTRS, name="support-answer"))
    assert isinstance(by_name, RagSpan)
    assert by_name.route == "support-answer"


@pytest.mark.parametrize("query", [None, "", "   "])
def test_missing_query_is_an_unexpected_skip(query: str | None) -> None:
    attrs = {k: v for k, v in RAG_ATTRS.items() if k != semconv.INPUT_VALUE}
    if query is not None:
        attrs[semconv.INPUT_VALUE] = query
    result = classify(decoded(attrs))
    assert isinstance(result, Skip)
    assert result.reason == "missing_query"
    assert result.expected is False
    assert semconv.INPUT_VALUE in result.detail


def test_missing_answer_is_an_unexpected_skip() -> None:
    attrs = {k: v for k, v in RAG_ATTRS.items() if k != semconv.OUTPUT_VALUE}
    result = classify(decoded(attrs))
    assert isinstance(result, Skip)
    assert result.reason == "missing_answer"
    assert result.expected is False


@pytest.mark.parametrize(
    "contexts",
    [pytest.param([], id="no-documents"), pytest.param(["  ", "\n\t"], id="whitespace-only")],
)
def test_empty_context_is_an_unexpected_skip(contexts: list[str]) -> None:
    attrs = {semconv.INPUT_VALUE: "q", semconv.OUTPUT_VALUE: "a"}
    attrs.update({semconv.document_content_key(i): text for i, text in enumerate(contexts)})
    result = classify(decoded(attrs))
    assert isinstance(result, Skip)
    assert result.reason == "empty_context"
    assert result.expected is False


def test_plain_non_rag_span_is_an_expected_skip() -> None:
    result = classify(decoded({"http.method": "GET", semconv.HTTP_ROUTE: "/health"}, scope="app"))
    assert isinstance(result, Skip)
    assert result.reason == "not_rag"
    assert result.expected is True


@pytest.mark.parametrize(
    ("attributes", "scope"),
    [
        pytest.param(RAG_ATTRS, semconv.EVALUATOR_SCOPE, id="evaluator-scope"),
        pytest.param({semconv.GEN_AI_EVALUATION_NAME: "faithfulness"}, "other-evaluator", id="attribute"),
    ],
)
def test_evaluation_span_is_an_expected_skip(attributes: dict[str, Any], scope: str) -> None:
    result = classify(decoded(attributes, scope=scope))
    assert isinstance(result, Skip)
    assert result.reason == "evaluation_span"
    assert result.expected is True
