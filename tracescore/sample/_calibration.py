"""The suspicion score: P(hallucinated) from the offline judge's results, a small logistic model.

The features are what the offline judge's Faithfulness result says about the answer's claims (shares judged
unsupported or contradicted, the claims it could not match to any context sentence, how many claims, the
judge's confidence where it reports one). The probability is on a balanced-prior scale (as if half the
answers were hallucinated): above 0.5 means the features are more typical of hallucinated answers than of
faithful ones, whatever the share of hallucinations in the traffic. Online learning keeps that scale by
weighting its labels per class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore.model import MetricResult

__all__ = ["COLD_START", "FEATURES", "LogisticModel", "features", "fit"]

FEATURES = (
    "bias",
    "unsupported",  # 1 - the offline score
    "no_evidence",  # share of claims judged NO_EVIDENCE
    "contradicted",  # share judged CONTRADICTORY
    "partial",  # share judged PARTIALLY_SUPPORTED
    "any_no_evidence",
    "any_contradicted",
    "unchecked",  # share of claims the judge found no context sentence for at all
    "claims",  # log(1 + claims), 1.0 at 20 claims and above
    "confidence",  # highest confidence among the flagged claims, where the judge reports one (else 0)
    "confident",  # any claim the judge is sure is unsupported (its `unsupported_claims`, the label rule's)
    "confident_share",  # those claims' share of all claims: one invented sentence in a long answer counts
)

# Fitted with `fit` on the calibration half of the labelled dev set (HaluEval QA: the 122 questions whose
# text and documents hash to half 0, 244 records); the other 128 questions are held out for the figures in
# BENCHMARKS.md. Nothing was fitted on the synthetic shapes (long answers, summaries).
# `python benchmarks/cascade_sampling.py DATA.jsonl --calibrate` refits them on any set.
COLD_START: tuple[float, ...] = (
    -2.417,
    1.39,
    1.357,
    0.196,
    -0.327,
    1.357,
    0.196,
    0.113,
    0.0,
    0.879,
    0.839,
    0.839,
)

_FLAGGED = ("NO_EVIDENCE", "CONTRADICTORY")
_CLAIMS_SCALE = math.log1p(20)
_MAX_CLASS_WEIGHT = 10.0  # a class at 5% of labels gets its full weight


def features(result: MetricResult) -> tuple[float, ...]:
    """The feature vector (in FEATURES order) of one scored (status OK) offline result."""
    details: Mapping[str, Any] = result.details or {}
    counts = details.get("verdict_counts") or {}
    claims = [c for c in details.get("claims") or () if isinstance(c, Mapping)]
    total = details.get("total_claims")
    if not isinstance(total, int) or total <= 0:
        total = sum(n for n in counts.values() if isinstance(n, int)) or len(claims)
    share = {v: _count(counts, v) / total if total else 0.0 for v in (*_FLAGGED, "PARTIALLY_SUPPORTED")}
    score = result.score if result.score is not None else 0.5
    unchecked = sum(1 for c in claims if not c.get("evidence")) / len(claims) if claims else 0.0
    # A flagged verdict without a confidence (a judge that does not say, or no claim rows) counts as sure,
    # as in the label rule.
    confidences = [
        float(c["confidence"]) if isinstance(c.get("confidence"), int | float) else 1.0
        for c in claims
        if c.get("verdict") in _FLAGGED
    ]
    if not claims:
        confidences = [1.0] * sum(_count(counts, v) for v in _FLAGGED)
    sure = details.get("unsupported_claims")
    if not isinstance(sure, int) or sure < 0:
        sure = sum(1 for c in confidences if c == 1.0)
    return (
        1.0,
        1.0 - min(1.0, max(0.0, score)),
        share["NO_EVIDENCE"],
        share["CONTRADICTORY"],
        share["PARTIALLY_SUPPORTED"],
        float(share["NO_EVIDENCE"] > 0),
        float(share["CONTRADICTORY"] > 0),
        unchecked,
        min(1.0, math.log1p(total) / _CLAIMS_SCALE),
        max(confidences, default=0.0),
        float(sure > 0),
        min(1.0, sure / total) if total else 0.0,
    )


def _count(counts: Mapping[str, Any], verdict: str) -> int:
    n = counts.get(verdict, 0)
    return n if isinstance(n, int) and n > 0 else 0


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass
class LogisticModel:
    """Weights, the prior they are pulled toward (L2), and the labels seen per class."""

    weights: list[float]
    anchor: tuple[float, ...]
    labels: int = 0
    positives: int = 0

    @classmethod
    def cold_start(cls, weights: Sequence[float] = COLD_START) -> LogisticModel:
        return cls(weights=list(weights), anchor=tuple(weights))

    def probability(self, x: Sequence[float]) -> float:
        return _sigmoid(sum(w * v for w, v in zip(self.weights, x, strict=True)))

    def learn(self, x: Sequence[float], hallucinated: bool, *, rate: float, l2: float) -> None:
        """One SGD step on the class-weighted log loss plus `l2`/2 * |weights - anchor|^2."""
        self.labels += 1
        self.positives += hallucinated
        # Weights that make both classes count alike keep the probability on the balanced scale; the cap
        # keeps a rare class (one faithful answer in a stream of hallucinations) from taking giant steps.
        share = (self.positives + 1) / (self.labels + 2)
        weight = min(_MAX_CLASS_WEIGHT, 0.5 / (share if hallucinated else 1.0 - share))
        error = float(hallucinated) - self.probability(x)
        # A decaying step: early labels move the model, later ones refine it, noise averages out.
        step = rate / math.sqrt(1.0 + self.labels / 100.0)
        self.weights = [
            w + step * (weight * error * v - l2 * (w - a))
            for w, v, a in zip(self.weights, x, self.anchor, strict=True)
        ]


def fit(
    rows: Sequence[tuple[Sequence[float], bool]], *, l2: float = 0.01, iterations: int = 3000
) -> tuple[float, ...]:
    """Balanced logistic regression by full-batch gradient descent (a few hundred rows: no library needed)."""
    positives = sum(1 for _, y in rows if y)
    negatives = len(rows) - positives
    if not positives or not negatives:
        raise ValueError("calibration needs labelled hallucinated and faithful answers")
    weights = [0.0] * len(FEATURES)
    for _ in range(iterations):
        gradient = [0.0] * len(weights)
        for x, y in rows:
            p = _sigmoid(sum(w * v for w, v in zip(weights, x, strict=True)))
            scale = (0.5 / positives if y else 0.5 / negatives) * (p - float(y))
            for i, v in enumerate(x):
                gradient[i] += scale * v
        weights = [
            w - 2.0 * (g + l2 * w * (i > 0)) for i, (w, g) in enumerate(zip(weights, gradient, strict=True))
        ]
    return tuple(round(w, 3) for w in weights)
