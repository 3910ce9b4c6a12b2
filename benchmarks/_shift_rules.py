"""Label rules for long answers as families of settings, for benchmarks/offline_shift.py.

Each family fits what it needs on a training part (labelled answers) and then predicts "hallucinated" for
an answer at one of its settings. The judge's verdicts are the shipped offline judge's; only the decision
made from them differs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from halueval_accuracy import Row

from tracescore.model import MetricResult

THRESHOLDS = (0.0, 0.1, 0.25, 0.4, 0.5)
MIN_CONFIDENCES = (0.3, 0.5, 0.7, 0.9)
LEVELS = (0.3, 0.5, 0.6, 0.7, 0.9)  # the confidences a counted claim may be asked for, lowest first
ALPHAS = (0.05, 0.1, 0.15, 0.2, 0.3)
RATES = (0.1, 0.2, 0.35, 0.5)
LOG_BARS = (-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
LAMBDAS = (0.8, 0.9, 1.0, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5)
_UNSUPPORTED = frozenset({"NO_EVIDENCE", "CONTRADICTORY"})
_BANDS = ("FULLY_SUPPORTED", "PARTIALLY_SUPPORTED", "unsure", "0.5", "0.7", "0.9")


@dataclass(frozen=True)
class Claim:
    verdict: str
    confidence: float  # a verdict without one reads as sure

    @property
    def unsupported(self) -> bool:
        return self.verdict in _UNSUPPORTED

    @property
    def band(self) -> str:
        if not self.unsupported:
            return self.verdict
        return next((b for b in ("0.9", "0.7", "0.5") if self.confidence >= float(b)), "unsure")


@dataclass(frozen=True)
class Answer:
    hallucinated: bool
    passage: tuple[str, ...]
    model: str
    text: str
    score: float
    claims: tuple[Claim, ...]

    def counted(self, min_confidence: float) -> int:
        return sum(c.unsupported and c.confidence >= min_confidence for c in self.claims)


def answer_of(row: Row, result: MetricResult, model: str) -> Answer:
    claims = tuple(
        Claim(c["verdict"], 1.0 if c.get("confidence") is None else float(c["confidence"]))
        for c in result.details.get("claims") or []
    )
    assert result.score is not None
    return Answer(row.hallucinated, row.record.contexts, model, row.record.answer, result.score, claims)


Predict = Callable[[Answer, tuple[float, ...]], bool]


@dataclass(frozen=True)
class Family:
    settings: tuple[tuple[float, ...], ...]
    fit: Callable[[Sequence[Answer]], Predict]


def _today(train: Sequence[Answer]) -> Predict:
    return lambda a, s: a.score < s[0] or a.counted(s[1]) > 0


def _score(train: Sequence[Answer]) -> Predict:
    return lambda a, s: a.score < s[0]


def _per_claim(train: Sequence[Answer]) -> Predict:
    """The bar a claim must pass to count rises with the answer's claim count: the lowest confidence level
    whose per-claim false-flag rate p (the training part's faithful claims, add-half smoothed) keeps
    1-(1-p)^n at alpha or below."""
    faithful = [c for a in train if not a.hallucinated for c in a.claims]
    rate = {
        level: (sum(c.unsupported and c.confidence >= level for c in faithful) + 0.5) / (len(faithful) + 1)
        for level in LEVELS
    }

    def bar(n: int, alpha: float) -> float:
        return next((level for level in LEVELS if 1 - (1 - rate[level]) ** n <= alpha), 2.0)

    return lambda a, s: a.score < s[0] or a.counted(bar(len(a.claims), s[1])) > 0


def _ratios(train: Sequence[Answer]) -> dict[str, float]:
    """Each claim band's likelihood ratio: its share among the hallucinated answers' claims over its share
    among the faithful ones' (add-one smoothed)."""
    shares = []
    for label in (True, False):
        claims = [c.band for a in train if a.hallucinated is label for c in a.claims]
        shares.append({b: (claims.count(b) + 1) / (len(claims) + len(_BANDS)) for b in _BANDS})
    return {b: shares[0][b] / shares[1][b] for b in _BANDS}


def _mixture(train: Sequence[Answer]) -> Predict:
    """Each claim is wrong with chance r in a hallucinated answer, independently: the answer's log likelihood
    ratio is the sum over its claims of log(1 + r (LR - 1)). For a faithful answer each term's expectation is
    below 0 (the bar is not crossed more often as it grows); a hallucinated one's errors add up."""
    ratio = _ratios(train)

    def total(a: Answer, r: float) -> float:
        return sum(math.log(1 + r * (ratio[c.band] - 1)) for c in a.claims)

    return lambda a, s: total(a, s[0]) >= s[1]


def _mean_lr(train: Sequence[Answer]) -> Predict:
    """The answer's likelihood ratio is the mean of its claims' band ratios (one wrong claim among n)."""
    ratio = _ratios(train)

    def mean(a: Answer) -> float:
        return sum(ratio[c.band] for c in a.claims) / max(1, len(a.claims))

    return lambda a, s: mean(a) >= s[0]


FAMILIES: dict[str, Family] = {
    "today": Family(tuple(itertools.product(THRESHOLDS, MIN_CONFIDENCES)), _today),
    "score": Family(tuple((t,) for t in THRESHOLDS), _score),
    "per-claim": Family(tuple(itertools.product(THRESHOLDS, ALPHAS)), _per_claim),
    "mean-lr": Family(tuple((x,) for x in LAMBDAS), _mean_lr),
    "mixture": Family(tuple(itertools.product(RATES, LOG_BARS)), _mixture),
}
