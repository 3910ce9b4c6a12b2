"""Evaluation records built from an interaction and a metric's result (the record itself is in
`tracescore.model`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from tracescore.emit._explain import explanation
from tracescore.model import (
    HISTORY_TURNS_KEPT,
    ContextSource,
    DocumentSource,
    EvaluationRecord,
    FaithfulnessDetails,
    Interaction,
    MetricResult,
    annotator_kind,
)

__all__ = ["evaluation_record", "started_at"]


def evaluation_record(
    rag: Interaction,
    result: MetricResult,
    evaluation_span_id: str | None,
    now: datetime | None = None,
    selection: str | None = None,
    inclusion_probability: float | None = None,
    offline_score: float | None = None,
    offline_label: str | None = None,
    targeted_share: float | None = None,
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
        offline_label=offline_label,
        targeted_share=targeted_share,
        revision=revision,
        supersedes=supersedes,
        timestamp=now or datetime.now(UTC),
        span_started_at=started_at(rag),
        details=_with_sources(rag, result.details),
        usage=result.usage,
        session_id=rag.session_id,
        user_id=rag.user_id,
        conversation_source=rag.conversation_source,
        history_turns=list(rag.history[-HISTORY_TURNS_KEPT:]) if rag.session_id is not None else [],
        response_id=rag.response_id,
        previous_response_id=rag.previous_response_id,
    )


def started_at(rag: Interaction) -> datetime | None:
    """When the interaction's span started (UTC): the turn's time; None when not recorded."""
    started = rag.span.start_time_unix_nano
    return datetime.fromtimestamp(started / 1e9, UTC) if started > 0 else None


def _with_sources(rag: Interaction, details: dict[str, Any]) -> dict[str, Any]:
    """The judge's details plus where each judged document came from (aligned with the contexts; an earlier
    turn's with how many turns back), where each claim's evidence came from, what extract left out or read
    differently, and why there is no question when it was not recorded."""
    if not rag.context_sources and not rag.context_notes and rag.question_missing is None:
        return details
    sources = [_source(s) for s in rag.context_sources]
    extra: dict[str, Any] = {"context_sources": sources}
    claims = _with_evidence_sources(details, sources)
    if claims is not None:
        extra["claims"] = claims
    if rag.context_notes:
        extra["context_notes"] = list(rag.context_notes)
    if rag.question_missing is not None:
        extra["question_recorded"] = False
        extra["question_missing"] = rag.question_missing
    return {**details, **extra}


def _source(source: ContextSource) -> dict[str, Any]:
    described: dict[str, Any] = {"span_id": source.span_id, "kind": source.kind}
    if source.turns_back:
        described["turns_back"] = source.turns_back
    return described


def _with_evidence_sources(details: dict[str, Any], sources: list[dict[str, Any]]) -> list[Any] | None:
    """Faithfulness's claims, each with `evidence_source`, the source of the document its evidence was found
    in (for a supported claim, which retrieval, tool or earlier turn supported it); None for details that
    are not Faithfulness's (strictly: a key it does not write fails the tests that hold it to the model)."""
    try:
        found = FaithfulnessDetails.model_validate(details)
    except ValidationError:
        return None
    documents = [DocumentSource.model_validate(source) for source in sources]
    return [
        claim.model_copy(update={"evidence_source": documents[claim.context_index]}).model_dump(
            mode="json", exclude_unset=True
        )
        if claim.context_index is not None and 0 <= claim.context_index < len(documents)
        else claim.model_dump(mode="json", exclude_unset=True)
        for claim in found.claims
    ]
