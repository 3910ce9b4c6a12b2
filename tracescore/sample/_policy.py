"""The suspicion-first cascade: which interactions are scored, and which of those the LLM judge sees.

Two steps for the caller:

1. `admit(interaction)` before any scoring: filters, rates per service/route/metric, offline CPU thinning
   and the evaluations-per-minute limit decide whether (and for which metrics) it is scored offline.
2. `escalate(interaction, offline_results)` after the offline judge: the most suspicious answers the
   budget allows (cascade: ranked by P(hallucinated) against the running quantile of recent scores) and a
   uniform baseline share go to the LLM judge while the token budget lasts; `charge` reports what each
   LLM evaluation really cost, `learn` hands back the LLM verdict of a baseline interaction, and `judged`
   every LLM verdict: where targeting shows no lift, its budget goes to uniform draws (sample/_lift.py).

Filters, rates and the baseline depend only on the trace id (the baseline: on the conversation id when the
interaction has one, so a conversation is drawn whole) and the span, so every instance and every replay
agrees; thinning, the rate limit and the budget depend on load by nature (thinning is still uniform, by a
trace-id hash against a load-dependent share). Every skip is counted by reason in `skips`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

from tracescore.model import Interaction, MetricResult
from tracescore.sample._admission import RunningQuantile
from tracescore.sample._calibration import COLD_START
from tracescore.sample._config import SamplingConfig
from tracescore.sample._hashing import keep, position, within
from tracescore.sample._learning import SuspicionModels
from tracescore.sample._lift import Lift, LiftReading
from tracescore.sample._limits import ArrivalMeter, TokenBucket, TokenBudget
from tracescore.sample._suspicion import suspicion

__all__ = ["CascadePolicy", "Decision", "Escalation", "SamplingPolicy", "Selection", "SkipReason"]

_RATES_CACHE = 4096  # (service, route) pairs remembered; routes come from traffic, so the cache is bounded
_COST_WEIGHT = 0.1  # weight of the newest offline cost in its running mean
_PACE_HORIZON_S = 300.0  # arrivals averaged over this long to pace the budget (seconds are too noisy)
_PACE_MARGIN = 1.1  # admit a little ahead of pace: the hard limit stops overspend, lag would waste budget


class SkipReason(StrEnum):
    FILTER = "filter"  # an attribute filter excluded it
    RATE = "rate"  # outside the configured share for its service/route/metrics
    THINNED = "thinned"  # the stream outran the offline judge's CPU share
    RATE_LIMIT = "rate_limit"  # evaluations per minute reached
    BUDGET = "budget"  # would have gone to the LLM judge, but its token budget is spent


class Selection(StrEnum):
    CASCADE = "cascade"  # among the most suspicious the budget allows: a biased, targeted sample
    BASELINE = "baseline"  # uniform on the conversation (else trace) id: unbiased, for rolling estimates
    # Uniform on the same id, on the cascade's budget where targeting shows no lift (sample/_lift.py).
    UNIFORM = "uniform"


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether to score an interaction, and with which metrics (a subset of the policy's, in its order)."""

    metrics: tuple[str, ...]
    skip: SkipReason | None = None

    @property
    def sampled(self) -> bool:
        return self.skip is None


@dataclass(frozen=True, slots=True)
class Escalation:
    """Whether the LLM judge scores this interaction too, and why.

    `selection` is how it was chosen (also set when the budget stopped it: what it would have been); write
    it into the LLM judge's records. `reserved_tokens` must be handed back through `charge`.
    `suspicion_score` is P(hallucinated) from the offline result (None: nothing to rank), `suspicion` why.
    `inclusion_probability` is the chance the policy had of sending this interaction to the LLM judge
    (baseline, uniform draws and cascade together); None when it did not go. `targeted_share` is the split
    in force for its route and answer shape (the share of the cascade's budget that targets; the rest draws
    uniformly); `cascade_pick`, whether the cascade fully targeting would have sent it (lift evidence).
    """

    to_llm: bool
    selection: Selection | None = None
    skip: SkipReason | None = None
    suspicion: str | None = None
    reserved_tokens: int = 0
    inclusion_probability: float | None = None
    suspicion_score: float | None = None
    targeted_share: float | None = None
    cascade_pick: bool = False

    @property
    def reason(self) -> str:
        """`cascade`, `baseline`, `uniform`, `budget`, or `offline_only` (nothing suspicious, not drawn)."""
        if self.skip is not None:
            return self.skip.value
        return self.selection.value if self.selection is not None else "offline_only"


