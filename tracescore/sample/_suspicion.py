"""Suspicion: how likely the offline judge's result says the answer is hallucinated, and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tracescore._plural import counted
from tracescore.model import FaithfulnessFindings, MetricResult, MetricStatus, Verdict
from tracescore.sample._calibration import SuspicionFeatures
from tracescore.sample._config import CascadeConfig
from tracescore.sample._learning import SuspicionModels

__all__ = ["Suspicion", "suspicion"]


@dataclass(frozen=True, slots=True)
class Suspicion:
    probability: float  # P(hallucinated) on the balanced scale; 1.0 for an offline error
    reason: str
    features: tuple[float, ...] | None = None  # None for an offline error: nothing to rank or learn from


def suspicion(
    results: Sequence[MetricResult], cascade: CascadeConfig, models: SuspicionModels, route: str = ""
) -> Suspicion | None:
    """The suspicion of the cascade metric's offline result, or None when there is nothing to suspect (the
    metric was not scored, is not applicable, e.g. a refusal, or failed without `escalate_errors`)."""
    result = next((r for r in results if r.metric == cascade.metric), None)
    if result is None or result.status is MetricStatus.NOT_APPLICABLE:
        return None
    if result.status is MetricStatus.ERROR:
        why = f"offline {cascade.metric} failed: {result.reason}"
        return Suspicion(1.0, why) if cascade.escalate_errors else None
    found = FaithfulnessFindings.of(result)
    x = SuspicionFeatures.of(found).vector()
    probability = models.probability(route, x)
    counts = {Verdict.CONTRADICTORY: found.contradicted, Verdict.NO_EVIDENCE: found.no_evidence}
    flagged = [f"{v} ({n})" for v, n in counts.items() if n > 0]
    score = "" if result.score is None else f", offline {cascade.metric} {result.score:.2f}"
    claims = f", claims judged {', '.join(flagged)}" if flagged else ""
    aligned = (
        f", {found.aligned} of {counted(found.claims, 'claim')} aligned"
        if found.aligned < found.claims
        else ""
    )
    return Suspicion(probability, f"P(hallucinated) {probability:.2f}{score}{claims}{aligned}", x)
