"""The suspicion score: P(hallucinated) from the offline judge's results, a small logistic model.

The features (SuspicionFeatures, by name) are what the offline judge's Faithfulness result says about the
answer's claims, read through its typed view (tracescore.model.FaithfulnessFindings): the score, the
judge's surest unsupported claim, the claims the label rule counts, how many claims. The coefficients are
named too (COLD_START). The probability is on a balanced-prior scale (as if half the answers were
hallucinated): above 0.5 means the features are more typical of hallucinated answers than of faithful ones,
whatever the share of hallucinations in the traffic. Online learning keeps that scale by
weighting its labels per class.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from hashlib import blake2b
from operator import attrgetter
from types import MappingProxyType

from tracescore.model import FaithfulnessFindings, MetricResult

__all__ = [
    "COLD_START",
    "FEATURES",
    "LogisticModel",
    "SuspicionFeatures",
    "calibration_half",
    "coefficients",
    "features",
    "fit",
]


@dataclass(frozen=True, slots=True)
class SuspicionFeatures:
    """The features of one scored (status OK) offline Faithfulness result, from its typed findings: how much
    of the answer is unsupported, how sure the judge is of its surest unsupported claim, the share of claims
    the label rule counts as unsupported, and how many claims there are (a long answer holds more to get
    wrong). Four, on purpose: the features that read how the judge aligned claims with the passage (rules
    written while reading the dev passages), or only its near-certain name and figure checks (which rank
    faithful summaries that add a well-known name first), ranked no better held out (BENCHMARKS, "Figures
    that hold on data we have not read")."""

    unsupported: float  # 1 - the offline score
    most_confident: float  # highest confidence among all unsupported claims (0: none)
    confident_share: float  # share of claims the label rule counts as unsupported (`unsupported_claims`)
    claims: float  # log(1 + claims), 1.0 at 20 claims and above

    @classmethod
    def of(cls, found: FaithfulnessFindings) -> SuspicionFeatures:
        total = found.claims
        score = found.score if found.score is not None else 0.5
        return cls(
            unsupported=1.0 - min(1.0, max(0.0, score)),
            most_confident=found.most_confident,
            confident_share=min(1.0, found.confidently_unsupported / total) if total else 0.0,
            claims=min(1.0, math.log1p(total) / _CLAIMS_SCALE),
        )

    def vector(self) -> tuple[float, ...]:
        """The values in FEATURES order, the bias first."""
        return (1.0, *_values(self))


# The model's inputs, by name: a constant bias, then the fields of SuspicionFeatures in order.
FEATURES: tuple[str, ...] = ("bias", *(f.name for f in fields(SuspicionFeatures)))
# The fields' values in that order (`astuple` copied each value deeply: a tenth of the cascade's step 2).
_values = attrgetter(*FEATURES[1:])

# Fitted with `fit` on the calibration halves of the open part of both labelled dev sets together (their
# lockbox left out, benchmarks/_lockbox.py; HaluEval QA: the questions whose text and documents hash to
# half 0; FaithBench summaries: the passages that do); the other halves and the lockboxes are held out for
# the figures in BENCHMARKS.md.
# `python benchmarks/cascade_sampling.py DATA.jsonl --calibrate QA.jsonl,LONG.jsonl` refits them.
COLD_START: Mapping[str, float] = MappingProxyType(
    {
        "bias": -0.787,
        "unsupported": 0.832,
        "most_confident": 0.7,
        "confident_share": 0.555,
        "claims": 0.144,
    }
)

_CLAIMS_SCALE = math.log1p(20)
_MAX_CLASS_WEIGHT = 10.0  # a class at 5% of labels gets its full weight


def coefficients(named: Mapping[str, float]) -> tuple[float, ...]:
    """Named coefficients as a vector in FEATURES order; every feature must be named, and nothing else."""
    unknown, missing = set(named) - set(FEATURES), [f for f in FEATURES if f not in named]
    if unknown or missing:
        raise ValueError(
            f"suspicion coefficients must name exactly {', '.join(FEATURES)}"
            + (f"; unknown: {', '.join(sorted(unknown))}" if unknown else "")
            + (f"; missing: {', '.join(missing)}" if missing else "")
        )
    return tuple(float(named[f]) for f in FEATURES)


def calibration_half(query: str, contexts: Sequence[str]) -> int:
    """The half of a labelled record, by a hash of its question and its documents: 0 calibrates (COLD_START,
    the offline judge's thresholds), 1 is held out. Every answer to one question, every summary of one
    passage ("Summarize the following passage." shares one query), falls in the same half."""
    key = "\x1f".join((query, *contexts))
    return blake2b(key.encode(), digest_size=8).digest()[0] % 2


def features(result: MetricResult) -> tuple[float, ...]:
    """The feature vector (in FEATURES order) of one scored (status OK) offline result."""
    return SuspicionFeatures.of(FaithfulnessFindings.of(result)).vector()


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
    def cold_start(cls, named: Mapping[str, float] = COLD_START) -> LogisticModel:
        weights = coefficients(named)
        return cls(weights=list(weights), anchor=weights)

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
    rows: Sequence[tuple[Sequence[float], bool]], *, l2: float = 0.1, iterations: int = 3000
) -> dict[str, float]:
    """Balanced logistic regression by full-batch gradient descent (a few hundred rows: no library needed);
    the coefficients by feature name. `l2` pulls them toward 0 (the bias apart): a few dozen passages or
    questions fit any weights; held out, the pulled ones ranked as well or better (BENCHMARKS)."""
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
    return {name: round(w, 3) for name, w in zip(FEATURES, weights, strict=True)}
