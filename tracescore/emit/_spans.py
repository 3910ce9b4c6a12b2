"""Evaluation spans: a child of the scored span, in the same trace, carrying the score.

Built directly as read-only SDK spans (no global tracer involved), so the consumer decides exactly when
they are sent and can wait for Kafka's acknowledgement before committing the input offsets.
"""

from __future__ import annotations

import time

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import Attributes

from tracescore import __version__, semconv
from tracescore._rag_span import RagSpan
from tracescore.score import MetricResult, MetricStatus

__all__ = ["evaluation_span"]

_ids = RandomIdGenerator()
_scope = InstrumentationScope(semconv.EVALUATOR_SCOPE, __version__)
_resource = Resource.create({SERVICE_NAME: "tracescore"})


def evaluation_span(
    rag: RagSpan, result: MetricResult, start_ns: int, end_ns: int | None = None
) -> ReadableSpan:
    trace_id = int(rag.span.trace_id, 16)
    parent = SpanContext(trace_id, int(rag.span.span_id, 16), is_remote=True, trace_flags=TraceFlags(1))
    context = SpanContext(trace_id, _ids.generate_span_id(), is_remote=False, trace_flags=TraceFlags(1))
    attributes: dict[str, str | float | int] = {
        semconv.OPENINFERENCE_SPAN_KIND: "EVALUATOR",
        semconv.GEN_AI_EVALUATION_NAME: result.metric,
        semconv.TRACESCORE_JUDGE: result.judge,
        semconv.TRACESCORE_ROUTE: rag.route,
        semconv.TRACESCORE_EVALUATED_SPAN_ID: rag.span.span_id,
        "tracescore.evaluation.status": result.status.value,
        "tracescore.evaluated_service": rag.span.service_name,
    }
    if result.score is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = result.score
    if result.label is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = result.label
    if result.reason:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = result.reason
    end_ns = end_ns or time.time_ns()
    event_attrs: Attributes = {k: v for k, v in attributes.items() if k.startswith("gen_ai.evaluation.")}
    return ReadableSpan(
        name=f"evaluation {result.metric}",
        context=context,
        parent=parent,
        resource=_resource,
        attributes=attributes,
        events=(Event(semconv.EVALUATION_EVENT, event_attrs, end_ns),),
        kind=SpanKind.INTERNAL,
        instrumentation_scope=_scope,
        status=Status(StatusCode.ERROR, result.reason) if result.status is MetricStatus.ERROR else Status(),
        start_time=start_ns,
        end_time=end_ns,
    )
