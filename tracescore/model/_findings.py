"""A typed view of a Faithfulness result: what its details say about the answer's claims.

Faithfulness (tracescore.score) writes its details as JSON-ready data (records, spans and reports carry
them); whoever reads them for a decision (the cascade's suspicion score) reads them here, once, rather than
by string keys of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracescore.model._results import MetricResult, Verdict

__all__ = ["NEAR_CERTAIN", "FaithfulnessFindings"]

# A verdict at this confidence or more is near certain: for the offline judge, a name or figure the context
# lacks (README, What "hallucinated" means). A verdict without a confidence counts as sure.
NEAR_CERTAIN = 0.85
_UNSUPPORTED = frozenset({Verdict.NO_EVIDENCE.value, Verdict.CONTRADICTORY.value})


@dataclass(frozen=True, slots=True)
class FaithfulnessFindings:
    """Counts and confidences of one scored Faithfulness result's claims."""

    score: float | None
    claims: int  # claims judged
    supported: int
    partial: int
    no_evidence: int
    contradicted: int
    confidently_unsupported: int  # unsupported at the label rule's min_confidence (`unsupported_claims`)
    near_certain: int  # unsupported at NEAR_CERTAIN or more (or without a confidence)
    aligned: int  # claims the judge quotes evidence for (all of them when the result lists no claims)
    # The highest confidence among the unsupported claims it quotes evidence for (0 if none): the weakest
    # claim the judge could align.
    weakest_aligned: float
    most_confident: float  # the highest confidence among unsupported claims; 0 if none

    @property
    def unsupported(self) -> int:
        return self.no_evidence + self.contradicted

    @classmethod
    def of(cls, result: MetricResult) -> FaithfulnessFindings:
        """The view of `result`; a detail that is missing or malformed reads as absent, never raises."""
        details: Mapping[str, Any] = result.details or {}
        raw = details.get("verdict_counts")
        counts = {v.value: _count(raw, v.value) for v in Verdict} if isinstance(raw, Mapping) else {}
        rows = [c for c in details.get("claims") or () if isinstance(c, Mapping)]
        if not counts:
            counts = {v.value: sum(1 for c in rows if c.get("verdict") == v.value) for v in Verdict}
        total = details.get("total_claims")
        if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
            total = sum(counts.values()) or len(rows)
        flagged = [c for c in rows if c.get("verdict") in _UNSUPPORTED]
        # A flagged verdict without a confidence (a judge that does not say) counts as sure, as in the label
        # rule; so do the flagged counts of a result that lists no claims.
        confidences = [_confidence(c) for c in flagged]
        aligned_confidences = [_confidence(c) for c in flagged if c.get("evidence")]
        if not rows:
            confidences = [1.0] * sum(counts[v] for v in _UNSUPPORTED)
            aligned_confidences = confidences
        confident = details.get("unsupported_claims")
        if not isinstance(confident, int) or isinstance(confident, bool) or confident < 0:
            confident = sum(1 for c in confidences if c == 1.0)
        return cls(
            score=result.score,
            claims=total,
            supported=counts[Verdict.FULLY_SUPPORTED.value],
            partial=counts[Verdict.PARTIALLY_SUPPORTED.value],
            no_evidence=counts[Verdict.NO_EVIDENCE.value],
            contradicted=counts[Verdict.CONTRADICTORY.value],
            confidently_unsupported=confident,
            near_certain=sum(1 for c in confidences if c >= NEAR_CERTAIN),
            aligned=sum(1 for c in rows if c.get("evidence")) if rows else total,
            weakest_aligned=max(aligned_confidences, default=0.0),
            most_confident=max(confidences, default=0.0),
        )


def _count(counts: Mapping[str, Any], verdict: str) -> int:
    n = counts.get(verdict, 0)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def _confidence(claim: Mapping[str, Any]) -> float:
    value = claim.get("confidence")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return 1.0
