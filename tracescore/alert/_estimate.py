"""One rolling estimate per (service, route, metric) from both judges, never counting an interaction twice.

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

import bisect
import math
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist
from typing import Literal, NamedTuple

from tracescore.model import EvaluationRecord, is_flagged

__all__ = ["CONVERSATION_SIGNALS", "Agreement", "Estimate", "EstimateWindow", "Observation", "Signal"]

# What a window estimates: the mean score, or the share of answers labelled good (docs, Alerting); or, of
# the conversation records, the share of conversations without a flagged turn, or the mean share of a
# conversation's turns that pass (alert/_conversations.py).
Signal = Literal["score", "label", "conversation_label", "conversation_score"]
CONVERSATION_SIGNALS: tuple[Signal, ...] = ("conversation_label", "conversation_score")

# Prior for the variance of (LLM - offline) on few pairs: a small sample of pairs that happen to agree must
# not make the interval vanish. Worth `_PRIOR_PAIRS` pairs; not fitted on data.
_PRIOR_VAR = 0.04
_PRIOR_PAIRS = 2
_TUNING_PAIRS = 10  # fewer pairs: the plain difference (λ = 1), a slope from fewer would be noise
_UNIFORM = "baseline"  # the selection the policy draws uniformly (on the conversation id, else the trace id)
_UNITS: dict[str, str] = {
    "label": "labels",
    "score": "scores",
    "conversation_label": "conversations",
    "conversation_score": "conversations",
}
PAIR_MEMORY = 200  # baseline pairs kept per route and metric for the correction (beyond the window)
_Pair = tuple[float, float, float]  # (weight 1/π, LLM score, offline score) of an interaction in R


@dataclass(frozen=True, slots=True)
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

    def describe(self) -> str:
        tag = "" if self.calibrated else ", uncalibrated: offline judge only"
        shown = min(1.0, max(0.0, self.value))  # `value` itself is unclipped (unbiased); a share reads 0..1
        what = _UNITS[self.signal]
        return (
            f"{shown:.2f} [{self.lower:.2f}, {self.upper:.2f}] from {self.offline_n} offline + "
            f"{self.llm_n} LLM {what}{tag}"
        )


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


@dataclass(slots=True)
class _Interaction:
    at: datetime
    primary: float | None = None  # the judge that scores every admitted one (offline, or the only judge)
    primary_llm: bool = False  # that judge is an LLM
    primary_rev: int = -1
    llm: float | None = None  # the LLM judge behind the sampling policy
    llm_rev: int = -1
    offline_hint: float | None = None  # the offline score the LLM record carries
    selection: str | None = None
    pi: float | None = None


def _tuning(pairs: list[_Pair]) -> float:
    """How much of the offline score to trust in stratum R (λ of PPI++): the weighted regression slope of
    the LLM score on the offline score over the pairs, in 0..1; 1 (plain difference) with few pairs."""
    if len(pairs) < _TUNING_PAIRS:
        return 1.0
    total = sum(w for w, _, _ in pairs)
    y_mean = sum(w * y for w, y, _ in pairs) / total
    f_mean = sum(w * f for w, _, f in pairs) / total
    var_f = sum(w * (f - f_mean) ** 2 for w, _, f in pairs)
    if var_f <= 0:
        return 1.0
    cov = sum(w * (y - y_mean) * (f - f_mean) for w, y, f in pairs)
    return min(1.0, max(0.0, cov / var_f))


class _PairStats(NamedTuple):
    """What the correction needs of a set of pairs: computed once per change of the route's pairs, not per
    record (a route's 200 remembered pairs would otherwise be walked several times for every record)."""

    count: int
    tuning: float  # λ
    correction: float  # weighted mean of y - λ·offline
    raw_var: float  # its weighted variance, with the m/(m-1) correction
    effective: float  # Kish effective sample size of the weights
    llm_var: float | None  # weighted variance of the LLM scores; None with fewer than _TUNING_PAIRS pairs


def _pair_stats(pairs: list[_Pair]) -> _PairStats:
    tuning = _tuning(pairs)
    total_w = sum(w for w, _, _ in pairs)
    errors = [(w, y - tuning * f) for w, y, f in pairs]
    correction = sum(w * e for w, e in errors) / total_w
    m = len(pairs)
    raw = sum(w * (e - correction) ** 2 for w, e in errors) / total_w * (m / (m - 1) if m > 1 else 0.0)
    effective = total_w**2 / sum(w * w for w, _, _ in pairs)  # Kish: unequal weights count for less
    llm_var = None
    if m >= _TUNING_PAIRS:
        y_mean = sum(w * y for w, y, _ in pairs) / total_w
        llm_var = sum(w * (y - y_mean) ** 2 for w, y, _ in pairs) / total_w
    return _PairStats(m, tuning, correction, raw, effective, llm_var)


def _spread(in_c: list[float], in_r: list[float], llm_var: float | None, r_mean: float) -> float:
    """The variance of the (LLM-judged) score over the window's interactions: known in C; in R from the
    pairs' LLM scores when there are enough (`llm_var`), else from the offline scores. Its share of the
    interval is the window's own chance variation around the route's rate."""
    if llm_var is not None:
        var_r = llm_var
    elif in_r:
        f_mean = sum(in_r) / len(in_r)
        var_r = sum((f - f_mean) ** 2 for f in in_r) / len(in_r)
    else:
        var_r = 0.0
    n = len(in_c) + len(in_r)
    mean = (sum(in_c) + len(in_r) * r_mean) / n
    squares = sum((y - mean) ** 2 for y in in_c) + len(in_r) * (var_r + (r_mean - mean) ** 2)
    return squares / max(1, n - 1)


def _pair_of(item: _Interaction) -> _Pair | None:
    """(1/π, LLM, offline) of an interaction in stratum R the LLM judge also scored, else None."""
    offline = item.primary if item.primary is not None else item.offline_hint
    if item.llm is None or offline is None or item.primary_llm:
        return None
    if item.pi is not None and 0 < item.pi < 1.0:
        return (1.0 / item.pi, item.llm, offline)
    if item.pi is None and item.selection == _UNIFORM:
        return (1.0, item.llm, offline)  # an older consumer's baseline: uniform, weight 1
    return None


def _revision(record: EvaluationRecord) -> int:
    return int(getattr(record, "revision", 0) or 0)


def _good(score: float, label: str | None) -> float:
    """1.0 for an answer the label rule passes, 0.0 for one it flags (README, What "hallucinated" means)."""
    return 0.0 if is_flagged({"score": score, "label": label}) else 1.0


class EstimateWindow:
    """The newest `maxlen` interactions of one route and metric, in time order."""

    def __init__(self, maxlen: int, signal: Signal = "score", pair_memory: int = PAIR_MEMORY) -> None:
        self.maxlen = maxlen
        self.signal = signal
        self._items: dict[tuple[str, str], _Interaction] = {}
        self._order: list[tuple[datetime, tuple[str, str]]] = []
        # Pairs outlive the window (see the module doc); a window's own pairs always fit.
        self._pair_memory = max(pair_memory, maxlen)
        self._pairs: OrderedDict[tuple[str, str], _Pair] = OrderedDict()
        self._pairs_changed = True  # the cached statistics of `_pairs` are stale
        self._stats: _PairStats | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, record: EvaluationRecord) -> None:
        if record.score is None:
            return  # a failed evaluation is judge health, not a score
        value, hint = record.score, record.offline_score
        if self.signal == "label":
            value = _good(record.score, record.label)
            # Only the offline label: its score alone does not say whether the label rule flagged it.
            off_score, off_label = record.offline_score, record.offline_label
            hint = None if off_score is None or off_label is None else _good(off_score, off_label)
        self.observe(
            Observation(
                (record.trace_id, record.span_id), record.timestamp, value, _revision(record),
                record.annotator_kind == "LLM", record.selection, record.inclusion_probability, hint,
            )
        )  # fmt: skip

    def observe(self, seen: Observation) -> None:
        """One judge's value of one unit (an answer, or a conversation: alert/_conversations.py)."""
        item = self._items.get(seen.key)
        if item is None:
            if len(self._items) >= self.maxlen and self._order and seen.at < self._order[0][0]:
                return  # older than every interaction of a full window: it has no place in it
            item = self._items[seen.key] = _Interaction(at=seen.at)
            bisect.insort(self._order, (item.at, seen.key))
        rev = seen.revision
        if seen.selection is None and seen.inclusion_probability is None:
            if rev >= item.primary_rev:
                item.primary, item.primary_rev = seen.value, rev
                item.primary_llm = seen.by_llm
        elif rev >= item.llm_rev:
            item.llm, item.llm_rev = seen.value, rev
            item.selection, item.pi = seen.selection, seen.inclusion_probability
            item.offline_hint = seen.offline_hint
        self._remember_pair(seen.key, item)
        while len(self._items) > self.maxlen:
            _, oldest = self._order.pop(0)
            del self._items[oldest]

    def _remember_pair(self, key: tuple[str, str], item: _Interaction) -> None:
        pair = _pair_of(item)
        if pair is None:
            return
        self._pairs[key] = pair
        self._pairs.move_to_end(key)
        self._pairs_changed = True
        while len(self._pairs) > self._pair_memory:
            self._pairs.popitem(last=False)

    def _memory_stats(self) -> _PairStats | None:
        """The route's remembered pairs' statistics (None without any), recomputed only after a change."""
        if self._pairs_changed:
            self._stats = _pair_stats(list(self._pairs.values())) if self._pairs else None
            self._pairs_changed = False
        return self._stats

    def prune(self, horizon: datetime) -> None:
        """Forget interactions older than `horizon`."""
        cut = bisect.bisect_left(self._order, horizon, key=lambda entry: entry[0])
        for _, key in self._order[:cut]:
            del self._items[key]
        del self._order[:cut]

    def estimate(self, confidence: float) -> Estimate | None:
        # The best score per interaction (for the spread of the metric itself): stratum C, stratum R.
        in_c: list[float] = []
        in_r: list[float] = []
        pairs: list[_Pair] = []  # (w, y_llm, offline) in R
        offline_n = llm_n = excluded = unpaired = 0
        any_llm = False
        for item in self._items.values():
            offline = item.primary if item.primary is not None else item.offline_hint
            if item.llm is not None and item.pi is not None and item.pi >= 1.0:
                in_c.append(item.llm)
                llm_n += 1
                any_llm = True
                continue
            if offline is None:
                unpaired += item.llm is not None  # an LLM value of the sample with no offline value to pair
                continue
            in_r.append(offline)
            if item.primary_llm:
                llm_n += 1
                any_llm = True
            else:
                offline_n += 1
            if item.llm is None:
                continue
            if item.pi is not None and item.pi > 0:
                pairs.append((1.0 / item.pi, item.llm, offline))
            elif item.pi is None and item.selection == _UNIFORM:
                pairs.append((1.0, item.llm, offline))  # an older consumer's baseline: uniform, weight 1
            else:
                excluded += 1
                continue
            llm_n += 1
            any_llm = True
        n_c, n_r = len(in_c), len(in_r)
        n = n_c + n_r
        if n == 0:
            return None
        window_pairs = len(pairs)
        # The route's recent pairs, this window's among them (a window's own pairs always fit the memory).
        stats = self._memory_stats() or (_pair_stats(pairs) if pairs else None)
        tuning, correction, correction_var = 1.0, 0.0, 0.0
        if stats is not None:
            tuning, correction, m = stats.tuning, stats.correction, stats.count
            s2 = (m * stats.raw_var + _PRIOR_PAIRS * _PRIOR_VAR) / (m + _PRIOR_PAIRS)
            # Sampling without replacement from this window's R, unless earlier pairs joined them.
            fpc = (max(0.0, 1.0 - m / n_r) if n_r else 0.0) if m == window_pairs else 1.0
            correction_var = (n_r / n) ** 2 * s2 / stats.effective * fpc
        # Not clipped to 0..1: with few pairs the correction can overshoot, and clipping would bias it.
        value = (sum(in_c) + tuning * sum(in_r) + n_r * correction) / n
        paired = stats is not None
        used_pairs = 0 if stats is None else stats.count
        calibrated = (any_llm or paired) and (n_r == 0 or paired or offline_n == 0)
        if n < 2:
            return Estimate(
                value,
                0.0,
                1.0,
                n,
                offline_n,
                llm_n,
                calibrated,
                confidence,
                excluded,
                unpaired,
                self.signal,
                used_pairs,
            )
        llm_var = None if stats is None else stats.llm_var
        var = _spread(in_c, in_r, llm_var, tuning * sum(in_r) / n_r + correction if n_r else 0.0) / n
        var += correction_var
        half = NormalDist().inv_cdf(confidence) * math.sqrt(var)
        return Estimate(
            value, min(1.0, max(0.0, value - half)), max(0.0, min(1.0, value + half)),
            n, offline_n, llm_n, calibrated, confidence, excluded, unpaired, self.signal, used_pairs,
        )  # fmt: skip

    def agreement(self, threshold: float) -> Agreement:
        both = [
            (item.primary if item.primary is not None else item.offline_hint, item.llm)
            for item in self._items.values()
            if item.llm is not None and item.selection == _UNIFORM and not item.primary_llm
        ]
        pairs = [(o, y) for o, y in both if o is not None and y is not None]
        if not pairs:
            return Agreement(0, None, None, None, 0)
        same = sum((o >= threshold) == (y >= threshold) for o, y in pairs)
        failures = [(o, y) for o, y in pairs if y < threshold]
        caught = sum(o < threshold for o, _ in failures)
        return Agreement(
            pairs=len(pairs),
            agreement=same / len(pairs),
            mean_difference=sum(y - o for o, y in pairs) / len(pairs),
            recall=caught / len(failures) if failures else None,
            llm_failures=len(failures),
        )
