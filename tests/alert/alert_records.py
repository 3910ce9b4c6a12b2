"""Evaluation records for the alert tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from tracescore.model import EvaluationRecord, MetricStatus

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def record(
    score: float | None,
    at: datetime = T0,
    route: str = "/billing",
    service: str = "rag-api",
    metric: str = "faithfulness",
    status: MetricStatus | None = None,
    reason: str | None = None,
) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=uuid.uuid4().hex,
        span_id=uuid.uuid4().hex[:16],
        service_name=service,
        route=route,
        metric=metric,
        score=score,
        label=None,
        status=status or (MetricStatus.OK if score is not None else MetricStatus.ERROR),
        reason=reason,
        judge="offline",
        timestamp=at,
    )


def llm_record(
    of: EvaluationRecord,
    score: float | None,
    selection: str | None,
    inclusion_probability: float | None,
    at: datetime | None = None,
) -> EvaluationRecord:
    """The LLM judge's record of the interaction `of` (an offline record), as the cascade writes it."""
    return of.model_copy(
        update={
            "score": score,
            "status": MetricStatus.OK if score is not None else MetricStatus.ERROR,
            "judge": "openai:gpt-4o-mini",
            "annotator_kind": "LLM",
            "selection": selection,
            "inclusion_probability": inclusion_probability,
            "offline_score": of.score,
            "timestamp": at or of.timestamp,
        }
    )
