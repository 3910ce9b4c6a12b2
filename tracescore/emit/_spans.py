"""Evaluation spans: a child of the scored span, in the same trace, carrying the score.

Each is an OpenInference EVALUATOR span (kind, `input.value` naming what was judged, `output.value` with the
result as JSON, `metadata` with the evaluator and annotator kind) with the OTel GenAI evaluation attributes
and event beside them, and a span link to the evaluated span, so backends that follow links rather than
parents (or show evaluations in their own lane) still join the two. A conversation's evaluation span
(`_conversations.py`) is built by the same `evaluator_span`, so the two kinds cannot drift apart.

Built directly as read-only SDK spans (no global tracer involved), so the consumer decides exactly when
they are sent and can wait for Kafka's acknowledgement before committing the input offsets.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

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

__all__ = [
    "Judged",
    "evaluation_span",
    "evaluator_resource",
    "evaluator_scope",
    "evaluator_span",
    "link_to",
    "new_span_id",
    "record_span",
]

_ids = RandomIdGenerator()
evaluator_scope = InstrumentationScope(semconv.EVALUATOR_SCOPE, __version__)
evaluator_resource = Resource.create({SERVICE_NAME: "tracescore"})


def new_span_id() -> int:
    return _ids.generate_span_id()


def link_to(context: SpanContext, what: str) -> Link:
    """A link from an evaluation span to what it evaluated (`what`: evaluated_span, evaluated_turn)."""
    return Link(context, {"tracescore.link": what})


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
    annotator = annotator_kind(result.judge)
    judged = Judged(
        name=result.metric,
        what=f"{result.metric} of span {rag.span_id} ({rag.name})",
        score=result.score,
        label=result.label,
        explanation=explanation(result),
        judge=result.judge,
        annotator=annotator,
        route=rag.route,
        service=rag.service_name,
        status=result.status,
        revision=revision,  # > 0: late spans changed what was judged; the highest revision is the current one
        selection=selection,
    )
    own: dict[str, Any] = {
        semconv.METADATA: json.dumps(
            {"evaluator_name": result.metric, "annotator_kind": annotator, "judge": result.judge}
        ),
        semconv.TRACESCORE_EVALUATED_SPAN_ID: rag.span_id,
        semconv.TRACESCORE_CONVENTION: rag.convention,
    }
    if question_missing:
        # Judged without the user's question (not recorded): metrics that need it are not_applicable.
        own["tracescore.question_recorded"] = False
    if result.status is MetricStatus.ERROR:
        own[semconv.ERROR_TYPE] = str(result.details.get("error_type") or "_OTHER")
    failed = Status(StatusCode.ERROR, result.reason) if result.status is MetricStatus.ERROR else Status()
    return evaluator_span(judged, own, parent, (link_to(parent, "evaluated_span"),), start_ns, end_ns, failed)


class Judged(NamedTuple):
    """What every evaluation span says of its evaluation, a scored span's or a conversation's."""

    name: str  # gen_ai.evaluation.name
    what: str  # input.value: what was judged
    score: float | None
    label: str | None
    explanation: str | None
    judge: str
    annotator: str
    route: str
    service: str  # the evaluated service (the span's own service is tracescore)
    status: MetricStatus
    revision: int
    selection: str | None


def evaluator_span(
    judged: Judged,
    own: dict[str, Any],
    parent: SpanContext,
    links: Sequence[Link],
    start_ns: int,
    end_ns: int | None,
    status: Status | None = None,
) -> ReadableSpan:
    """An EVALUATOR span under `parent`, in its trace: the OpenInference attributes, the OTel GenAI evaluation
    attributes and event, and the evaluation's `own` attributes beside them."""
    attributes: dict[str, Any] = {
        semconv.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKind.EVALUATOR.value,
        semconv.INPUT_VALUE: judged.what,
        semconv.OUTPUT_VALUE: json.dumps(
            {"score": judged.score, "label": judged.label, "explanation": judged.explanation},
            ensure_ascii=False,
        ),
        semconv.OUTPUT_MIME_TYPE: "application/json",
        semconv.GEN_AI_EVALUATION_NAME: judged.name,
        semconv.TRACESCORE_JUDGE: judged.judge,
        semconv.TRACESCORE_ANNOTATOR_KIND: judged.annotator,
        semconv.TRACESCORE_ROUTE: judged.route,
        "tracescore.evaluated_service": judged.service,
        "tracescore.evaluation.status": judged.status.value,
        "tracescore.evaluation.revision": judged.revision,
        **own,
    }
    if judged.selection is not None:
        attributes[semconv.TRACESCORE_SELECTION] = judged.selection
    if judged.score is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_VALUE] = judged.score
    if judged.label is not None:
        attributes[semconv.GEN_AI_EVALUATION_SCORE_LABEL] = judged.label
    if judged.explanation:
        attributes[semconv.GEN_AI_EVALUATION_EXPLANATION] = judged.explanation
    end_ns = end_ns or time.time_ns()
    event_attrs: Attributes = {k: v for k, v in attributes.items() if k.startswith("gen_ai.evaluation.")}
    if semconv.ERROR_TYPE in attributes:
        event_attrs = {**event_attrs, semconv.ERROR_TYPE: attributes[semconv.ERROR_TYPE]}
    context = SpanContext(parent.trace_id, new_span_id(), is_remote=False, trace_flags=TraceFlags(1))
    return ReadableSpan(
        name=f"evaluation {judged.name}",
        context=context,
        parent=parent,
        resource=evaluator_resource,
        attributes=attributes,
        events=(Event(semconv.EVALUATION_EVENT, event_attrs, end_ns),),
        links=tuple(links),
        kind=SpanKind.INTERNAL,
        instrumentation_scope=evaluator_scope,
        status=status or Status(),
        start_time=start_ns,
        end_time=end_ns,
    )
