"""`tracescore consume`: the scoring service's command line.

Its Kafka and loop options are generated from ConsumerSettings, so each option's help, environment
variable and default come from the one place they are defined. Values given as flags go to the settings
as init values, which outrank the environment, which outranks the `--config` file, which outranks the
defaults. Validation errors are one line naming the flag or variable, never a traceback.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Collection
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import click
from pydantic import BaseModel, SecretStr, ValidationError

from tracescore import __version__
from tracescore._cli_common import meter_provider
from tracescore._config import problems
from tracescore._kafka_config import PRODUCER_ONLY
from tracescore.consume._settings import ConfigFileError, ConsumerSettings

__all__ = ["config_option", "consume", "load_settings", "settings_options"]

# Options whose name is not simply the field's: the seconds suffix reads better off ("--idle-timeout").
_RENAMED = {"bootstrap_servers": "--bootstrap-servers"}
_NESTED = {"assembly": "assembly", "kafka": "kafka"}


def _option_name(path: tuple[str, ...]) -> str:
    dotted = ".".join(path)
    if dotted in _RENAMED:
        return _RENAMED[dotted]
    name = "-".join(path).replace("_", "-")
    return "--" + name.removesuffix("-s")


def _env_name(path: tuple[str, ...]) -> str:
    return "TRACESCORE_" + "__".join(p.upper() for p in path)


def _fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out = []
    for name, info in model.model_fields.items():
        if prefix == ("kafka",) and name in PRODUCER_ONLY:
            continue  # the SDK's producer tuning: accepted from the environment, no use for a flag here
        annotation = info.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += _fields(annotation, (*prefix, name))
        else:
            out.append(((*prefix, name), info))
    return out


def _click_type(annotation: Any) -> tuple[Any, bool]:
    """(click type, is a boolean flag) for a field annotation."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (Union, UnionType) and len(args) == 1:
        annotation = args[0]
    if get_origin(annotation) is Literal:
        return click.Choice([str(a) for a in get_args(annotation)]), False
    if annotation is bool:
        return click.BOOL, True
    if annotation is int:
        return click.INT, False
    if annotation is float:
        return click.FLOAT, False
    if annotation is Path:
        return click.Path(path_type=Path), False
    return click.STRING, False


def settings_options(model: type[BaseModel], only: Collection[str] | None = None) -> Callable[[Any], Any]:
    """Click options for every field of `model` (nested models flattened), or for the fields named in `only`
    (a nested model's name takes all of its fields); values land in `**flags`."""

    def decorate(fn: Any) -> Any:
        for path, info in reversed(_fields(model)):
            if only is not None and path[0] not in only:
                continue
            kind, is_flag = _click_type(info.annotation)
            default = info.get_default(call_default_factory=True)
            shown = "********" if info.annotation in (SecretStr, SecretStr | None) and default else default
            help_text = (info.description or "").rstrip(".")
            default_text = "" if default is None else f"; default: {shown}"
            help_text += f". [env: {_env_name(path)}{default_text}]"
            name = _option_name(path)
            declaration = f"{name}/--no-{name[2:]}" if is_flag else name
            fn = click.option(
                declaration, "__".join(path), type=kind, default=None, help=help_text.lstrip(". ")
            )(fn)
        return fn

    return decorate


def _nest(flags: dict[str, Any]) -> dict[str, Any]:
    """{"assembly__grace_s": 1} -> {"assembly": {"grace_s": 1}}, leaving out flags not given."""
    nested: dict[str, Any] = {}
    for key, value in flags.items():
        if value is None:
            continue
        *parents, leaf = key.split("__")
        target = nested
        for parent in parents:
            target = target.setdefault(parent, {})
        target[leaf] = value
    return nested