@runtime_checkable
class SamplingPolicy(Protocol):
    def admit(self, interaction: Interaction) -> Decision: ...

    def escalate(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> Escalation: ...

    def charge(self, tokens: int, *, reserved: int = 0) -> None: ...


class CascadePolicy:
    """The configured policy for one consumer process (budgets and limits are per process).

    Not thread-safe: call it from the consumer's event loop. `metrics` are the names of the metrics the
    caller runs; `clock` returns seconds since the epoch (budget windows are UTC hours and days).
    """

    def __init__(
        self,
        config: SamplingConfig | None = None,
        *,
        metrics: Sequence[str] = ("faithfulness",),
        clock: Callable[[], float] = time.time,
        cold_start: Mapping[str, float] = COLD_START,
    ) -> None:
        self.config = config or SamplingConfig()
        self.metrics = tuple(metrics)
        self.skips: Counter[str] = Counter()
        self.selections: Counter[str] = Counter()
        self._rates: dict[tuple[str, str], tuple[float, ...]] = {}
        limit = self.config.rate_limit
        self._bucket = (
            None if limit.per_minute is None else TokenBucket(limit.per_minute / 60.0, limit.capacity, clock)
        )
        budget = self.config.llm_budget
        self._budget = TokenBudget(budget.tokens_per_hour, budget.tokens_per_day, clock)
        self._arrivals = ArrivalMeter(clock)  # candidates offered to admit, for thinning
        self._scored = ArrivalMeter(clock)  # candidates offered to escalate, for the baseline's budget hold
        self._paced = ArrivalMeter(clock, _PACE_HORIZON_S, warm_up=True)  # the same, to pace the cascade
        self._recent = RunningQuantile(self.config.cascade.window)
        self.models = SuspicionModels(self.config.cascade.learning, cold_start)
        self.lift = Lift(self.config.cascade.lift)
        self._offline_cost_s: float | None = None
        self._charged = (0, 0)  # (escalations charged, tokens): their mean becomes the reservation

    # --- step 1 ---------------------------------------------------------------------------------------

    def admit(self, interaction: Interaction) -> Decision:
        span = interaction.span
        filters = self.config.filters
        if (filters.include or filters.exclude) and (
            not all(f.matches(span.attributes) for f in filters.include)
            or any(f.matches(span.attributes) for f in filters.exclude)
        ):
            return self._skipped(SkipReason.FILTER)
        rates = self._rates_for(span.service_name, interaction.route)
        if max(rates, default=0.0) <= 0.0:
            return self._skipped(SkipReason.RATE)  # nothing to keep: no hash needed to say so
        # One hash for every metric: a trace kept for a 10% metric is also kept for a 50% one.
        at = position(span.trace_id, "rate")
        metrics = tuple(m for m, rate in zip(self.metrics, rates, strict=True) if within(at, rate))
        if not metrics:
            return self._skipped(SkipReason.RATE)
        if not keep(span.trace_id, "thin", self.offline_share()):
            return self._skipped(SkipReason.THINNED)
        if self._bucket is not None and not self._bucket.take():
            return self._skipped(SkipReason.RATE_LIMIT)
        return Decision(metrics=metrics)

    def offline_share(self) -> float:
        """The share of candidates the offline judge keeps up with (1.0 unless it is falling behind).

        Counts one arrival: call once per candidate (admit does)."""
        arrivals_per_s = self._arrivals.tick()
        cpu_share = self.config.offline.cpu_share
        if cpu_share is None or not self._offline_cost_s:
            return 1.0
        return min(1.0, cpu_share / self._offline_cost_s / arrivals_per_s)

    def observe_offline(self, seconds: float) -> None:
        """Report how long one interaction's offline scoring took (CPU or wall seconds); thinning uses the
        running mean to know how many candidates a second the offline CPU share can score."""
        if seconds <= 0:
            return
        mean = self._offline_cost_s
        self._offline_cost_s = seconds if mean is None else mean + _COST_WEIGHT * (seconds - mean)

    # --- step 2 ---------------------------------------------------------------------------------------

    def escalate(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> Escalation:
        cascade = self.config.cascade
        if not cascade.enabled:
            return Escalation(to_llm=False)
        trace_id = interaction.span.trace_id
        route = _route_key(interaction)
        suspect = suspicion(offline_results, cascade, self.models, route)
        candidates_per_s = self._scored.tick()
        arrivals_per_s = self._paced.tick()
        estimate = self._token_estimate()
        admission = 0.0  # the chance the cascade, fully targeting, admits it (1 above the quantile)
        ranked = suspect is not None and (
            suspect.features is None or suspect.probability > cascade.min_probability
        )
        scored = suspect is not None and suspect.features is not None  # an offline error has no score
        if suspect is not None and ranked:
            share = 1.0 if not scored else self._cascade_share(estimate, arrivals_per_s)
            admission = self._recent.admission(suspect.probability, share)
        if suspect is not None and scored:
            self._recent.add(suspect.probability, (route, suspect.features))
        why = None if suspect is None else suspect.reason
        score = suspect.probability if suspect is not None and scored else None
        # The split (sample/_lift.py): `targeted_share` of the cascade's admissions go, and its other picks'
        # worth of budget is drawn uniformly. An offline error goes whatever the split (nothing to target).
        key = self.lift.key(interaction)
        targeted_share, uniform_rate = self.lift.split(key, admission if scored else 0.0)
        targeted = admission * targeted_share if scored else admission
        drawn = min(1.0, cascade.baseline_rate + uniform_rate)  # the baseline, then the uniform draws: nested
        # The baseline (and the uniform draws nested on it) draw whole conversations: every turn of a drawn
        # conversation is judged, and each turn's chance of being drawn is still the rate (an id's hash is
        # uniform), so the inclusion probabilities below stay exact.
        at = position(interaction.session_id or trace_id, "baseline")
        tie = position(trace_id, "tie") if admission > 0.0 else None
        pick = scored and tie is not None and within(tie, admission)  # what full targeting would send
        if within(at, cascade.baseline_rate):
            selection: Selection | None = Selection.BASELINE
        elif within(at, drawn):
            selection = Selection.UNIFORM
        elif tie is not None and within(tie, targeted):
            selection = Selection.CASCADE
        elif not ranked:
            return Escalation(
                to_llm=False, suspicion=why, suspicion_score=score, targeted_share=targeted_share
            )
        else:
            selection = None  # above the floor but below what the budget allows: a budget skip
        # The cascade leaves the baseline its expected share of the rest of the window, so a run of suspicious
        # answers cannot starve the unbiased sample (and the estimates built on it) until the window ends.
        hold = cascade.baseline_rate * candidates_per_s * estimate
        if selection is None or not self._budget.available(
            estimate, 0.0 if selection is Selection.BASELINE else hold
        ):
            self.skips[SkipReason.BUDGET] += 1
            return Escalation(
                to_llm=False,
                selection=selection or Selection.CASCADE,
                skip=SkipReason.BUDGET,
                suspicion=why,
                suspicion_score=score,
                targeted_share=targeted_share,
            )
        # Had the baseline not drawn it, could the cascade or a uniform draw have sent it now? While the
        # budget stops them they could not: its chance is the baseline's alone, so the estimate corrects it
        # with the other budget-stopped answers instead of counting it as likelier than it was.
        if (
            selection is Selection.BASELINE
            and (targeted > 0.0 or drawn > cascade.baseline_rate)
            and not self._budget.available(estimate, hold)
        ):
            targeted, drawn = 0.0, cascade.baseline_rate
        self._budget.reserved += estimate
        self.selections[selection] += 1
        return Escalation(
            to_llm=True,
            selection=selection,
            suspicion=why,
            reserved_tokens=estimate,
            inclusion_probability=1.0 - (1.0 - drawn) * (1.0 - targeted),
            suspicion_score=score,
            targeted_share=targeted_share,
            cascade_pick=pick,
        )

    def judged(self, interaction: Interaction, escalation: Escalation, failed: bool) -> LiftReading | None:
        """Hand back the LLM judge's verdict (`failed`: the records' label rule says the answer is bad) on an
        interaction this policy escalated: evidence of the cascade's lift for its route and answer shape
        (sample/_lift.py). Returns the key's lift and split after it (None: not evidence, or lift off)."""
        if not escalation.to_llm:
            return None
        uniform = escalation.selection in (Selection.BASELINE, Selection.UNIFORM)
        key = self.lift.key(interaction)
        return self.lift.judged(key, targeted=escalation.cascade_pick, uniform=uniform, failed=failed)

    def lift_readings(self) -> list[LiftReading]:
        """Every tracked route and answer shape's lift and split, for status lines and metrics."""
        return self.lift.readings()

    def learn(
        self, interaction: Interaction, offline_results: Sequence[MetricResult], hallucinated: bool
    ) -> bool:
        """Teach the suspicion score one LLM verdict (`hallucinated`) on a baseline interaction, whose
        offline results are passed again (a verdict may arrive long after; nothing is kept meanwhile).
        Returns whether it was learned (learning off, an offline error or a missing metric: not)."""
        if not self.config.cascade.learning.enabled:
            return False
        suspect = suspicion(offline_results, self.config.cascade, self.models)
        if suspect is None or suspect.features is None:
            return False
        self.models.learn(_route_key(interaction), suspect.features, hallucinated)
        self._recent.rescore(lambda source: self.models.probability(*source))  # type: ignore[misc]
        return True

    def save(self) -> None:
        """Persist the learned suspicion models (when `cascade.learning.state_path` is set)."""
        self.models.save()

    def _cascade_share(self, estimate: int, arrivals_per_s: float) -> float:
        """The share of scored interactions the cascade may send: what the budget's pace allows at the
        current arrival rate, less the baseline's share (capped by `cascade.share`)."""
        cascade = self.config.cascade
        pace = self._budget.pace(estimate)
        share = cascade.share if cascade.share is not None else 1.0
        if pace is not None:
            share = min(share, _PACE_MARGIN * pace / max(arrivals_per_s, 1e-9) - cascade.baseline_rate)
        return max(0.0, share)

    def charge(self, tokens: int, *, reserved: int = 0) -> None:
        """Account `tokens` the LLM judge really used for one escalation (also when it failed), releasing
        the `reserved` tokens its Escalation carried."""
        self._budget.reserved = max(0, self._budget.reserved - reserved)
        self._budget.spend(max(0, tokens))
        count, total = self._charged
        self._charged = (count + 1, total + max(0, tokens))

    def budget_used(self) -> dict[str, int]:
        """LLM tokens spent in the current UTC hour and day, for status lines."""
        return self._budget.used()

    # --- helpers -------------------------------------------------------------------------------------

    def _skipped(self, reason: SkipReason) -> Decision:
        self.skips[reason] += 1
        return Decision(metrics=(), skip=reason)

    def _rates_for(self, service: str, route: str) -> tuple[float, ...]:
        key = (service, route)
        rates = self._rates.get(key)
        if rates is None:
            if len(self._rates) >= _RATES_CACHE:
                self._rates.clear()
            rates = self._rates[key] = tuple(self.config.rate_for(service, route, m) for m in self.metrics)
        return rates

    def _token_estimate(self) -> int:
        count, total = self._charged
        if count and total:
            return max(1, round(total / count))
        return self.config.llm_budget.estimated_tokens_per_evaluation


def _route_key(interaction: Interaction) -> str:
    return f"{interaction.span.service_name} {interaction.route}"
