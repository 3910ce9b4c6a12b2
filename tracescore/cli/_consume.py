"""`tracescore consume`: the scoring service's command line.

Its Kafka and loop options are generated from ConsumerSettings (`_options.settings_options`), so each
option's help, environment variable and default come from the one place they are defined. Values given as
flags go to the settings as init values, which outrank the environment, which outranks the `--config` file,
which outranks the defaults. Validation errors are one line naming the flag or variable, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import click

from tracescore import __version__
from tracescore._config import ConfigFileError, keys_outside_tables
from tracescore._plural import counted
from tracescore.alert import RuleConfig
from tracescore.cli._environment import warn_misspelt_variables
from tracescore.cli._options import (
    config_option,
    consumer_settings,
    default_of,
    env_note,
    env_option,
    judge_and_metrics,
    judge_options,
    otlp_metrics_option,
    phoenix_settings,
    settings_options,
)
from tracescore.cli._service import phoenix_summary, run_service, serving_metrics
from tracescore.consume import (
    AssemblyCounts,
    ConsumerSettings,
    ConsumerStats,
    RateLimitedLogs,
    describe_budget,
)
from tracescore.model import FAITHFULNESS, METRIC_SERIES_LIMIT, OFFLINE_JUDGE
from tracescore.sample import SamplingConfig, SkipReason
from tracescore.score.metrics._faithfulness import DEFAULT_MAX_CLAIMS

__all__ = ["consume"]

_log = logging.getLogger(__name__)
_PROMETHEUS_HOST = "0.0.0.0"  # every interface: a scraper runs elsewhere
_FULL = 0.95  # a budget window this far spent is at its cap: what is kept from the LLM judge then was refused


@click.command(short_help="Score the RAG answers in traces from Kafka (a service).")
@config_option
@settings_options(ConsumerSettings)
@click.option(
    "--sample-ratio",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of traces to score, decided per trace id: the sampling policy's default_rate. Rates per "
    "service/route/metric, filters, rate limit and LLM token budgets: the [sampling] table of --config. "
    + env_note("TRACESCORE_SAMPLING__DEFAULT_RATE", default_of(SamplingConfig, "default_rate")),
)
@click.option(
    "--cascade/--no-cascade",
    default=True,
    show_default=True,
    help="With an LLM judge: the offline judge scores every admitted interaction and the LLM judge those "
    "it finds suspicious plus a uniform baseline, within the token budget. --no-cascade: the LLM judge "
    "scores every admitted answer, outside any llm_budget (bound it with rate_limit.per_minute or "
    "default_rate).",
)
@click.option(
    "--alert-threshold",
    type=click.FloatRange(0.0, 1.0),
    # Unset: the rule `tracescore alert` runs without a config (alert/_config.py default_rule).
    default=None,
    help="Log an alert when the rolling faithfulness of a (service, route) in this process's partitions "
    "drops below this (tracescore alert's logic, one rule; run tracescore alert for the whole group). "
    f"[default: the rule tracescore alert runs without a config: {default_of(RuleConfig, 'warning')} on an "
    "estimate the LLM judge's baseline calibrates, and a drop of a route below its own normal]",
)
@click.option(
    "--alert-window",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Answers per (service, route) in the in-process alert's rolling window.",
)
@click.option(
    "--alert-signal",
    type=click.Choice(["label", "score"]),
    default=None,
    help="What the in-process alert estimates: label, the share of faithful answers (the label rule); "
    f"score, the mean faithfulness score [default: {default_of(RuleConfig, 'signal')}, as tracescore "
    "alert's rules].",
)
@otlp_metrics_option("the consumer's OTel metrics (score histograms, counts)")
@env_option(
    "--prometheus-port",
    envvar="TRACESCORE_PROMETHEUS_PORT",
    type=click.IntRange(1, 65535),
    default=None,
    help="Also serve the consumer's metrics for Prometheus to scrape at http://HOST:PORT/metrics.",
)
@env_option(
    "--prometheus-host",
    envvar="TRACESCORE_PROMETHEUS_HOST",
    default=_PROMETHEUS_HOST,
    shown_default=_PROMETHEUS_HOST,
    help="Address the Prometheus endpoint listens on.",
)
@env_option(
    "--metrics-max-series",
    envvar="TRACESCORE_METRICS_MAX_SERIES",
    type=click.IntRange(min=1),
    default=METRIC_SERIES_LIMIT,
    shown_default=METRIC_SERIES_LIMIT,
    help="Series each of the consumer's metrics keeps (a route, metric and status is one); past it new "
    "series are counted in one otel_metric_overflow series, without service or route, and the consumer "
    "says so once (docs: Deploying, Many routes).",
)
@env_option(
    "--max-claims",
    envvar="TRACESCORE_MAX_CLAIMS",
    type=click.IntRange(min=1),
    default=None,
    shown_default=DEFAULT_MAX_CLAIMS,
    help="Claims judged per answer; the rest of a very long answer is not judged and the record says so "
    "(details.capped).",
)
@env_option(
    "--phoenix-endpoint",
    envvar="TRACESCORE_PHOENIX_ENDPOINT",
    default=None,
    help="Also post every result to this Arize Phoenix as a span annotation, e.g. http://127.0.0.1:6006 "
    "(API key from TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY).",
)
@judge_options(default_metrics=FAITHFULNESS)
def consume(
    config_file: Path | None,
    sample_ratio: float | None,
    cascade: bool,
    alert_threshold: float | None,
    alert_window: int,
    alert_signal: Literal["label", "score"] | None,
    otlp_metrics_endpoint: str | None,
    prometheus_port: int | None,
    prometheus_host: str,
    metrics_max_series: int,
    max_claims: int | None,
    phoenix_endpoint: str | None,
    judge: str,
    model: str | None,
    base_url: str | None,
    metrics: str,
    metric_config: Path | None,
    **flags: Any,
) -> None:
    """Score the RAG interactions in traces read from Kafka, as a member of a consumer group.

    Start more processes with the same --group-id to scale out. SIGTERM/SIGINT finish the interactions
    being scored, commit and exit.
    """
    from tracescore.alert import InProcessAlerts
    from tracescore.consume import (
        EvaluationConsumer,
        GroupProtocolMismatch,
        OutputNotAcknowledged,
    )
    from tracescore.consume._status import describe_lift
    from tracescore.emit import EvaluationMetrics, PhoenixAnnotations
    from tracescore.sample import CascadePolicy, SamplingConfigError, load_sampling_config
    from tracescore.score import OfflineJudge, check_judge, metric_names

    try:
        flat = keys_outside_tables(config_file) if config_file is not None else []
    except ConfigFileError as exc:
        raise click.UsageError(str(exc)) from exc
    if flat:
        # Two readers share consume's file: its own settings and the sampling policy. Read whole by both,
        # a file without tables fails one of them on every key, naming the other's valid settings.
        raise click.UsageError(
            f"{config_file}: settings outside a table ({', '.join(flat)}): tracescore consume reads its "
            "options from a [consume] table and the sampling policy from a [sampling] table; put each key "
            "under its table (see the docs, Reference > Settings)"
        )
    settings = consumer_settings(flags, config_file)
    warn_misspelt_variables()
    chosen_judge, chosen_metrics = judge_and_metrics(judge, model, base_url, metrics, metric_config)
    if max_claims is not None:
        for metric in chosen_metrics:
            if hasattr(metric, "max_claims"):
                metric.max_claims = max_claims  # set once at start-up, before any scoring
    try:
        rate = {} if sample_ratio is None else {"default_rate": sample_ratio}
        known = {*metric_names(), *(m.name for m in chosen_metrics)}
        sampling = load_sampling_config(config_file, known_metrics=known, **rate)
    except SamplingConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    policy = CascadePolicy(sampling, metrics=[m.name for m in chosen_metrics])
    llm_judge = None
    if judge != OFFLINE_JUDGE and cascade:
        chosen_judge, llm_judge = OfflineJudge(), chosen_judge
    try:
        check_judge(chosen_metrics, chosen_judge)
    except ValueError as exc:
        hint = " (with --cascade the offline judge scores first: add --no-cascade)" if llm_judge else ""
        raise click.UsageError(f"{exc}{hint}") from exc
    if llm_judge is not None and (unbounded := _unbounded_llm_spend(sampling)):
        _log.warning("%s", unbounded)
    if judge != OFFLINE_JUDGE:
        _check_llm_spend_without_cascade(sampling, judge, cascade)
    alerts = InProcessAlerts.for_threshold(FAITHFULNESS, alert_threshold, alert_window, alert_signal)
    # Read before the metrics endpoint starts: a usage error leaves no port bound behind it.
    phoenix_config = phoenix_settings(phoenix_endpoint) if phoenix_endpoint else None
    with (
        serving_metrics(
            otlp_metrics_endpoint, prometheus_host, prometheus_port, max_series=metrics_max_series
        ) as provider,
        _client_floods_held_back(),
    ):
        phoenix: list[PhoenixAnnotations] = []
        if phoenix_config is not None:
            meter = provider.get_meter("tracescore.phoenix", __version__)
            phoenix.append(PhoenixAnnotations(phoenix_config, meter=meter))
        metrics_out = EvaluationMetrics(
            provider.get_meter("tracescore.consumer", __version__), metrics_max_series
        )
        if llm_judge is not None:
            metrics_out.observe_budget(policy.budget_used, _budget_windows(sampling))
        stats = run_service(
            lambda: EvaluationConsumer(
                settings,
                judge=chosen_judge,
                metrics=chosen_metrics,
                policy=policy,
                llm_judge=llm_judge,
                on_evaluation=alerts.observe,
                metrics_out=metrics_out,
                sinks=phoenix,
            ),
            lambda consumer: consumer.run(),
            settings.bootstrap_servers,
            one_line=(OutputNotAcknowledged, GroupProtocolMismatch),
        )
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    # Named only when it happens, as on the status line: most apps record their questions.
    unasked = f" (without a recorded question: {stats.without_question})" if stats.without_question else ""
    unasked += stats.partly_read()
    click.echo(
        f"messages={stats.messages} spans={stats.spans} traces={stats.traces} "
        f"interactions={stats.interactions}{unasked} scored={stats.scored} unscored={stats.unscored} "
        f"sampled_out={stats.sampled_out} evaluations={stats.evaluations} "
        f"dead_letters={stats.dead_letters} judge_errors={stats.judge_errors} skipped: {skipped}",
        err=True,
    )
    if stats.given_no_partition:
        # Not the app's fault: more members than partitions (a replica scaled past them sits idle).
        click.echo(
            f"  this member was given no partition of {settings.topic}: group {settings.group_id} has as "
            "many members as the topic has partitions, or more, and Kafka gives each partition to one "
            "member; the rest sit idle until one leaves. More members need more partitions: see the docs, "
            "Deploy > Topics",
            err=True,
        )
    elif stats.messages == 0:
        # The first-hour question: a misspelt topic, the app's spans sent elsewhere, or a group done already.
        click.echo(
            f"  nothing read from {settings.topic} at {settings.bootstrap_servers}: does your app (or "
            "Collector) send there (TRACESCORE_TOPIC, TRACESCORE_BOOTSTRAP_SERVERS)? Group "
            f"{settings.group_id} goes on from what it read before: a new --group-id reads the topic again. "
            "See the docs, Operating the consumer > Nothing is scored?",
            err=True,
        )
    if stats.not_admitted or stats.escalated:
        policy_line = ", ".join(f"{k}={v}" for k, v in sorted(stats.not_admitted.items())) or "none"
        llm = ", ".join(f"{k}={v}" for k, v in sorted(stats.escalated.items())) or "none"
        click.echo(f"  sampling: not admitted {policy_line}; to the LLM judge {llm}", err=True)
    if stats.judge_spend.by:
        spend = stats.judge_spend
        click.echo(f"  LLM judge spent: {spend.describe()}; by service: {spend.by_service()}", err=True)
    if llm_judge is not None and (budget := _budget_line(sampling, policy.budget_used(), stats)):
        click.echo(f"  LLM budget (this process, UTC): {budget}", err=True)
    if llm_judge is not None and (unselected := _unselected_line(sampling, stats)):
        click.echo(f"  cascade: {unselected}", err=True)
    if readings := policy.lift_readings():
        click.echo(f"  cascade lift: {describe_lift(readings)}", err=True)
    for (service, scope, reason), count in sorted(stats.skipped_by_source.items()):
        click.echo(f"  not scored: {count} x {reason} from service {service!r}, scope {scope!r}", err=True)
    if stats.services_learned:
        learned = counted(stats.services_learned, "service")
        click.echo(
            f"  infer_conversations auto: conversations inferred for {learned} learned to resend chats",
            err=True,
        )
    assembly = assembly_summary(stats.assembly)
    if assembly:
        click.echo(f"  assembly: {assembly}", err=True)
    if stats.truncated_outputs:
        cut = stats.truncated_outputs
        were = "was" if cut == 1 else "were"
        click.echo(
            f"  {counted(cut, 'record')} {were} cut to fit Kafka's message limit",
            err=True,
        )
    for sink in phoenix:  # closed with the consumer: its counts are final
        click.echo(phoenix_summary(sink), err=True)


def _budget_windows(sampling: SamplingConfig) -> dict[str, int | None]:
    """The LLM budget's limit per window, named as `CascadePolicy.budget_used` names them."""
    budget = sampling.llm_budget
    return {"hour": budget.tokens_per_hour, "day": budget.tokens_per_day}