def load_settings(flags: dict[str, Any], config_file: Path | None) -> ConsumerSettings:
    given = _nest(flags)
    try:
        return ConsumerSettings.load(given, config_file)
    except ConfigFileError as exc:
        raise click.UsageError(str(exc)) from exc
    except ValidationError as exc:
        found = []
        for loc, message in problems(exc, ConsumerSettings):
            path = tuple(str(part) for part in loc)
            where = (
                _option_name(path)
                if "__".join(path) in flags and flags["__".join(path)] is not None
                else None
            )
            where = where or f"{_env_name(path)} (or `{'.'.join(path)}` in --config)"
            found.append(f"invalid value for {where}: {message}")
        raise click.UsageError("; ".join(found)) from exc


def _judge_and_metrics(
    judge: str, model: str | None, base_url: str | None, metrics: str, config: Path | None
) -> tuple[Any, Any]:
    from tracescore.score import make_judge, make_metrics

    names = [n.strip() for n in metrics.split(",") if n.strip()]
    try:
        return make_judge(judge, model=model, base_url=base_url), make_metrics(names, config)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


# The settings file of consume, and of every command that reaches Kafka the way consume does (tail).
config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="TOML file of settings (a [consume] table of the options' field names); flags and TRACESCORE_* "
    "variables override it.",
)


