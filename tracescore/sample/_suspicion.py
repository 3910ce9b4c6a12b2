"""Suspicion: does the offline judge's result make an answer worth the LLM judge's time?"""

from __future__ import annotations

from collections.abc import Sequence

from tracescore.sample._config import CascadeConfig
from tracescore.score._types import MetricResult, MetricStatus

__all__ = ["suspicion"]


def suspicion(results: Sequence[MetricResult], cascade: CascadeConfig) -> str | None:
    """Why the answer is suspicious or uncertain, or None when the offline result gives no reason to look
    again (including: the cascade metric was not scored, or is not applicable, e.g. a refusal)."""
    result = next((r for r in results if r.metric == cascade.metric), None)
    if result is None or result.status is MetricStatus.NOT_APPLICABLE:
        return None
    if result.status is MetricStatus.ERROR:
        return f"offline {cascade.metric} failed: {result.reason}" if cascade.escalate_errors else None
    if result.score is not None and result.score < cascade.threshold:
        return f"offline {cascade.metric} {result.score:.2f} below {cascade.threshold:g}"
    counts = result.details.get("verdict_counts") or {}
    flagged = {v.value: counts.get(v.value, 0) for v in sorted(cascade.flag_verdicts)}
    flagged = {verdict: n for verdict, n in flagged.items() if isinstance(n, int) and n > 0}
    if flagged:
        return "claims judged " + ", ".join(f"{verdict} ({n})" for verdict, n in flagged.items())
    return None
