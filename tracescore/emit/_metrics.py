"""OTel metrics from the consumer: score distributions per service, route, metric, judge tier
(`annotator_kind`) and `selection`, and the counts an operator alerts on (dead letters, skipped spans,
interactions read only in part, judge errors, judge tokens and cost by service, route and selection, the LLM
judge's budget: its spend per window and what it kept from the judge), and the cascade's
lift and split per route and answer shape (`tracescore.cascade.*`).

Two judges' scores never share a series. The additive `tracescore.estimate.sums` let recording rules build
the same estimate `tracescore alert` uses (offline mean corrected by the LLM judge, see alert/_estimate.py);
`tracescore.judge.agreement` counts the baseline pairs by both judges' verdicts.

Instruments come from the Meter passed in, so the process's MeterProvider (OTLP, Prometheus, ...) decides
where they go; with no provider configured they are no-ops.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.resources import SERVICE_NAME

from tracescore import __version__, semconv
from tracescore.model import (
    METRIC_SERIES_LIMIT,
    UNLABELLED_THRESHOLD,
    ConversationRecord,
    EvaluationRecord,
    Selection,
)
from tracescore.sample import LiftReading

__all__ = ["LABEL_THRESHOLD", "SCORE_BUCKETS", "SERIES_LIMIT", "ConversationMetrics", "EvaluationMetrics"]

log = logging.getLogger("tracescore.emit")

# Scores live in 0..1; the SDK's default buckets (0, 5, 10, ... 10000) would put every score in one bucket.
SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# Judge agreement: a score at or above this passes (the label rule's threshold for unlabelled scores).
LABEL_THRESHOLD = UNLABELLED_THRESHOLD


def _series(service: str, route: str, **labels: str) -> dict[str, str]:
    """A series' attributes: the service and route, named as on the spans, then its own `labels`."""
    return {SERVICE_NAME: service, semconv.TRACESCORE_ROUTE: route, **labels}


# The skipped spans' instrumentation scope, under a name of ours: a Prometheus exporter labels every series
# with its own meter's scope as otel_scope_name, and the Collector's drops the whole metric when an attribute
# takes that label too ("duplicate label names"), so `otel.scope.name` here lost every skip count.
SOURCE_SCOPE = "tracescore.scope"


def _source(reason: str, service: str, scope: str) -> dict[str, str]:
    """What was read only in part or not scored: why, and from which service and instrumentation scope (the
    names on the spans; no route: what was not read decides none)."""
    return {"reason": reason, SERVICE_NAME: service, SOURCE_SCOPE: scope}


# Past the series limit (`METRIC_SERIES_LIMIT`, or `--metrics-max-series`) a route first seen was in no
# per-route panel or Prometheus rule, and nothing said so: each per-route instrument says it once.
SERIES_LIMIT = METRIC_SERIES_LIMIT


class _Capped:
    """A per-route instrument (made by `create`) that counts the series it was given, up to the SDK's limit,
    and warns once when one past it goes to the overflow series: many routes, or tenants that come and go."""

    def __init__(self, create: Callable[..., Any], name: str, limit: int, **options: Any) -> None:
        self._instrument, self._name, self._limit = create(name, **options), name, limit
        self._seen: set[frozenset[tuple[str, str]]] | None = set()  # None: the warning was given

    def add(self, value: float, attributes: Mapping[str, str]) -> None:
        self._count(attributes)
        self._instrument.add(value, attributes)

    def record(self, value: float, attributes: Mapping[str, str]) -> None:
        self._count(attributes)
        self._instrument.record(value, attributes)

    def _count(self, attributes: Mapping[str, str]) -> None:
        if self._seen is None:
            return
        self._seen.add(frozenset(attributes.items()))
        if len(self._seen) > self._limit:
            self._seen = None
            log.warning(
                "metric %s: more than %d series (the limit per instrument in a process, "
                "--metrics-max-series): "
                "from now on each new series (a route first seen, or a new metric, judge tier or status of "
                'one) is counted in one series labelled otel_metric_overflow="true", without service or '
                "route, until the process restarts; per-route panels and the Prometheus rules miss those "
                "routes (docs/deploy.md, Many routes)",
                self._name, self._limit,
            )  # fmt: skip


