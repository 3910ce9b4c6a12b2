"""Conversation records where people look: a Phoenix session annotation (Phoenix groups traces into sessions
by `session.id`), and an evaluation span for every other OTLP backend.

The span is a child of the conversation's last judged turn's span, in that turn's trace (so a viewer that
shows traces by session does not count it as one more turn), carries the conversation id as `session.id`
and `gen_ai.conversation.id`, and links to every judged turn's span.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags

from tracescore import semconv
from tracescore._plural import counted
from tracescore.emit._spans import Judged, evaluator_span, link_to
from tracescore.model import ConversationRecord

__all__ = ["CONVERSATION_EVALUATION_PREFIX", "conversation_span", "session_annotation"]

# The evaluation's name in spans and annotations: "conversation_faithfulness", never the turns' own name.
CONVERSATION_EVALUATION_PREFIX = "conversation_"
_MAX_LINKS = 128  # the OTel SDK's default span link limit


def _name(record: ConversationRecord) -> str:
    return CONVERSATION_EVALUATION_PREFIX + record.metric


def session_annotation(record: ConversationRecord) -> dict[str, Any]:
    """One element of the `data` list of Phoenix's POST /v1/session_annotations.

    Phoenix upserts on (session, name, identifier): a revision overwrites the record it supersedes, while
    each judge tier (offline, the LLM baseline, its cascade picks) keeps an annotation of its own."""
    return {
        "session_id": record.conversation_id,
        "name": _name(record),
        "annotator_kind": record.annotator_kind,
        "identifier": f"tracescore:{record.judge}:{record.selection or 'all'}",
        "result": {
            "label": record.label or record.status.value,
            "score": record.score,
            "explanation": record.reason,
        },
        "metadata": record.model_dump(
            mode="json",
            include={
                "service_name",
                "route",
                "turns",
                "turns_scored",
                "turns_flagged",
                "complete",
                "share_lower",
                "share_upper",
                "revision",
                "trace_ids",
                "records_past_cap",
            },
        ),
    }


def conversation_span(
    record: ConversationRecord, start_ns: int, end_ns: int | None = None
) -> ReadableSpan | None:
    """The record as an evaluation span under its last judged turn; None when no turn was judged."""
    if not record.trace_ids:
        return None
    trace_id = int(record.trace_ids[-1], 16)
    parent = SpanContext(trace_id, int(record.span_ids[-1], 16), is_remote=True, trace_flags=TraceFlags(1))
    name = _name(record)
    judged = Judged(
        name=name,
        what=f"{record.metric} over {counted(record.turns, 'turn')} of conversation {record.conversation_id}",
        score=record.score,
        label=record.label,
        explanation=record.reason,
        judge=record.judge,
        annotator=record.annotator_kind,
        route=record.route,
        service=record.service_name,
        status=record.status,
        revision=record.revision,
        selection=record.selection,
    )
    own: dict[str, Any] = {
        semconv.SESSION_ID: record.conversation_id,
        semconv.GEN_AI_CONVERSATION_ID: record.conversation_id,
        "tracescore.conversation.turns": record.turns,
        "tracescore.conversation.turns_scored": record.turns_scored,
        "tracescore.conversation.turns_flagged": record.turns_flagged,
        "tracescore.conversation.complete": record.complete,
    }
    links = [
        link_to(SpanContext(int(t, 16), int(s, 16), is_remote=True), "evaluated_turn")
        # Aligned when the service builds the record; one read from elsewhere links as far as both go.
        for t, s in list(zip(record.trace_ids, record.span_ids, strict=False))[-_MAX_LINKS:]
    ]
    return evaluator_span(judged, own, parent, links, start_ns, end_ns)
