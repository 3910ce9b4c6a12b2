"""Turn records (evaluation records of interactions with a session id) for the conversation tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tracescore.model import EvaluationRecord, MetricStatus

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def turn(
    n: int,
    score: float | None,
    conversation: str | None = "c-1",
    *,
    judge: str = "offline",
    selection: str | None = None,
    revision: int = 0,
    service: str = "chat-api",
    metric: str = "faithfulness",
    status: MetricStatus | None = None,
    at: datetime | None = None,
) -> EvaluationRecord:
    """Turn `n` of `conversation` (trace id from n, so the same n is the same turn), scored `score`."""
    label = None if score is None else ("faithful" if score >= 0.5 else "hallucinated")
    return EvaluationRecord(
        trace_id=f"{n:032x}",
        span_id=f"{n:016x}",
        service_name=service,
        route="/chat",
        metric=metric,
        score=score,
        label=label,
        status=status or (MetricStatus.OK if score is not None else MetricStatus.ERROR),
        reason=None if score is None or score >= 0.5 else f"turn {n}: claim without evidence",
        judge=judge,
        selection=selection,
        inclusion_probability=None if selection is None else (1.0 if selection == "cascade" else 0.2),
        session_id=conversation,
        revision=revision,
        timestamp=at or T0 + timedelta(seconds=n),
    )


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)