class EvaluationMetrics:
    def __init__(self, meter: Meter | None = None, max_series: int = SERIES_LIMIT) -> None:
        """`max_series`: the provider's limit per instrument (`series_views`), so the warning comes when it
        is passed."""
        meter = meter or metrics.get_meter("tracescore.consumer", __version__)
        self._scores = _Capped(
            meter.create_histogram,
            "tracescore.evaluation.score",
            max_series,
            unit="1",
            description="Metric scores of evaluated RAG spans (0..1).",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self._evaluations = _Capped(
            meter.create_counter,
            "tracescore.evaluations",
            max_series,
            description="Evaluation results, by metric and status (ok, error, ...).",
        )
        # Spend per service and route (who pays) and selection (what for: the cascade's picks, the
        # baseline, uniform draws; none: a judge no policy chose): a budget owner's first question, which a
        # count by type alone could not answer.
        self._tokens = _Capped(
            meter.create_counter,
            "tracescore.judge.tokens",
            max_series,
            unit="{token}",
            description="Model-judge tokens spent, by type (input, output), judge, service, route and "
            "selection (cascade, baseline, uniform; none: a judge no sampling policy chose).",
        )
        # No unit: `_usd` in the name reads the same through a Collector's exporter and our own endpoint.
        self._cost = _Capped(
            meter.create_counter,
            "tracescore.judge.cost_usd",
            max_series,
            description="USD the model judge's calls cost at its configured prices "
            "(TRACESCORE_JUDGE_PROMPT_PRICE_PER_1M, TRACESCORE_JUDGE_COMPLETION_PRICE_PER_1M; unset: "
            "nothing counted), by judge, service, route and selection.",
        )
        self._budget_sources: list[Callable[[], Sequence[tuple[str, int, int]]]] = []
        meter.create_observable_gauge(
            "tracescore.llm_judge.budget.used",
            callbacks=[self._observe_budget_used],
            unit="{token}",
            description="LLM-judge tokens this consumer process spent in the current UTC clock hour and "
            "day (window), against its llm_budget; at 0 after a restart, unless llm_budget.state_path keeps "
            "them.",
        )
        meter.create_observable_gauge(
            "tracescore.llm_judge.budget.limit",
            callbacks=[self._observe_budget_limit],
            unit="{token}",
            description="The llm_budget of this consumer process per window (hour, day): "
            "tokens_per_hour, tokens_per_day.",
        )
        self._skipped = meter.create_counter(
            "tracescore.spans.skipped",
            description="Traces or interactions not scored, by reason, service and instrumentation scope.",
        )
        self._read_partly = meter.create_counter(
            "tracescore.interactions.read_partly",
            description="Interactions scored without part of what they carried, by reason "
            "(session_id_scrubbed: a session id Logfire's scrubbing replaced, so the turn is scored as a "
            "one-turn interaction; span_events_dropped: span events holding messages were lost past the "
            "limits), service and instrumentation scope.",
        )
        self._escalations = meter.create_counter(
            "tracescore.llm_judge.escalations",
            description="Interactions the cascade's offline judge scored, by what followed: cascade, "
            "baseline or uniform (sent to the LLM judge), unselected (above the cascade's floor, outside the "
            "share it sends: the budget's pace, cascade.share or targeting's split), budget (refused: the "
            "token budget had no room, spent or reserved) or offline_only.",
        )
        # Ten series a route with the LLM judge (stratum x term): the first past the limit, at 200 routes.
        self._estimate = _Capped(
            meter.create_counter,
            "tracescore.estimate.sums",
            max_series,
            description="Sums over LLM-judged interactions behind the sampling policy, by stratum (census: "
            "inclusion probability 1; sample: the uniform baseline) and term: weight (Σ 1/π), llm and "
            "offline (Σ score/π), squared_difference (Σ (llm - offline)²/π), pairs (count).",
        )
        self._agreement = _Capped(
            meter.create_counter,
            "tracescore.judge.agreement",
            max_series,
            description="Baseline interactions scored by both judges, by the offline and the LLM verdict "
            "(pass / fail at the label threshold) and whether they agree.",
        )
        self._agreement_scores = _Capped(
            meter.create_counter,
            "tracescore.judge.agreement.scores",
            max_series,
            description="Sum of each judge's scores (tier CODE or LLM) over the baseline pairs.",
        )
        # The cascade's lift per route and answer shape, read from the policy when the metrics are collected
        # (`observe_lift`): always its current state, nothing kept here, and forgotten routes drop out.
        self._lift_sources: list[Callable[[], Sequence[LiftReading]]] = []
        meter.create_observable_gauge(
            "tracescore.cascade.targeted_share_ratio",
            callbacks=[self._observe_targeted_share],
            unit="1",
            description="Per route and answer shape: the share of the cascade's LLM budget that targets "
            "suspicious answers; the rest draws uniformly, because targeting showed no lift.",
        )
        meter.create_observable_gauge(
            "tracescore.cascade.failed_share_ratio",
            callbacks=[self._observe_failed_share],
            unit="1",
            description="Per route and answer shape: the share of the LLM judge's verdicts that failed, by "
            "group (targeted: the cascade's picks; uniform: uniform draws) and bound (value, and the 95% "
            "interval's lower and upper); targeted above uniform is the cascade's lift.",
        )
        meter.create_observable_gauge(
            "tracescore.cascade.lift_labels",
            callbacks=[self._observe_lift_labels],
            description="Per route, answer shape and group: the LLM verdicts the lift is measured on "
            "(older ones fade).",
        )
        # 1 while this process says its broker is unreachable (`tracescore._service.BrokerReach`), else 0:
        # an outage told from a stall by a metric too, not only by a log line.
        self._unreachable: list[Callable[[], bool]] = []
        meter.create_observable_gauge(
            "tracescore.broker.unreachable",
            callbacks=[self._observe_unreachable],
            description="1 while this consumer process finds its Kafka broker unreachable (no group "
            "coordinator answers; the log says since when and what it holds), else 0.",
        )
        self._dead_letters = meter.create_counter(
            "tracescore.messages.dead_lettered", description="Input messages sent to the dead-letter topic."
        )

    def evaluated(self, record: EvaluationRecord) -> None:
        where = _series(record.service_name, record.route, metric=record.metric)
        self._evaluations.add(1, {**where, "status": record.status.value})
        if record.score is not None:
            tier = {"annotator_kind": record.annotator_kind, "selection": record.selection or "none"}
            self._scores.record(record.score, {**where, **tier})
            if record.selection is not None and record.offline_score is not None:
                self._paired(where, record, record.score, record.offline_score)
        spent = {**where, "judge": record.judge, "selection": record.selection or "none"}
        del spent["metric"]  # one call may serve several metrics' records: who and why, not which metric
        if record.usage.prompt_tokens:
            self._tokens.add(record.usage.prompt_tokens, {**spent, "type": "input"})
        if record.usage.completion_tokens:
            self._tokens.add(record.usage.completion_tokens, {**spent, "type": "output"})
        if record.usage.cost_usd:
            self._cost.add(record.usage.cost_usd, spent)

    def _paired(self, where: dict[str, str], record: EvaluationRecord, llm: float, offline: float) -> None:
        pi = record.inclusion_probability
        if pi is None and record.selection == Selection.BASELINE:
            pi = 0.0  # an older consumer's baseline record: uniform, its rate unknown; weight 1
        if pi is not None:
            weight = 1.0 if pi <= 0 or pi >= 1 else 1.0 / pi
            stratum = {**where, "stratum": "census" if pi >= 1 else "sample"}
            for term, value in (
                ("weight", weight), ("llm", weight * llm), ("offline", weight * offline),
                ("squared_difference", weight * (llm - offline) ** 2), ("pairs", 1.0),
            ):  # fmt: skip
                self._estimate.add(value, {**stratum, "term": term})
        if record.selection == Selection.BASELINE:
            verdicts = {
                "offline": "pass" if offline >= LABEL_THRESHOLD else "fail",
                "llm": "pass" if llm >= LABEL_THRESHOLD else "fail",
            }
            agree = "true" if verdicts["offline"] == verdicts["llm"] else "false"
            self._agreement.add(1, {**where, **verdicts, "agree": agree})
            self._agreement_scores.add(offline, {**where, "annotator_kind": "CODE"})
            self._agreement_scores.add(llm, {**where, "annotator_kind": "LLM"})

    def skipped(self, reason: str, service: str = "", scope: str = "", count: int = 1) -> None:
        self._skipped.add(count, _source(reason, service, scope))

    def read_partly(self, reason: str, service: str = "", scope: str = "", count: int = 1) -> None:
        """Interactions scored all the same, without what `reason` names (`ConsumerStats.read_partly`)."""
        self._read_partly.add(count, _source(reason, service, scope))

    def escalation(self, outcome: str, service: str = "") -> None:
        self._escalations.add(1, {"outcome": outcome, SERVICE_NAME: service})

    def observe_lift(self, source: Callable[[], Sequence[LiftReading]]) -> None:
        """Report the cascade's lift and split per route and answer shape, as `source` (the policy's
        `lift_readings`, thread-safe: it is called from the metric reader's thread) gives them."""
        self._lift_sources.append(source)

    def observe_budget(self, used: Callable[[], Mapping[str, int]], limits: Mapping[str, int | None]) -> None:
        """Report the LLM budget's spend per window (`used`: the policy's `budget_used`, read from the metric
        reader's thread) against `limits` (window -> tokens; None: no limit, not reported)."""
        windows = {window: limit for window, limit in limits.items() if limit is not None}
        if windows:
            self._budget_sources.append(
                lambda: [(window, used().get(window, 0), limit) for window, limit in windows.items()]
            )

    def observe_broker(self, unreachable: Callable[[], bool]) -> None:
        """Report `unreachable()` (read on the metric reader's thread) as `tracescore.broker.unreachable`."""
        self._unreachable.append(unreachable)

    def _observe_unreachable(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(int(any(source() for source in self._unreachable)))] if self._unreachable else []

    def _observe_budget_used(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(n, {"window": w}) for source in self._budget_sources for w, n, _ in source()]

    def _observe_budget_limit(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(lim, {"window": w}) for source in self._budget_sources for w, _, lim in source()]

    def _readings(self) -> list[tuple[dict[str, str], LiftReading]]:
        return [
            (_series(r.key.service, r.key.route, answer_shape=r.key.shape), r)
            for source in self._lift_sources
            for r in source()
        ]

    def _observe_targeted_share(self, _: CallbackOptions) -> list[Observation]:
        return [Observation(r.targeted_share, where) for where, r in self._readings()]

    def _observe_failed_share(self, _: CallbackOptions) -> list[Observation]:
        return [
            Observation(value, {**where, "group": group, "bound": bound})
            for where, r in self._readings()
            for group, share in (("targeted", r.targeted), ("uniform", r.uniform))
            if share is not None
            for bound, value in (("value", share.value), ("lower", share.lower), ("upper", share.upper))
        ]

    def _observe_lift_labels(self, _: CallbackOptions) -> list[Observation]:
        return [
            Observation(share.labels, {**where, "group": group})
            for where, r in self._readings()
            for group, share in (("targeted", r.targeted), ("uniform", r.uniform))
            if share is not None
        ]

    def dead_lettered(self) -> None:
        self._dead_letters.add(1)


# Turns per conversation: most are short, a session id shared by many users runs into the hundreds.
TURN_BUCKETS = (1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233)


class ConversationMetrics:
    """From `tracescore conversations`: each conversation counted once, by its first record (revision 0),
    per judge tier; later revisions only in `tracescore.conversations.revised` (the conversations topic has
    the final numbers). `selection` keeps the uniform baseline apart from the cascade's targeted picks."""

    def __init__(self, meter: Meter | None = None, skip_reasons: Sequence[str] = ()) -> None:
        """`skip_reasons`: the words `tracescore.conversations.skipped` counts by, named in its description
        (the service's enums, which emit, below it, does not import: `conversations.SKIP_REASONS`)."""
        meter = meter or metrics.get_meter("tracescore.conversations", __version__)
        reasons = f" ({', '.join(skip_reasons)})" if skip_reasons else ""
        self._closed = meter.create_counter(
            "tracescore.conversations",
            description="Conversations recorded, by service, route of the first turn, metric, judge tier and "
            "outcome: passed (no scored turn flagged), flagged (one or more), unscored.",
        )
        self._revised = meter.create_counter(
            "tracescore.conversations.revised",
            description="Conversation records revised by a turn that arrived after the record was written.",
        )
        self._turns = meter.create_histogram(
            "tracescore.conversation.turns",
            unit="{turn}",
            description="Turns per recorded conversation.",
            explicit_bucket_boundaries_advisory=TURN_BUCKETS,
        )
        self._share = meter.create_histogram(
            "tracescore.conversation.share",
            unit="1",
            description="Share of a conversation's scored turns the label rule passes (0..1).",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self._skipped = meter.create_counter(
            "tracescore.conversations.skipped",
            description="Turn records not gathered into a conversation, and conversations evicted, by "
            f"reason{reasons}.",
        )

    def recorded(self, record: ConversationRecord) -> None:
        where = _series(
            record.service_name,
            record.route,
            metric=record.metric,
            annotator_kind=record.annotator_kind,
            selection=record.selection or "none",
        )
        if record.revision > 0:
            self._revised.add(1, where)
            return
        self._closed.add(1, {**where, "outcome": record.label or "unscored"})
        self._turns.record(record.turns, where)
        if record.score is not None:
            self._share.record(record.score, where)

    def skipped(self, reason: str, count: int = 1) -> None:
        if count:
            self._skipped.add(count, {"reason": reason})
