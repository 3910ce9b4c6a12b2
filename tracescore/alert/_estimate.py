"""One rolling estimate per (service, route, metric) from both judges, never counting an interaction twice.

The window holds interactions, keyed by (trace id, span id): an interaction's offline record and its LLM
record meet in one entry, and a later record of the same tier replaces the earlier one (a higher `revision`
wins; a lower one read late is ignored), so a re-scored trace is counted once, with its newest scores.

The estimate (prediction-powered difference estimator, weighted by inclusion probability π):

* stratum C: interactions the LLM judge scored with π = 1 (cascade escalations): the LLM score replaces
  the offline one;
* stratum R: the rest, scored offline; the LLM judge saw a uniform share of them (the baseline, π < 1).
  Their mean offline score is corrected by the weighted mean difference (LLM - offline) on those pairs:

      estimate = (1/N) [ Σ_C y_llm + Σ_R offline + N_R · Σ_pairs w (y_llm - offline) / Σ_pairs w ],  w = 1/π

      variance ≈ s²(best score per interaction) / N + (N_R/N)² s²_d / m (1 - m/N_R)

  with s²_d shrunk towards a prior for few pairs (`_PRIOR_VAR`, `_PRIOR_PAIRS`). With no LLM scores (or no
  pairs in R), R is its plain offline mean and the estimate is flagged uncalibrated.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime
from statistics import NormalDist

from tracescore.emit import EvaluationRecord

__all__ = ["Agreement", "Estimate", "EstimateWindow"]

# Prior for the variance of (LLM - offline) on few pairs: a small sample of pairs that happen to agree must
# not make the interval vanish. Worth `_PRIOR_PAIRS` pairs; not fitted on data.
_PRIOR_VAR = 0.04
_PRIOR_PAIRS = 2
_UNIFORM = "baseline"  # the selection the policy draws uniformly on the trace id


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

    def describe(self) -> str:
        tag = "" if self.calibrated else ", uncalibrated: offline judge only"
        return (
            f"{self.value:.2f} [{self.lower:.2f}, {self.upper:.2f}] from {self.offline_n} offline + "
            f"{self.llm_n} LLM scores{tag}"
        )


@dataclass(frozen=True, slots=True)
class Agreement:
    """The two judges on the baseline interactions (both scored them, uniformly chosen)."""

    pairs: int
    agreement: float | None  # share on the same side of the label threshold
    mean_difference: float | None  # mean (LLM - offline)
    recall: float | None  # share of LLM-judged failures the offline judge also scored below threshold
    llm_failures: int


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


def _revision(record: EvaluationRecord) -> int:
    return int(getattr(record, "revision", 0) or 0)


class EstimateWindow:
    """The newest `maxlen` interactions of one route and metric, in time order."""

    def __init__(self, maxlen: int) -> None:
        self.maxlen = maxlen
        self._items: dict[tuple[str, str], _Interaction] = {}
        self._order: list[tuple[datetime, tuple[str, str]]] = []

    def __len__(self) -> int:
        return len(self._items)

    def add(self, record: EvaluationRecord) -> None:
        if record.score is None:
            return  # a failed evaluation is judge health, not a score
        key = (record.trace_id, record.span_id)
        item = self._items.get(key)
        if item is None:
            if len(self._items) >= self.maxlen and self._order and record.timestamp < self._order[0][0]:
                return  # older than every interaction of a full window: it has no place in it
            item = self._items[key] = _Interaction(at=record.timestamp)
            bisect.insort(self._order, (item.at, key))
        rev = _revision(record)
        if record.selection is None and record.inclusion_probability is None:
            if rev >= item.primary_rev:
                item.primary, item.primary_rev = record.score, rev
                item.primary_llm = record.annotator_kind == "LLM"
        elif rev >= item.llm_rev:
            item.llm, item.llm_rev = record.score, rev
            item.selection, item.pi = record.selection, record.inclusion_probability
            item.offline_hint = record.offline_score
        while len(self._items) > self.maxlen:
            _, oldest = self._order.pop(0)
            del self._items[oldest]

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
        pairs: list[tuple[float, float]] = []  # (w, y_llm - offline) in R
        offline_n = llm_n = excluded = 0
        any_llm = False
        for item in self._items.values():
            offline = item.primary if item.primary is not None else item.offline_hint
            if item.llm is not None and item.pi is not None and item.pi >= 1.0:
                in_c.append(item.llm)
                llm_n += 1
                any_llm = True
                continue
            if offline is None:
                continue  # an LLM score of the sample without the offline score to pair it with
            in_r.append(offline)
            if item.primary_llm:
                llm_n += 1
                any_llm = True
            else:
                offline_n += 1
            if item.llm is None:
                continue
            if item.pi is not None and item.pi > 0:
                pairs.append((1.0 / item.pi, item.llm - offline))
            elif item.pi is None and item.selection == _UNIFORM:
                pairs.append((1.0, item.llm - offline))  # an older consumer's baseline: uniform, weight 1
            else:
                excluded += 1
                continue
            llm_n += 1
            any_llm = True
        n_c, n_r = len(in_c), len(in_r)
        n = n_c + n_r
        if n == 0:
            return None
        correction, correction_var = 0.0, 0.0
        if pairs:
            total_w = sum(w for w, _ in pairs)
            correction = sum(w * d for w, d in pairs) / total_w
            m = len(pairs)
            raw = sum(w * (d - correction) ** 2 for w, d in pairs) / total_w * (m / (m - 1) if m > 1 else 0.0)
            s2 = (m * raw + _PRIOR_PAIRS * _PRIOR_VAR) / (m + _PRIOR_PAIRS)
            effective = total_w**2 / sum(w * w for w, _ in pairs)  # Kish: unequal weights count for less
            fpc = max(0.0, 1.0 - m / n_r) if n_r else 0.0
            correction_var = (n_r / n) ** 2 * s2 / effective * fpc
        value = min(1.0, max(0.0, (sum(in_c) + sum(in_r) + n_r * correction) / n))
        calibrated = any_llm and (n_r == 0 or bool(pairs) or offline_n == 0)
        if n < 2:
            return Estimate(value, 0.0, 1.0, n, offline_n, llm_n, calibrated, confidence, excluded)
        spread = [*in_c, *(r + correction for r in in_r)]
        mean = sum(spread) / n
        var = sum((s - mean) ** 2 for s in spread) / (n - 1) / n + correction_var
        half = NormalDist().inv_cdf(confidence) * math.sqrt(var)
        return Estimate(
            value, max(0.0, value - half), min(1.0, value + half),
            n, offline_n, llm_n, calibrated, confidence, excluded,
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