@click.command()
@config_option
@settings_options(ConsumerSettings)
@click.option(
    "--sample-ratio",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of traces to score, decided per trace id: the sampling policy's default_rate "
    "[env: TRACESCORE_SAMPLING__DEFAULT_RATE; default: 1.0]. Rates per service/route/metric, filters, "
    "rate limit and LLM token budgets: the [sampling] table of --config.",
)
@click.option(
    "--cascade/--no-cascade",
    default=True,
    show_default=True,
    help="With an LLM judge: the offline judge scores every admitted interaction and the LLM judge those "
    "it finds suspicious plus a uniform baseline, within the token budget. --no-cascade: the LLM judge "
    "scores all.",
)
@click.option(
    "--alert-threshold",
    type=click.FloatRange(0.0, 1.0),
    default=0.7,
    show_default=True,
    help="Log an alert when the rolling faithfulness of a (service, route) in this process's partitions "
    "drops below this (tracescore alert's logic, one rule; run tracescore alert for the whole group).",
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
    "score, the mean faithfulness score [default: label, as tracescore alert's rules].",
)
@click.option(
    "--otlp-metrics-endpoint",
    envvar="TRACESCORE_OTLP_METRICS_ENDPOINT",
    show_envvar=True,
    default=None,
    help="Send the consumer's OTel metrics (score histograms, counts) over OTLP/HTTP, "
    "e.g. http://127.0.0.1:4318/v1/metrics.",
)
@click.option(
    "--prometheus-port",
    envvar="TRACESCORE_PROMETHEUS_PORT",
    show_envvar=True,
    type=click.IntRange(1, 65535),
    default=None,
    help="Also serve the consumer's metrics for Prometheus to scrape at http://HOST:PORT/metrics.",
)
@click.option(
    "--prometheus-host",
    envvar="TRACESCORE_PROMETHEUS_HOST",
    show_envvar=True,
    default="0.0.0.0",
    show_default=True,
    help="Address the Prometheus endpoint listens on.",
)
@click.option(
    "--max-claims",
    envvar="TRACESCORE_MAX_CLAIMS",
    show_envvar=True,
    type=click.IntRange(min=1),
    default=None,
    help="Claims judged per answer; the rest of a very long answer is not judged and the record says so "
    "(details.capped) [default: 200].",
)
@click.option(
    "--phoenix-endpoint",
    envvar="TRACESCORE_PHOENIX_ENDPOINT",
    show_envvar=True,
    default=None,
    help="Also post every result to this Arize Phoenix as a span annotation, e.g. http://127.0.0.1:6006 "
    "(API key from TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY).",
)
@click.option(
    "--judge",
    type=click.Choice(["offline", "openai"]),
    default="offline",
    show_default=True,
    help="offline: deterministic, no network. openai: any OpenAI-compatible endpoint.",
)
@click.option("--model", default=None, help="Judge model (openai judge; env TRACESCORE_JUDGE_MODEL).")
@click.option("--base-url", default=None, help="OpenAI-compatible base URL (env TRACESCORE_JUDGE_BASE_URL).")
@click.option(
    "--metrics",
    default="faithfulness",
    show_default=True,
    help="Comma-separated metric names (see `tracescore score --help`).",
)
@click.option(
    "--metric-config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="TOML file declaring custom metrics ([[metric]] tables).",
)
def consume(
    config_file: Path | None,
    sample_ratio: float | None,
    cascade: bool,
    alert_threshold: float,
    alert_window: int,
    alert_signal: Literal["label", "score"] | None,
    otlp_metrics_endpoint: str | None,
    prometheus_port: int | None,
    prometheus_host: str,
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
    from tracescore.consume._clients import BrokerUnreachable
    from tracescore.consume._consumer import EvaluationConsumer, GroupProtocolMismatch, OutputNotAcknowledged
    from tracescore.consume._status import RateLimitedLogs, describe_lift
    from tracescore.emit import EvaluationMetrics, PhoenixAnnotations, PhoenixSettings
    from tracescore.sample import CascadePolicy, SamplingConfigError, load_sampling_config
    from tracescore.score import OfflineJudge, check_judge, metric_names

    settings = load_settings(flags, config_file)
    chosen_judge, chosen_metrics = _judge_and_metrics(judge, model, base_url, metrics, metric_config)
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
    if judge != "offline" and cascade:
        chosen_judge, llm_judge = OfflineJudge(), chosen_judge
    try:
        check_judge(chosen_metrics, chosen_judge)
    except ValueError as exc:
        hint = " (with --cascade the offline judge scores first: add --no-cascade)" if llm_judge else ""
        raise click.UsageError(f"{exc}{hint}") from exc
    for handler in logging.getLogger().handlers:
        handler.addFilter(RateLimitedLogs())
    provider = meter_provider(otlp_metrics_endpoint, prometheus_host, prometheus_port)
    alerts = InProcessAlerts.for_threshold("faithfulness", alert_threshold, alert_window, alert_signal)
    consumer = EvaluationConsumer(
        settings,
        judge=chosen_judge,
        metrics=chosen_metrics,
        policy=policy,
        llm_judge=llm_judge,
        on_evaluation=alerts.observe,
        metrics_out=EvaluationMetrics(provider.get_meter("tracescore.consumer", __version__)),
        sinks=[PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_endpoint))] if phoenix_endpoint else [],
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: consumer.stop())
    try:
        stats = consumer.run()
    except (OutputNotAcknowledged, BrokerUnreachable, GroupProtocolMismatch) as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        provider.shutdown()  # exports what was recorded since the last interval
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    # Named only when it happens, as on the status line: most apps record their questions.
    unasked = f" (without a recorded question: {stats.without_question})" if stats.without_question else ""
    click.echo(
        f"messages={stats.messages} spans={stats.spans} traces={stats.traces} "
        f"interactions={stats.interactions}{unasked} scored={stats.scored} "
        f"sampled_out={stats.sampled_out} evaluations={stats.evaluations} "
        f"dead_letters={stats.dead_letters} judge_errors={stats.judge_errors} skipped: {skipped}",
        err=True,
    )
    if stats.not_admitted or stats.escalated:
        policy_line = ", ".join(f"{k}={v}" for k, v in sorted(stats.not_admitted.items())) or "none"
        llm = ", ".join(f"{k}={v}" for k, v in sorted(stats.escalated.items())) or "none"
        click.echo(f"  sampling: not admitted {policy_line}; to the LLM judge {llm}", err=True)
    if readings := policy.lift_readings():
        click.echo(f"  cascade lift: {describe_lift(readings)}", err=True)
    for (service, scope, reason), count in sorted(stats.skipped_by_source.items()):
        click.echo(f"  not scored: {count} x {reason} from service {service!r}, scope {scope!r}", err=True)
    assembly = ", ".join(f"{k}={v}" for k, v in sorted(stats.assembly.items()) if "released" not in k)
    if assembly:
        click.echo(f"  assembly: {assembly}", err=True)
    if stats.truncated_outputs:
        click.echo(f"  {stats.truncated_outputs} records were cut to fit Kafka's message limit", err=True)
