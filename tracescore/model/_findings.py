"""A typed view of a Faithfulness result: what its details say about the answer's claims.

Faithfulness (tracescore.score) writes its details (`FaithfulnessDetails`: records, spans and reports carry
them); whoever reads them for a decision (the cascade's suspicion score) reads these counts, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracescore.model._claims import FaithfulnessDetails
from tracescore.model._results import MetricResult, Verdict

__all__ = ["NEAR_CERTAIN", "FaithfulnessFindings"]

# A verdict at this confidence or more is near certain: for the offline judge, a name or figure the context
# lacks (README, What "hallucinated" means). A verdict without a confidence counts as sure.
NEAR_CERTAIN = 0.85


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
        details = FaithfulnessDetails.of(result)
        rows = details.claims
        if details.verdict_counts is not None:
            counts = {v: details.verdict_counts.get(v, 0) for v in Verdict}
        else:
            counts = {v: sum(1 for c in rows if c.verdict is v) for v in Verdict}
        total = details.total_claims
        if total is None or total <= 0:
            total = sum(counts.values()) or len(rows)
        flagged = [c for c in rows if c.unsupported]
        # A flagged verdict without a confidence (a judge that does not say) counts as sure, as in the label
        # rule; so do the flagged counts of a result that lists no claims.
        confidences = [c.sure for c in flagged]
        aligned_confidences = [c.sure for c in flagged if c.evidence]
        if not rows:
            confidences = [1.0] * (counts[Verdict.NO_EVIDENCE] + counts[Verdict.CONTRADICTORY])
            aligned_confidences = confidences
        confident = details.unsupported_claims
        if confident is None:
            confident = sum(1 for c in confidences if c == 1.0)
        return cls(
            score=result.score,
            claims=total,
            supported=counts[Verdict.FULLY_SUPPORTED],
            partial=counts[Verdict.PARTIALLY_SUPPORTED],
            no_evidence=counts[Verdict.NO_EVIDENCE],
            contradicted=counts[Verdict.CONTRADICTORY],
            confidently_unsupported=confident,
            near_certain=sum(1 for c in confidences if c >= NEAR_CERTAIN),
            aligned=sum(1 for c in rows if c.evidence) if rows else total,
            weakest_aligned=max(aligned_confidences, default=0.0),
            most_confident=max(confidences, default=0.0),
        )
