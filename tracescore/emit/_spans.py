"""Evaluation spans: a child of the scored span, in the same trace, carrying the score.

Each is an OpenInference EVALUATOR span (kind, `input.value` naming what was judged, `output.value` with the
result as JSON, `metadata` with the evaluator and annotator kind) with the OTel GenAI evaluation attributes
and event beside them, and a span link to the evaluated span, so backends that follow links rather than
parents (or show evaluations in their own lane) still join the two.

Built directly as read-only SDK spans (no global tracer involved), so the consumer decides exactly when
they are sent and can wait for Kafka's acknowledgement before committing the input offsets.
"""

from __future__ import annotations

import json
import time
from typing import NamedTuple

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import Attributes

from tracescore import __version__, semconv
from tracescore.emit._explain import explanation
from tracescore.model import (
    EvaluationRecord,
    Interaction,
    MetricResult,
    MetricStatus,
    OpenInferenceSpanKind,
    annotator_kind,
)

__all__ = ["evaluation_span", "evaluator_resource", "evaluator_scope", "new_span_id", "record_span"]

_ids = RandomIdGenerator()
evaluator_scope = InstrumentationScope(semconv.EVALUATOR_SCOPE, __version__)
evaluator_resource = Resource.create({SERVICE_NAME: "tracescore"})


def new_span_id() -> int:
    return _ids.generate_span_id()


def evaluation_span(
    rag: Interaction,
    result: MetricResult,
    start_ns: int,
    end_ns: int | None = None,
    selection: str | None = None,
    revision: int = 0,
) -> ReadableSpan:
    span = rag.span
    evaluated = _Evaluated(
        span.trace_id, span.span_id, span.name, span.service_name, rag.route, rag.convention
    )
    return _span(evaluated, result, start_ns, end_ns, selection, revision, rag.question_missing is not None)


def record_span(record: EvaluationRecord, start_ns: int) -> ReadableSpan:
    """The evaluation span of a record revised where its interaction is no longer at hand (a turn grounded in
    an earlier turn by `tracescore conversations`): the same span, from what the record says."""
    evaluated = _Evaluated(
        record.trace_id, record.span_id, record.route, record.service_name, record.route, record.convention
    )
    result = MetricResult(
        metric=record.metric, score=record.score, label=record.label, status=record.status,
        reason=record.reason, judge=record.judge, details=record.details,
    )  # fmt: skip
    unasked = record.details.get("question_recorded") is False
    return _span(evaluated, result, start_ns, None, record.selection, record.revision, unasked)


class _Evaluated(NamedTuple):
    trace_id: str
    span_id: str
    name: str
    service_name: str
    route: str
    convention: str


def _span(
    rag: _Evaluated,
    result: MetricResult,
    start_ns: int,
    end_ns: int | None,
    selection: str | None,
    revision: int,
    question_missing: bool,
) -> ReadableSpan:
    trace_id = int(rag.trace_id, 16)
    parent = SpanContext(trace_id, int(rag.span_id, 16), is_remote=True, trace_flags=TraceFlags(1))
    context = SpanContext(trace_id, new_span_id(), is_remote=False, trace_flags=TraceFlags(1))
    annotator = annotator_kind(result.judge)
    why = explanation(result)
    attributes: dict[str, str | float | int] = {
        semconv.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKind.EVALUATOR.value,
        semconv.INPUT_VALUE: f"{result.metric} of span {rag.span_id} ({rag.name})",
        semconv.OUTPUT_VALUE: json.dumps(
            {"score": result.score, "label": result.label, "explanation": why}, ensure_ascii=False
        ),
        semconv.OUTPUT_MIME_TYPE: "application/json",
        semconv.METADATA: json.dumps(
            {"evaluator_name": result.metric, "annotator_kind": annotator, "judge": result.judge}
        ),
        semconv.GEN_AI_EVALUATION_NAME: result.metric,
        semconv.TRACESCORE_JUDGE: result.judge,
        semconv.TRACESCORE_ANNOTATOR_KIND: annotator,
        semconv.TRACESCORE_ROUTE: rag.route,
        semconv.TRACESCORE_EVALUATED_SPAN_ID: rag.span_id,
        semconv.TRACESCORE_CONVENTION: rag.convention,
        "tracescore.evaluation.status": result.status.value,
        "tracescore.evaluated_service": rag.service_name,
        # > 0: late spans changed what was judged; the highest revision of a span is the current one.
        "tracescore.evaluation.revision": revision,
    }
    if selection is not None:
        attributes[semconv.TRACESCORE_SELECTION] = selection
    if question_missing:
        # Judged without the user's question (not recorded): metrics that need it are not_applicable.
        attributes["tracescore.question_recorded"] = False
    if result.score is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = result.score
    if result.label is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = result.label
    if why:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = why
    if result.status is MetricStatus.ERROR:
        attributes[semconv.ERROR_TYPE] = str(result.details.get("error_type") or "_OTHER")
    end_ns = end_ns or time.time_ns()
    event_attrs: Attributes = {k: v for k, v in attributes.items() if k.startswith("gen_ai.evaluation.")}
    if semconv.ERROR_TYPE in attributes:
        event_attrs = {**event_attrs, semconv.ERROR_TYPE: attributes[semconv.ERROR_TYPE]}
    return ReadableSpan(
        name=f"evaluation {result.metric}",
        context=context,
        parent=parent,
        resource=evaluator_resource,
        attributes=attributes,
        events=(Event(semconv.EVALUATION_EVENT, event_attrs, end_ns),),
        links=(Link(parent, {"tracescore.link": "evaluated_span"}),),
        kind=SpanKind.INTERNAL,
        instrumentation_scope=evaluator_scope,
        status=Status(StatusCode.ERROR, result.reason) if result.status is MetricStatus.ERROR else Status(),
        start_time=start_ns,
        end_time=end_ns,
    )
