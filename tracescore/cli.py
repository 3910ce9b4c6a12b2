"""The `tracescore` command: `consume` (the scoring service), `alert` (the alerting service), `score`
(batch scoring of a file, a CI gate) and `report` (the HTML report of a scored file)."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any, get_args

from tracescore import __version__
from tracescore._kafka_config import KafkaConnection

# `pip install tracescore` is the SDK only; the command is the scoring service and needs its extra.
_NEEDS_CONSUMER_EXTRA = "the tracescore command needs the consumer extra ({} is not installed): " + (
    "pip install 'tracescore[consumer]'"
)

try:
    import click

    from tracescore.score._factory import DEFAULT_METRICS
except ModuleNotFoundError as missing:
    raise SystemExit(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None

__all__ = ["main"]

# Exit status of `tracescore score` when the CI gate fails or nothing could be scored (2 is a usage error).
EXIT_GATE_FAILED = 1


def _judge_options(default_metrics: str) -> list[Any]:
    return [
        click.option(
            "--judge",
            type=click.Choice(["offline", "openai"]),
            default="offline",
            show_default=True,
            help="offline: deterministic, no network. openai: any OpenAI-compatible endpoint.",
        ),
        click.option("--model", default=None, help="Judge model (openai judge; env TRACESCORE_JUDGE_MODEL)."),
        click.option(
            "--base-url", default=None, help="OpenAI-compatible base URL (env TRACESCORE_JUDGE_BASE_URL)."
        ),
        click.option(
            "--metrics",
            default=default_metrics,
            show_default=True,
            help="Comma-separated metric names: faithfulness, answer_relevancy, context_relevance, quality, "
            "distinct_2, names from --metric-config, installed plugins or package.module:attr paths.",
        ),
        click.option(
            "--metric-config",
            type=click.Path(exists=True, dir_okay=False, path_type=Path),
            default=None,
            help="TOML file declaring custom metrics ([[metric]] tables).",
        ),
    ]


def _with_judge_options(default_metrics: str) -> Any:
    def decorate(fn: Any) -> Any:
        for option in reversed(_judge_options(default_metrics)):
            fn = option(fn)
        return fn

    return decorate


@click.group()
@click.version_option(__version__, prog_name="tracescore")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def main(verbose: bool) -> None:
    """Catch hallucinations in production RAG."""
    try:
        import tracescore.consume
        import tracescore.emit
        import tracescore.score  # noqa: F401
    except ModuleNotFoundError as missing:
        raise click.ClickException(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # kafka-python is chatty at INFO (every connection); its warnings and errors still show.
    logging.getLogger("kafka").setLevel(logging.DEBUG if verbose else logging.WARNING)


def _kafka_security_options(fn: Any) -> Any:
    """`tracescore consume`'s Kafka security flags (the password only from the environment)."""
    from tracescore._kafka_config import KafkaSecurity, SaslMechanism, SecurityProtocol

    fields = KafkaSecurity.model_fields
    choices = {"security_protocol": get_args(SecurityProtocol), "sasl_mechanism": get_args(SaslMechanism)}
    for name in reversed(
        ["security_protocol", "sasl_mechanism", "sasl_username", "ssl_cafile", "ssl_certfile", "ssl_keyfile"]
    ):
        kind = click.Choice(choices[name]) if name in choices else click.STRING
        env = f"TRACESCORE_KAFKA__{name.upper()}"
        help_text = f"{(fields[name].description or '').rstrip('.')}. [env: {env}]"
        fn = click.option(f"--kafka-{name.replace('_', '-')}", f"kafka_{name}", type=kind, help=help_text)(fn)
    return fn


