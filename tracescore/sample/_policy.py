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

from tracescore.model import FAITHFULNESS, DecodedSpan, Interaction, MetricResult, Selection
from tracescore.sample._admission import RunningQuantile
from tracescore.sample._calibration import COLD_START
from tracescore.sample._config import SamplingConfig
from tracescore.sample._hashing import keep, position, within
from tracescore.sample._learning import SuspicionModels
from tracescore.sample._lift import Lift, LiftReading
from tracescore.sample._limits import ArrivalMeter, TokenBucket, TokenBudget
from tracescore.sample._protocol import Decision, Escalation, SamplingPolicy, SkipReason
from tracescore.sample._suspicion import Suspicion, suspicion

__all__ = ["CascadePolicy"]

_RATES_CACHE = 4096  # (service, route) pairs remembered; routes come from traffic, so the cache is bounded
_COST_WEIGHT = 0.1  # weight of the newest offline cost in its running mean
_PACE_HORIZON_S = 300.0  # arrivals averaged over this long to pace the budget (seconds are too noisy)
_PACE_MARGIN = 1.1  # admit a little ahead of pace: the hard limit stops overspend, lag would waste budget
# Decisions are immutable: one per reason, not one per interaction turned away (most are, at low rates).
_SKIPS = {reason: Decision(metrics=(), skip=reason) for reason in SkipReason}
_RATE = SkipReason.RATE
_RATE_SKIP = _SKIPS[_RATE]


