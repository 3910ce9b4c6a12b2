"""One rolling estimate per (service, route, metric) from both judges, never counting an interaction twice:
the math, on additive sums of a window's interactions (alert/_window.py keeps the window; a drop rule's
buckets, alert/_drop.py, are the same sums of older interactions).

The window holds interactions, keyed by (trace id, span id): an interaction's offline record and its LLM
record meet in one entry, and a later record of the same tier replaces the earlier one (a higher `revision`
wins; a lower one read late is ignored), so a re-scored trace is counted once, with its newest scores.

The estimate (prediction-powered difference estimator, weighted by inclusion probability π):

* stratum C: interactions the LLM judge scored with π = 1 (cascade escalations): the LLM score replaces
  the offline one;
* stratum R: the rest, scored offline; the LLM judge saw a uniform share of them (the baseline, π < 1).
  Their offline scores are corrected on those pairs (prediction-powered, PPI++ style):

      estimate = (1/N) [ Σ_C y_llm + λ Σ_R offline + N_R · Σ_pairs w (y_llm - λ offline) / Σ_pairs w ]
      w = 1/π;  λ = the weighted slope of y_llm on offline over the pairs, in 0..1 (1 below 10 pairs)

      variance ≈ s²(score) / N + (N_R/N)² s²_e / m (1 - m/N_R),  e = y_llm - λ offline

  with s²_e shrunk towards a prior for few pairs (`_PRIOR_VAR`, `_PRIOR_PAIRS`). λ = 1 is the plain
  difference estimator; a smaller λ when the offline score predicts little within R (the variance is then
  lower than with λ = 1). With no LLM scores (or no pairs in R), R is its plain offline mean and the
  estimate is flagged uncalibrated.

What is estimated is the window's `signal`: `score`, the mean score; or `label`, the share of answers
whose label is good (1.0 when `tracescore.model.is_flagged` says no, else 0.0: for faithfulness, "the share
of this route's answers that are faithful"). Under `label` an LLM record pairs with the offline judge's
label (`offline_label`, else the interaction's offline record in the window); an LLM value with no offline
value to pair is left out and counted (`unpaired`), never paired with a score.

The pairs are the route's last `pair_memory` baseline pairs (200 by default), not only the window's: how
the offline judge errs on the answers it does not find suspicious is a property of the judge on this
route's traffic, which changes slowly, while the window must be short to see a drop. A 1% baseline gives a
window of 500 about five pairs; pooled, the correction and its variance come from up to 200 (the term
(1 - m/N_R) then no longer applies: the pairs are not a sample of this window's R). The assumption: the
offline judge's error on non-suspicious answers is stable over the pairs' span. A drift it misses shows
up as the pairs refresh; one it catches moves stratum C at once.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist
from typing import Literal, NamedTuple

from tracescore.model import EvaluationRecord, is_flagged

__all__ = [
    "CONVERSATION_SIGNALS",
    "PAIR_MEMORY",
    "TUNING_PAIRS",
    "Agreement",
    "Estimate",
    "Observation",
    "PairStats",
    "Signal",
    "Sums",
    "estimate_of",
    "interactions",
    "pair_stats",
    "plain_level",
]

# What a window estimates: the mean score, or the share of answers labelled good (docs, Alerting); or, of
# the conversation records, the share of conversations without a flagged turn, or the mean share of a
# conversation's turns that pass (alert/_conversations.py).
Signal = Literal["score", "label", "conversation_label", "conversation_score"]
CONVERSATION_SIGNALS: tuple[Signal, ...] = ("conversation_label", "conversation_score")

# Prior for the variance of (LLM - offline) on few pairs: a small sample of pairs that happen to agree must
# not make the interval vanish. Worth `_PRIOR_PAIRS` pairs; not fitted on data.
_PRIOR_VAR = 0.04
_PRIOR_PAIRS = 2
TUNING_PAIRS = 10  # fewer pairs: the plain difference (λ = 1), a slope from fewer would be noise
_UNITS: dict[str, str] = {
    "label": "labels",
    "score": "scores",
    "conversation_label": "conversations",
    "conversation_score": "conversations",
}
PAIR_MEMORY = 200  # baseline pairs kept per route and metric for the correction (beyond the window)
Pair = tuple[float, float, float]  # (weight 1/π, LLM score, offline score) of an interaction in R

# Sums of a set of interactions (additive: a window's, a bucket's), in this order; tracescore.alert._state's
# `Moments` is their stored form.
Sums = list[float]
C_N, C_SUM, C_SQUARES, R_N, R_SUM, R_SQUARES, OFFLINE_N, LLM_N, EXCLUDED, UNPAIRED, PAIRS = range(11)
SUMS_LEN = 11


def empty_sums() -> Sums:
    return [0.0] * SUMS_LEN


def add_sums(into: Sums, other: Sequence[float], sign: float = 1.0) -> None:
    """`into` += `other` (or -= with sign -1), in place."""
    into[:] = map(operator.add if sign > 0 else operator.sub, into, other)


@dataclass(frozen=True, slots=True, kw_only=True)  # twelve fields: by name, never by position
class Estimate:
    """The window's faithfulness (or other metric) estimate with one-sided bounds at `confidence`."""

    value: float
    lower: float
    upper: float
    n: int  # interactions
    offline_n: int  # offline scores used
    llm_n: int  # LLM scores used
    calibrated: bool  # False: offline scores alone (no LLM scores to correct them)
    confidence: float
    excluded: int = 0  # LLM scores left out: no inclusion probability and not from the uniform baseline
    unpaired: int = 0  # LLM scores of the sample left out: no offline value of the interaction to pair
    signal: Signal = "score"
    pairs: int = 0  # (LLM, offline) pairs of the route the correction came from, the window's and earlier
    # Calibrated, with a correction from at least TUNING_PAIRS pairs (or none to correct): on fewer the
    # correction is one or two answers' (y_llm - offline), which the interval's prior does not cover.
    settled: bool = False

    def describe(self) -> str:
        tag = "" if self.calibrated else ", uncalibrated: offline judge only"
        return f"{self.shown:.2f} [{self.lower:.2f}, {self.upper:.2f}] from {self.sources()}{tag}"

    @property
    def shown(self) -> float:
        """`value` itself is unclipped (unbiased); a share reads 0..1."""
        return min(1.0, max(0.0, self.value))

    def sources(self) -> str:
        return f"{self.offline_n} offline + {self.llm_n} LLM {_UNITS[self.signal]}"