def _budget_line(sampling: SamplingConfig, used: dict[str, int], stats: ConsumerStats) -> str | None:
    """What the LLM budget's windows spent, and what its skips were: a budget owner reading "budget=55" took
    it for a spent budget, when the cascade had only paced what was left over the rest of the window at the
    arrival rate (a backlog read at full speed looks like a day's traffic arriving at once). Those are
    `unselected` now, said paced; `budget` counts only answers the budget had no room for."""
    limits = _budget_windows(sampling)
    line = describe_budget(used, limits)
    if line is None:
        return None
    unselected = stats.not_admitted.get(SkipReason.UNSELECTED, 0)
    refused = stats.not_admitted.get(SkipReason.BUDGET, 0)
    if unselected:
        line += (
            f"; {SkipReason.UNSELECTED}={unselected} were paced, not refused: the budget had room, but the "
            "cascade spreads what is left over the rest of the hour and day at the rate answers arrive (a "
            "backlog read at full speed looks like heavy traffic), the baseline's share first (cascade.share "
            "and targeting's split narrow what it sends too)"
        )
    full = any(limit is not None and used[window] >= _FULL * limit for window, limit in limits.items())
    if refused:
        line += f"; {SkipReason.BUDGET}={refused} were refused: " + (
            "the budget is spent (they keep their offline score)"
            if full
            else "the budget had no room when they came (what was left was reserved for evaluations in "
            "flight and the baseline's share, or a window gone by was spent)"
        )
    if sampling.llm_budget.state_path is None:
        return line + "; a restart starts these windows again from 0 (llm_budget.state_path keeps them)"
    return line + f"; saved to {sampling.llm_budget.state_path}: a restart goes on from them"