def _alert_connection(config: Any, connect_timeout: float | None, flags: dict[str, Any]) -> KafkaConnection:
    """How `tracescore alert` reaches Kafka: TRACESCORE_KAFKA__* with the flags on top; the brokers from
    --bootstrap-servers > TRACESCORE_ALERT_BOOTSTRAP_SERVERS > the config file > TRACESCORE_BOOTSTRAP_SERVERS
    (the name the SDK and consume read) > the default."""
    import os

    from pydantic import ValidationError

    from tracescore._kafka_config import kafka_settings_from_env

    given = {key.removeprefix("kafka_"): value for key, value in flags.items()}
    try:
        security = kafka_settings_from_env(**given).security()
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            path = [str(part) for part in error["loc"]]
            name = path[-1] if len(path) > 1 else ""
            where = f"--kafka-{name.replace('_', '-')}" if given.get(name) is not None else None
            where = where or "TRACESCORE_" + "__".join(p.upper() for p in path)
            problems.append(f"invalid value for {where}: {error['msg'].removeprefix('Value error, ')}")
        raise click.UsageError("; ".join(problems)) from None
    servers = config.bootstrap_servers
    if "bootstrap_servers" not in config.model_fields_set:
        servers = os.environ.get("TRACESCORE_BOOTSTRAP_SERVERS") or servers
    timeout = {} if connect_timeout is None else {"connect_timeout_s": connect_timeout}
    return KafkaConnection(bootstrap_servers=servers, security=security, **timeout)


@main.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="TRACESCORE_ALERT_CONFIG",
    default=None,
    help="Alert config YAML: rules, judge health, sinks (see README, Alerting).",
)
@click.option("--bootstrap-servers", default=None, help="[default: from the config, else localhost:9092]")
@click.option("--evaluations-topic", default=None, help="[default: tracescore.evaluations]")
@click.option(
    "--group-id", default=None, help="Consumer group of the alert instances [default: tracescore-alert]."
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without an evaluation record (demos, tests).",
)
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0, min_open=True),
    envvar="TRACESCORE_CONNECT_TIMEOUT_S",
    show_envvar=True,
    default=None,
    help="Give up with an error if no broker answers within this time "
    f"[default: {KafkaConnection.model_fields['connect_timeout_s'].default:g}].",
)
@_kafka_security_options
def alert(
    config_path: Path | None,
    bootstrap_servers: str | None,
    evaluations_topic: str | None,
    group_id: str | None,
    idle_timeout: float | None,
    connect_timeout: float | None,
    **security: Any,
) -> None:
    """Alert on rolling scores per service and route, across every scoring consumer of the group.

    Kafka security as for `tracescore consume` and the SDK: TRACESCORE_KAFKA__* (the password only from
    TRACESCORE_KAFKA__SASL_PASSWORD), the flags below on top."""
    from tracescore._kafka import BrokerUnreachable
    from tracescore.alert import AlertConfigError, AlertService, load_alert_config, make_sink

    try:
        config = load_alert_config(
            config_path,
            bootstrap_servers=bootstrap_servers,
            evaluations_topic=evaluations_topic,
            group_id=group_id,
        )
    except AlertConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    from kafka.errors import KafkaError

    connection = _alert_connection(config, connect_timeout, security)
    sinks = [_or_usage_error(make_sink, sink) for sink in config.sinks]
    try:
        service = AlertService(config, sinks, kafka=connection)
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: service.stop())
        stats = service.run(idle_timeout_s=idle_timeout)
    except BrokerUnreachable as exc:
        raise click.ClickException(str(exc)) from exc
    except KafkaError as exc:  # missing rights and the like: one line, not a traceback
        raise click.ClickException(f"Kafka at {connection.bootstrap_servers}: {exc}") from exc
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    click.echo(
        f"records={stats.records} notifications={stats.notifications} "
        f"delivery_failures={stats.delivery_failures} evicted_routes={stats.evicted_routes} "
        f"skipped: {skipped}",
        err=True,
    )


