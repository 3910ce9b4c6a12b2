"""Kafka message bytes -> spans -> RAG records. Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracescore import semconv
from tracescore._rag_span import DecodedSpan, RagSpan
from tracescore.score import RagRecord

__all__ = ["DecodedSpan", "NotOtlp", "RagSpan", "Skip", "classify", "decode_message"]

EVALUATOR_SCOPE = semconv.EVALUATOR_SCOPE


class NotOtlp(ValueError):
    """The message is not an OTLP protobuf ExportTraceServiceRequest with spans."""


@dataclass(frozen=True)
class Skip:
    """Why a span is not scored. `expected` skips (other instrumentations' spans, our own evaluation spans)
    are counted quietly; the others are counted and logged."""

    reason: str
    detail: str
    expected: bool = False


def decode_message(value: bytes | None) -> list[DecodedSpan]:
    if not value:
        raise NotOtlp("empty message")
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(value)
    except DecodeError as exc:
        raise NotOtlp(f"not OTLP protobuf: {exc}") from exc
    spans = [
        DecodedSpan(
            trace_id=span.trace_id.hex(),
            span_id=span.span_id.hex(),
            name=span.name,
            service_name=str(resource_attrs.get("service.name", "unknown_service")),
            scope_name=scope_spans.scope.name,
            attributes=_attributes(span.attributes),
            end_time_unix_nano=span.end_time_unix_nano,
        )
        for resource_spans in request.resource_spans
        for resource_attrs in [_attributes(resource_spans.resource.attributes)]
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]
    # Arbitrary bytes sometimes parse as an empty protobuf message; an OTLP export always carries spans.
    if not spans or any(len(s.trace_id) != 32 or len(s.span_id) != 16 for s in spans):
        raise NotOtlp("no valid OTLP spans in the message (wrong topic or encoding?)")
    return spans


def classify(span: DecodedSpan) -> RagSpan | Skip:
    attrs = span.attributes
    if span.scope_name == EVALUATOR_SCOPE or semconv.GEN_AI_EVALUATION_NAME in attrs:
        return Skip("evaluation_span", "an evaluation span", expected=True)
    query = attrs.get(semconv.INPUT_VALUE)
    answer = attrs.get(semconv.OUTPUT_VALUE)
    contexts = _contexts(attrs)
    if query is None and answer is None and not contexts:
        return Skip("not_rag", "no query, answer or retrieved documents", expected=True)
    where = f"span {span.span_id} of trace {span.trace_id} ({span.service_name}/{span.name})"
    if not str(query or "").strip():
        return Skip("missing_query", f"{where} has no query ({semconv.INPUT_VALUE})")
    if answer is None:
        return Skip("missing_answer", f"{where} has no answer ({semconv.OUTPUT_VALUE})")
    if not any(c.strip() for c in contexts):
        return Skip("empty_context", f"{where} has no retrieved context to check the answer against")
    route = attrs.get(semconv.TRACESCORE_ROUTE) or attrs.get(semconv.HTTP_ROUTE) or span.name
    record = RagRecord(
        id=f"{span.trace_id}:{span.span_id}", query=str(query), contexts=tuple(contexts), answer=str(answer)
    )
    return RagSpan(span=span, record=record, route=str(route))


def _contexts(attrs: Mapping[str, Any]) -> list[str]:
    contexts = []
    index = 0
    while (content := attrs.get(semconv.document_content_key(index))) is not None:
        contexts.append(str(content))
        index += 1
    return contexts


def _attributes(key_values: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in key_values}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None