def _unselected_line(sampling: SamplingConfig, stats: ConsumerStats) -> str | None:
    """With no budget set, what `unselected` skips were: a newcomer's summary said `budget=189` with no
    llm_budget, and a budget owner raised a budget that was never the cause."""
    unselected = stats.not_admitted.get(SkipReason.UNSELECTED, 0)
    if not unselected or any(limit is not None for limit in _budget_windows(sampling).values()):
        return None
    return (
        f"{SkipReason.UNSELECTED}={unselected} were above the cascade's floor but outside the share it sends "
        "(cascade.share, or targeting's split where it shows no lift; see the docs, Sampling); no llm_budget "
        "is set, so no budget held them back"
    )


def _check_llm_spend_without_cascade(sampling: SamplingConfig, judge: str, cascade: bool) -> None:
    """The LLM budget caps the cascade's escalations only. With --no-cascade the LLM judge scores every
    admitted answer and a budget was ignored without a word (tokens_per_hour = 5000 spent 208,518 tokens on
    200 answers in one walk): refused, saying what bounds it. With cascade.enabled = false the LLM judge is
    never called: said, as a budget owner may mean it (a switch that stops the spend) or not."""
    budget = sampling.llm_budget
    budgeted = budget.tokens_per_hour is not None or budget.tokens_per_day is not None
    if not cascade and budgeted:
        raise click.UsageError(
            "[sampling.llm_budget] caps the cascade's LLM judge only: with --no-cascade the LLM judge scores "
            "every admitted answer and the budget would be ignored. Drop --no-cascade (the cascade keeps the "
            "LLM judge within the budget), or remove llm_budget and bound the spend with [sampling] "
            "rate_limit.per_minute or default_rate. See the docs, Operating the consumer > What the LLM "
            "judge costs"
        )
    bounded = sampling.rate_limit.per_minute is not None or sampling.default_rate < 1.0 or sampling.rates
    if not cascade and not bounded:
        _log.warning(
            "the LLM judge's spend is unbounded: --no-cascade sends it every answer read (default_rate 1); "
            "bound it with [sampling] rate_limit.per_minute or default_rate (--sample-ratio), or drop "
            "--no-cascade for the cascade and its llm_budget. See the docs, Operating the consumer > What "
            "the LLM judge costs"
        )
    if cascade and not sampling.cascade.enabled:
        _log.warning(
            "cascade.enabled is false: the LLM judge (--judge %s) is never called and only the offline judge "
            "scores; --no-cascade makes the LLM judge score every admitted answer",
            judge,
        )