@main.command()
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Output JSONL [default: stdout]; missing directories are created.",
)
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--no-progress", is_flag=True, help="Hide the progress bar.")
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a self-contained HTML report here.",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=None,
    help="Also count scores below this as failing (summary, report, --max-flagged) [default: each "
    "metric's label decides; see README, What 'hallucinated' means].",
)
@click.option(
    "--fail-under",
    "fail_under",
    multiple=True,
    metavar="METRIC=MIN",
    help="CI gate: exit 1 when the metric's mean is below MIN (repeatable), e.g. faithfulness=0.8.",
)
@click.option(
    "--max-flagged",
    metavar="N|SHARE",
    default=None,
    help="CI gate: exit 1 when more faithfulness results are flagged (labelled hallucinated, see README) "
    "than a count (3) or a share of the scored records (0.05).",
)
@_with_judge_options(default_metrics=",".join(DEFAULT_METRICS))
def score(
    input_path: Path,
    out_path: Path | None,
    concurrency: int,
    no_progress: bool,
    report_path: Path | None,
    threshold: float | None,
    fail_under: tuple[str, ...],
    max_flagged: str | None,
    judge: str,
    model: str | None,
    base_url: str | None,
    metrics: str,
    metric_config: Path | None,
) -> None:
    """Score a JSONL, CSV or TSV file of {id, query, contexts, answer} records; one output line per input
    record. Exits 1 when nothing could be scored, a --fail-under mean is missed or --max-flagged exceeded."""
    from tracescore.score._batch import score_file
    from tracescore.score._evaluate import check_judge
    from tracescore.score._factory import make_judge, make_metrics
    from tracescore.score._summary import FLAGGED_METRIC, parse_fail_under, parse_max_flagged

    # One line per judge call at INFO would scroll the progress bar away.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    gate = _or_usage_error(parse_fail_under, fail_under)
    flag_limit = _or_usage_error(parse_max_flagged, max_flagged)
    the_judge = _or_usage_error(make_judge, judge, model=model, base_url=base_url)
    the_metrics = _or_usage_error(make_metrics, _names(metrics), metric_config)
    not_scored = sorted(set(gate) - {m.name for m in the_metrics})
    if not_scored:
        raise click.UsageError(f"--fail-under names metric(s) not in --metrics: {', '.join(not_scored)}")
    if flag_limit is not None and FLAGGED_METRIC not in {m.name for m in the_metrics}:
        raise click.UsageError(f"--max-flagged counts {FLAGGED_METRIC} flags: add it to --metrics")
    _or_usage_error(check_judge, the_metrics, the_judge)
    collector = None
    if report_path:
        from tracescore.score._report import ReportCollector

        collector = ReportCollector(threshold=threshold)
    out = _open_output(out_path) if out_path else sys.stdout
    try:
        summary = score_file(
            input_path,
            out,
            metrics=the_metrics,
            judge=the_judge,
            concurrency=concurrency,
            progress=not no_progress,
            threshold=threshold,
            report=lambda line: click.echo(line, err=True),
            on_row=collector,
        )
    finally:
        if out_path:
            out.close()
    for line in summary.lines():
        click.echo(line, err=True)
    if report_path and collector is not None:
        from tracescore.score._report import render_report

        html = render_report(collector, threshold=threshold, title=f"tracescore report: {input_path.name}")
        _write_text(report_path, html)
        click.echo(f"report: {report_path}", err=True)
    if not summary.anything_scored:
        click.echo(f"error: nothing could be scored in {input_path} (see the reasons above)", err=True)
        sys.exit(EXIT_GATE_FAILED)
    failures = summary.gate(gate, flag_limit)
    for failure in failures:
        click.echo(f"FAIL {failure}", err=True)
    if failures:
        sys.exit(EXIT_GATE_FAILED)


@main.command()
@click.argument("scores_path", metavar="SCORES", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="Where to write the HTML page.",
)
@click.option(
    "--records",
    "records_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="The scored input file, to show queries, answers and contexts (joined by line number).",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1),
    default=None,
    help="Also count scores below this as failing [default: each metric's label decides].",
)
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Records listed in each table of the page.",
)
def report(
    scores_path: Path, out_path: Path, records_path: Path | None, threshold: float | None, rows: int
) -> None:
    """Rebuild the HTML report from the JSONL that `tracescore score` wrote, without re-scoring."""
    from tracescore.score._report import ReportCollector, read_scores, render_report

    collector = ReportCollector(threshold=threshold, limit=rows)
    try:
        for record, row in read_scores(scores_path, records_path):
            collector(record, row)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    html = render_report(collector, threshold=threshold, title=f"tracescore report: {scores_path.name}")
    _write_text(out_path, html)
    click.echo(f"{collector.records} records; report: {out_path}", err=True)


def _open_output(path: Path) -> Any:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_text(path: Path, text: str) -> None:
    with _open_output(path) as handle:
        handle.write(text)


def _names(csv_names: str) -> list[str]:
    return [n.strip() for n in csv_names.split(",") if n.strip()]


def _or_usage_error(factory: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _add_service_commands() -> None:
    try:
        from tracescore.consume._cli import consume
    except ModuleNotFoundError as missing:
        raise SystemExit(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None
    main.add_command(consume)


_add_service_commands()

if __name__ == "__main__":
    main()