@dataclass(frozen=True, slots=True)
class Agreement:
    """The two judges on the baseline interactions (both scored them, uniformly chosen)."""

    pairs: int
    agreement: float | None  # share on the same side of the label threshold
    mean_difference: float | None  # mean (LLM - offline)
    recall: float | None  # share of LLM-judged failures the offline judge also scored below threshold
    llm_failures: int


class Observation(NamedTuple):
    """One judge's value of one unit of a window: an answer (trace id, span id), or a conversation."""

    key: tuple[str, str]
    at: datetime
    value: float
    revision: int
    by_llm: bool  # the judge is an LLM
    # None (and no probability): a judge that scores every unit; else the LLM judge behind the sampling
    # policy, and how it chose the unit (baseline: uniformly; cascade: a targeted pick).
    selection: str | None = None
    inclusion_probability: float | None = None
    offline_hint: float | None = None  # the offline judge's value the LLM record carries


def _tuning(pairs: list[Pair]) -> float:
    """How much of the offline score to trust in stratum R (λ of PPI++): the weighted regression slope of
    the LLM score on the offline score over the pairs, in 0..1; 1 (plain difference) with few pairs."""
    if len(pairs) < TUNING_PAIRS:
        return 1.0
    total = sum(w for w, _, _ in pairs)
    y_mean = sum(w * y for w, y, _ in pairs) / total
    f_mean = sum(w * f for w, _, f in pairs) / total
    var_f = sum(w * (f - f_mean) ** 2 for w, _, f in pairs)
    if var_f <= 0:
        return 1.0
    cov = sum(w * (y - y_mean) * (f - f_mean) for w, y, f in pairs)
    return min(1.0, max(0.0, cov / var_f))


class PairStats(NamedTuple):
    """What the correction needs of a set of pairs: computed once per change of the route's pairs, not per
    record (a route's 200 remembered pairs would otherwise be walked several times for every record)."""

    count: int
    tuning: float  # λ
    correction: float  # weighted mean of y - λ·offline
    raw_var: float  # its weighted variance, with the m/(m-1) correction
    effective: float  # Kish effective sample size of the weights
    plain: float  # weighted mean of y - offline: the correction with λ = 1
    plain_raw_var: float  # its weighted variance, as raw_var

    def shrunk(self, raw: float) -> float:
        """A variance of the pairs' errors, shrunk towards the prior while the pairs are few."""
        return (self.count * raw + _PRIOR_PAIRS * _PRIOR_VAR) / (self.count + _PRIOR_PAIRS)


def _weighted_mean_var(pairs: list[Pair], errors: list[float], total_w: float) -> tuple[float, float]:
    mean = sum(w * e for (w, _, _), e in zip(pairs, errors, strict=True)) / total_w
    m = len(pairs)
    squares = sum(w * (e - mean) ** 2 for (w, _, _), e in zip(pairs, errors, strict=True))
    return mean, squares / total_w * (m / (m - 1) if m > 1 else 0.0)