def _unbounded_llm_spend(sampling: SamplingConfig) -> str | None:
    """What a cascade without a budget or a share sends the LLM judge, and what to set; None when bounded.
    The default: fine on one-line answers (about the hallucinated ones go), a quarter to a half of a route
    of long answers (194 of 800 in one walk), which no start-up line said."""
    budget, cascade = sampling.llm_budget, sampling.cascade
    if not cascade.enabled or cascade.share is not None:
        return None
    if budget.tokens_per_hour is not None or budget.tokens_per_day is not None:
        return None
    return (
        "the LLM judge's spend is unbounded: no llm_budget is set, so the cascade sends it every answer "
        f"whose suspicion score is above cascade.min_probability ({cascade.min_probability:g}), a quarter "
        "to a half of a route of long answers; set [sampling.llm_budget] tokens_per_hour in --config "
        "(TRACESCORE_SAMPLING__LLM_BUDGET__TOKENS_PER_HOUR). See the docs, Sampling and the cascade > Long "
        "answers and the LLM budget"
    )


@contextlib.contextmanager
def _client_floods_held_back() -> Iterator[None]:
    """A `RateLimitedLogs` on each of the root logger's handlers while the service runs, so the client's flood
    is held back however it is logged. Taken off again however the block ends: a program that runs the
    command in process (a test suite) keeps its handlers as they were. Added where a start-up error could
    still come after it (a bad TRACESCORE_PHOENIX_* variable, a taken Prometheus port), it stayed: pytest's
    log capture, one handler for a worker's whole run, then held back every later test's repeat of a kafka
    warning it had seen in the last 30 s."""
    held_back = [(handler, RateLimitedLogs()) for handler in logging.getLogger().handlers]
    for handler, limit in held_back:
        handler.addFilter(limit)
    try:
        yield
    finally:
        for handler, limit in held_back:
            handler.removeFilter(limit)


def assembly_summary(counts: AssemblyCounts) -> str:
    """The closing summary's assembly counts (`late_spans=2, ...`), why traces were read left out: keyed by
    `AssemblyCount` members whatever they were counted by (`AssemblyCounts`), so each has its `why_read`."""
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items()) if not k.why_read)