class CascadePolicy(SamplingPolicy):
    """The configured policy for one consumer process (budgets and limits are per process).

    Not thread-safe: call it from the consumer's event loop. `metrics` are the names of the metrics the
    caller runs; `clock` returns seconds since the epoch (budget windows are UTC hours and days).
    """

    def __init__(
        self,
        config: SamplingConfig | None = None,
        *,
        metrics: Sequence[str] = (FAITHFULNESS,),
        clock: Callable[[], float] = time.time,
        cold_start: Mapping[str, float] = COLD_START,
    ) -> None:
        self.config = config or SamplingConfig()
        self.metrics = tuple(metrics)
        # Interactions turned away, by reason (`skips`); the rate's, most of them at low rates, an int:
        # a Counter's item write is a Python-level call (its __delitem__ is Python), on every interaction.
        self._skips: Counter[str] = Counter()
        self._rate_skips = 0
        # The config is frozen: its filters, read for every interaction, are read here once.
        filters = self.config.filters
        self._filters = filters if filters.include or filters.exclude else None
        self.selections: Counter[str] = Counter()
        self._rates: dict[tuple[str, str], tuple[float, ...]] = {}
        self._top_rates: dict[tuple[str, str], float] = {}  # the highest of each cached entry of _rates
        limit = self.config.rate_limit
        self._bucket = (
            None if limit.per_minute is None else TokenBucket(limit.per_minute / 60.0, limit.capacity, clock)
        )
        budget = self.config.llm_budget
        self._budget = TokenBudget(budget.tokens_per_hour, budget.tokens_per_day, clock, budget.state_path)
        self._arrivals = ArrivalMeter(clock)  # candidates offered to admit, for thinning
        self._scored = ArrivalMeter(clock)  # candidates offered to escalate, for the baseline's budget hold
        self._paced = ArrivalMeter(clock, _PACE_HORIZON_S, warm_up=True)  # the same, to pace the cascade
        self._recent = RunningQuantile(self.config.cascade.window)
        self.models = SuspicionModels(self.config.cascade.learning, cold_start)
        self.lift = Lift(self.config.cascade.lift)
        self._offline_cost_s: float | None = None
        self._charged = (0, 0)  # (escalations charged, tokens): their mean becomes the reservation

    # --- step 1 ---------------------------------------------------------------------------------------

    def screen(self, span: DecodedSpan, route: str) -> Decision | None:
        """The filters and rates: they read the interaction's span and route only."""
        filters = self._filters
        if filters is not None and (
            not all(f.matches(span.attributes) for f in filters.include)
            or any(f.matches(span.attributes) for f in filters.exclude)
        ):
            return self._skipped(SkipReason.FILTER)
        # Every interaction of the unsampled path comes here: the highest rate is cached with the rates.
        top = self._top_rates.get((span.service_name, route))
        if top is None:
            rates = self._rates_for(span.service_name, route)
            top = self._top_rates[span.service_name, route] = max(rates, default=0.0)
        if top <= 0.0 or (top < 1.0 and not within(position(span.trace_id, "rate"), top)):
            # Nothing to keep (no hash needed to say so), or outside the share. One hash for every metric:
            # a trace kept for a 10% metric is also kept for a 50% one.
            self._rate_skips += 1
            return _RATE_SKIP
        return None

    @property
    def skips(self) -> Counter[str]:
        """Interactions turned away so far, by reason (`SkipReason`)."""
        skips = Counter(self._skips)
        if self._rate_skips:
            skips[_RATE] += self._rate_skips
        return skips

    def admit(self, interaction: Interaction) -> Decision:
        span = interaction.span
        screened = self.screen(span, interaction.route)
        if screened is not None:
            return screened
        rates = self._rates_for(span.service_name, interaction.route)
        at = position(span.trace_id, "rate")
        metrics = tuple(m for m, rate in zip(self.metrics, rates, strict=True) if within(at, rate))
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
        """The steps, in order: suspicion, admission, split, draw, budget, inclusion probability."""
        cascade = self.config.cascade
        if not cascade.enabled:
            return Escalation(to_llm=False)
        candidates_per_s = self._scored.tick()
        arrivals_per_s = self._paced.tick()
        estimate = self._token_estimate()
        suspect = self._suspicion(interaction, offline_results)
        admission = self._admission(suspect, estimate, arrivals_per_s)
        split = self._split(interaction, suspect, admission)
        selection, pick = self._draw(interaction, suspect, admission, split)
        if selection is None and not suspect.ranked:
            return Escalation(
                to_llm=False,
                suspicion=suspect.reason,
                suspicion_score=suspect.score,
                targeted_share=split.share,
            )
        hold = cascade.baseline_rate * candidates_per_s * estimate
        # Undrawn, an answer is `budget` too when the budget has no room (a spent budget paces the cascade's
        # share to 0: the budget's doing), else `unselected`; with no budget set, never `budget` (a budget
        # owner reading it raised a budget that was not the cause).
        room = self._budget_allows(selection or Selection.CASCADE, estimate, hold)
        if selection is None or not room:
            skip = SkipReason.UNSELECTED if room else SkipReason.BUDGET
            self._skips[skip] += 1
            return Escalation(
                to_llm=False,
                selection=selection or Selection.CASCADE,  # above the floor, below what the budget allows
                skip=skip,
                suspicion=suspect.reason,
                suspicion_score=suspect.score,
                targeted_share=split.share,
            )
        probability = self._inclusion_probability(selection, split, estimate, hold)
        self._budget.reserved += estimate
        self.selections[selection] += 1
        return Escalation(
            to_llm=True,
            selection=selection,
            suspicion=suspect.reason,
            reserved_tokens=estimate,
            inclusion_probability=probability,
            suspicion_score=suspect.score,
            targeted_share=split.share,
            cascade_pick=pick,
        )

    def _suspicion(self, interaction: Interaction, offline_results: Sequence[MetricResult]) -> _Suspect:
        """P(hallucinated) from the offline result, and whether it ranks (above the floor, or an error)."""
        cascade = self.config.cascade
        route = _route_key(interaction)
        found = suspicion(offline_results, cascade, self.models, route)
        ranked = found is not None and (found.features is None or found.probability > cascade.min_probability)
        return _Suspect(route, found, ranked, scored=found is not None and found.features is not None)

    def _admission(self, suspect: _Suspect, estimate: int, arrivals_per_s: float) -> float:
        """The chance the cascade, fully targeting, admits it: 1 above the running quantile of recent scores
        that the budget's pace allows (an offline error, ranked without a score: 1), 0 below the floor."""
        admission = 0.0
        if suspect.ranked and suspect.found is not None:
            share = self._cascade_share(estimate, arrivals_per_s) if suspect.scored else 1.0
            admission = self._recent.admission(suspect.found.probability, share)
        if suspect.scored and suspect.found is not None:
            self._recent.add(suspect.found.probability, (suspect.route, suspect.found.features))
        return admission

    def _split(self, interaction: Interaction, suspect: _Suspect, admission: float) -> _Split:
        """The split (sample/_lift.py): `share` of the cascade's admissions go, and its other picks' worth of
        budget is drawn uniformly. An offline error goes whatever the split (nothing to target)."""
        cascade = self.config.cascade
        share, uniform_rate = self.lift.split(
            self.lift.key(interaction), admission if suspect.scored else 0.0
        )
        return _Split(
            share=share,
            targeted=admission * share if suspect.scored else admission,
            # The baseline, then the uniform draws: nested on one hash.
            drawn=min(1.0, cascade.baseline_rate + uniform_rate),
        )

    def _draw(
        self, interaction: Interaction, suspect: _Suspect, admission: float, split: _Split
    ) -> tuple[Selection | None, bool]:
        """Which selection sends it, if any, and whether full targeting would have (lift evidence).

        The baseline (and the uniform draws nested on it) draw whole conversations: every turn of a drawn
        conversation is judged, and each turn's chance of being drawn is still the rate (an id's hash is
        uniform), so the inclusion probabilities stay exact."""
        # "baseline": the hash salt of the draw (a fixed string: another would redraw every conversation).
        at = position(interaction.session_id or interaction.span.trace_id, "baseline")
        tie = position(interaction.span.trace_id, "tie") if admission > 0.0 else None
        pick = suspect.scored and tie is not None and within(tie, admission)
        if within(at, self.config.cascade.baseline_rate):
            return Selection.BASELINE, pick
        if within(at, split.drawn):
            return Selection.UNIFORM, pick
        if tie is not None and within(tie, split.targeted):
            return Selection.CASCADE, pick
        return None, pick

    def _budget_allows(self, selection: Selection, estimate: int, hold: float) -> bool:
        """Whether the token budget has room. The cascade and the uniform draws leave the baseline `hold`, its
        expected share of the rest of the window, so a run of suspicious answers cannot starve the unbiased
        sample (and the estimates built on it) until the window ends."""
        return self._budget.available(estimate, 0.0 if selection is Selection.BASELINE else hold)

    def _inclusion_probability(
        self, selection: Selection, split: _Split, estimate: int, hold: float
    ) -> float:
        """The chance it had of going: drawn, else targeted (independent hashes).

        Had the baseline not drawn it, could the cascade or a uniform draw have sent it now? While the budget
        stops them they could not: its chance is the baseline's alone, so the estimate corrects it with the
        other budget-stopped answers instead of counting it as likelier than it was."""
        baseline_rate = self.config.cascade.baseline_rate
        targeted, drawn = split.targeted, split.drawn
        if (
            selection is Selection.BASELINE
            and (targeted > 0.0 or drawn > baseline_rate)
            and not self._budget.available(estimate, hold)
        ):
            targeted, drawn = 0.0, baseline_rate
        return 1.0 - (1.0 - drawn) * (1.0 - targeted)

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

    @property
    def label_metric(self) -> str:
        return self.config.cascade.metric

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
        """Persist the learned suspicion models (when `cascade.learning.state_path` is set) and the LLM
        budget's spend (when `llm_budget.state_path` is)."""
        self.models.save()
        self._budget.save()

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
        self._skips[reason] += 1
        return _SKIPS[reason]

    def _rates_for(self, service: str, route: str) -> tuple[float, ...]:
        key = (service, route)
        rates = self._rates.get(key)
        if rates is None:
            if len(self._rates) >= _RATES_CACHE:
                self._rates.clear()
                self._top_rates.clear()
            rates = self._rates[key] = tuple(self.config.rate_for(service, route, m) for m in self.metrics)
        return rates

    def _token_estimate(self) -> int:
        count, total = self._charged
        if count and total:
            return max(1, round(total / count))
        return self.config.llm_budget.estimated_tokens_per_evaluation


def _route_key(interaction: Interaction) -> str:
    return f"{interaction.span.service_name} {interaction.route}"


@dataclass(frozen=True, slots=True)
class _Suspect:
    """Step one: the offline result's suspicion, and what the later steps may do with it."""

    route: str
    found: Suspicion | None  # None: nothing to suspect (not scored, not applicable, an error not escalated)
    ranked: bool  # a candidate for the cascade: a score above the floor, or an offline error
    scored: bool  # a score to rank by and learn from (an offline error has none)

    @property
    def reason(self) -> str | None:
        return None if self.found is None else self.found.reason

    @property
    def score(self) -> float | None:
        return self.found.probability if self.found is not None and self.scored else None


@dataclass(frozen=True, slots=True)
class _Split:
    share: float  # the share of the cascade's admissions that targets, for this route and answer shape
    targeted: float  # the chance the cascade sends it
    drawn: float  # the chance the baseline or a uniform draw sends it