def pair_stats(pairs: list[Pair]) -> PairStats:
    tuning = _tuning(pairs)
    total_w = sum(w for w, _, _ in pairs)
    correction, raw = _weighted_mean_var(pairs, [y - tuning * f for _, y, f in pairs], total_w)
    plain, plain_raw = _weighted_mean_var(pairs, [y - f for _, y, f in pairs], total_w)
    effective = total_w**2 / sum(w * w for w, _, _ in pairs)  # Kish: unequal weights count for less
    return PairStats(len(pairs), tuning, correction, raw, effective, plain, plain_raw)


def _spread(s: Sums, tuning: float, r_mean: float) -> float:
    """The variance of the values the estimate averages over the window's interactions: the LLM judge's in
    C; in R, λ·offline + the correction, whose spread is λ² times the offline scores' (PPI++: the pairs'
    share is the correction's own variance). Its share of the interval is the window's own chance variation
    around the route's rate."""
    n_c, n_r = s[C_N], s[R_N]
    var_r = tuning * tuning * max(0.0, s[R_SQUARES] / n_r - (s[R_SUM] / n_r) ** 2) if n_r else 0.0
    n = n_c + n_r
    mean = (s[C_SUM] + n_r * r_mean) / n
    in_c = max(0.0, s[C_SQUARES] - 2 * mean * s[C_SUM] + n_c * mean * mean)
    squares = in_c + n_r * (var_r + (r_mean - mean) ** 2)
    return squares / max(1.0, n - 1)


def estimate_of(s: Sums, stats: PairStats | None, confidence: float, signal: Signal) -> Estimate | None:
    """The estimate of a window from its sums and the route's pairs (None without an interaction).

    `stats` are the route's remembered pairs, this window's among them; when they are exactly this window's
    (`PAIRS` of the sums), the correction samples this window's R without replacement."""
    n_c, n_r = round(s[C_N]), round(s[R_N])
    n = n_c + n_r
    if n == 0:
        return None
    offline_n, llm_n = round(s[OFFLINE_N]), round(s[LLM_N])
    tuning, correction, correction_var = 1.0, 0.0, 0.0
    if stats is not None:
        tuning, correction, m = stats.tuning, stats.correction, stats.count
        fpc = (max(0.0, 1.0 - m / n_r) if n_r else 0.0) if m == round(s[PAIRS]) else 1.0
        correction_var = (n_r / n) ** 2 * stats.shrunk(stats.raw_var) / stats.effective * fpc
    # Not clipped to 0..1: with few pairs the correction can overshoot, and clipping would bias it.
    value = (s[C_SUM] + tuning * s[R_SUM] + n_r * correction) / n
    paired = stats is not None
    calibrated = (llm_n > 0 or paired) and (n_r == 0 or paired or offline_n == 0)
    settled = calibrated and (
        n_r == 0 or offline_n == 0 or (stats is not None and stats.count >= TUNING_PAIRS)
    )
    lower, upper = 0.0, 1.0  # one interaction: no interval
    if n >= 2:
        r_mean = tuning * s[R_SUM] / n_r + correction if n_r else 0.0
        var = _spread(s, tuning, r_mean) / n + correction_var
        half = NormalDist().inv_cdf(confidence) * math.sqrt(var)
        lower, upper = min(1.0, max(0.0, value - half)), max(0.0, min(1.0, value + half))
    return Estimate(
        value=value,
        lower=lower,
        upper=upper,
        n=n,
        offline_n=offline_n,
        llm_n=llm_n,
        calibrated=calibrated,
        settled=settled,
        confidence=confidence,
        excluded=round(s[EXCLUDED]),
        unpaired=round(s[UNPAIRED]),
        signal=signal,
        pairs=0 if stats is None else stats.count,
    )


def interactions(s: Sums) -> int:
    """How many interactions a set of sums holds (strata C and R)."""
    return round(s[C_N] + s[R_N])


def plain_level(s: Sums, correction: float) -> tuple[float, float, int]:
    """(level, per-interaction variance, interactions) of a set of interactions under the plain difference
    estimator (λ = 1) with the route's `correction`: how a drop rule reads a window and a normal, so a drop
    the offline judge sees counts in full and the correction, shared by both, cancels out of their
    difference."""
    n = s[C_N] + s[R_N]
    if n <= 0:
        return 0.0, 0.0, 0
    total = s[C_SUM] + s[R_SUM] + s[R_N] * correction
    squares = s[C_SQUARES] + s[R_SQUARES] + 2 * correction * s[R_SUM] + s[R_N] * correction**2
    mean = total / n
    var = max(0.0, squares / n - mean * mean) * (n / (n - 1) if n > 1 else 1.0)
    return mean, var, round(n)


def revision_of(record: EvaluationRecord) -> int:
    return int(getattr(record, "revision", 0) or 0)


def good(score: float, label: str | None) -> float:
    """1.0 for an answer the label rule passes, 0.0 for one it flags (README, What "hallucinated" means)."""
    return 0.0 if is_flagged({"score": score, "label": label}) else 1.0
