"""Evaluation records: one JSON object per (scored span, metric) on the `tracescore.evaluations` topic."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from tracescore.emit._explain import AnnotatorKind, annotator_kind, explanation
from tracescore.model import MetricResult, MetricStatus, RagSpan, Usage

__all__ = ["SCHEMA_VERSION", "EvaluationRecord", "evaluation_record"]

SCHEMA_VERSION = 1


class EvaluationRecord(BaseModel):
    """Versioned wire format. Add fields freely; renaming or removing one bumps `schema_version`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    trace_id: str = Field(description="Scored span's trace id, 32 lowercase hex chars (as in OTLP JSON).")
    span_id: str = Field(description="Scored span's id, 16 lowercase hex chars.")
    evaluation_span_id: str | None = None
    service_name: str
    route: str
    metric: str
    score: float | None
    label: str | None
    status: MetricStatus
    reason: str | None = None
    judge: str
    # Derived from `judge` when absent (records written before this field existed read the same way).
    annotator_kind: AnnotatorKind = Field(default="LLM", description="CODE (offline judge) or LLM (a model).")
    selection: str | None = Field(
        default=None,
        description="Why an LLM judge behind the sampling policy scored it: cascade (suspicious offline) or "
        "baseline (uniform, unbiased: use these for rolling estimates); None otherwise.",
    )
    inclusion_probability: float | None = None
    offline_score: float | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the offline judge's score of the interaction "
        "and metric, so an estimate can pair them without the offline record.",
    )
    convention: str = Field(
        default="tracescore", description="Instrumentation convention the interaction was read from."
    )
    session_id: str | None = Field(
        default=None,
        description="Conversation the turn belongs to (session.id / gen_ai.conversation.id).",
    )
    revision: int = Field(
        default=0,
        ge=0,
        description="0 for an interaction's first scoring; n+1 when spans that arrived late changed what "
        "was judged (question, documents, answer) and it was scored again.",
    )
    supersedes: str | None = Field(
        default=None,
        description="Key of the revision this record replaces, `<trace_id>:<span_id>:<revision>`: a reader "
        "keeps the latest revision of each (trace_id, span_id).",
    )
    timestamp: datetime
    details: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="before")
    @classmethod
    def _annotator_from_judge(cls, data: Any) -> Any:
        if isinstance(data, dict) and "annotator_kind" not in data and isinstance(data.get("judge"), str):
            return {**data, "annotator_kind": annotator_kind(data["judge"])}
        return data

    def to_kafka(self) -> tuple[bytes, bytes]:
        """(key, value): keyed by trace id so a trace's evaluations stay in one partition, in order."""
        return self.trace_id.encode(), self.model_dump_json().encode()


def evaluation_record(
    rag: RagSpan,
    result: MetricResult,
    evaluation_span_id: str | None,
    now: datetime | None = None,
    selection: str | None = None,
    inclusion_probability: float | None = None,
    offline_score: float | None = None,
    revision: int = 0,
    supersedes: str | None = None,
) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=rag.span.trace_id,
        span_id=rag.span.span_id,
        evaluation_span_id=evaluation_span_id,
        service_name=rag.span.service_name,
        route=rag.route,
        metric=result.metric,
        score=result.score,
        label=result.label,
        status=result.status,
        reason=explanation(result),
        judge=result.judge,
        annotator_kind=annotator_kind(result.judge),
        convention=rag.convention,
        selection=selection,
        inclusion_probability=inclusion_probability,
        offline_score=offline_score,
        revision=revision,
        supersedes=supersedes,
        timestamp=now or datetime.now(UTC),
        details=_with_sources(rag, result.details),
        usage=result.usage,
        session_id=rag.session_id,
    )


def _with_sources(rag: RagSpan, details: dict[str, Any]) -> dict[str, Any]:
    """The judge's details plus where each judged document came from (aligned with the contexts) and what
    extract left out or read differently."""
    if not rag.context_sources and not rag.context_notes:
        return details
    extra: dict[str, Any] = {
        "context_sources": [{"span_id": s.span_id, "kind": s.kind} for s in rag.context_sources]
    }
    if rag.context_notes:
        extra["context_notes"] = list(rag.context_notes)
    return {**details, **extra}
