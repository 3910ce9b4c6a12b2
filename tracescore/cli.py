"""The `tracescore` command: `consume` (the scoring service) and `score` (batch scoring of a file)."""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import Any

from tracescore import __version__

# `pip install tracescore` is the SDK only; the command is the scoring service and needs its extra.
_NEEDS_CONSUMER_EXTRA = "the tracescore command needs the consumer extra ({} is not installed): " + (
    "pip install 'tracescore[consumer]'"
)

try:
    import click
except ModuleNotFoundError as missing:
    raise SystemExit(_NEEDS_CONSUMER_EXTRA.format(missing.name)) from None

__all__ = ["main"]

_judge_options = [
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
        default="faithfulness",
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


def _with_judge_options(fn: Any) -> Any:
    for option in reversed(_judge_options):
        fn = option(fn)
    return fn


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


@main.command()
@click.option("--bootstrap-servers", envvar="TRACESCORE_BOOTSTRAP_SERVERS", required=True)
@click.option(
    "--topic", default="otlp_spans", show_default=True, help="Topic of OTLP spans, protobuf or JSON."
)
@click.option("--group-id", default="tracescore", show_default=True, help="Kafka consumer group.")
@click.option("--evaluations-topic", default="tracescore.evaluations", show_default=True)
@click.option("--dlq-topic", default="tracescore.dlq", show_default=True)
@click.option("--evaluation-spans-topic", default=None, help="Where evaluation spans go [default: --topic].")
@click.option(
    "--sample-ratio",
    type=click.FloatRange(0, 1),
    default=1.0,
    show_default=True,
    help="Share of traces to score, decided per trace id.",
)
@click.option(
    "--max-poll-records",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Records per poll; every batch must be scored within max.poll.interval.ms (5 min).",
)
@click.option(
    "--max-records",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many RAG spans were handled (scored, sampled out or skipped).",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Stop after this many seconds without a message, counted from the first partition assignment.",
)
@click.option(
    "--alert-threshold",
    type=float,
    default=0.7,
    show_default=True,
    help="Alert when rolling faithfulness of a (service, route) drops below this.",
)
@click.option("--alert-window", type=click.IntRange(min=1), default=20, show_default=True)
@click.option(
    "--otlp-metrics-endpoint",
    envvar="TRACESCORE_OTLP_METRICS_ENDPOINT",
    default=None,
    help="Send the consumer's OTel metrics (score histograms, counts) over OTLP/HTTP, "
    "e.g. http://127.0.0.1:4318/v1/metrics.",
)
@click.option(
    "--phoenix-endpoint",
    envvar="TRACESCORE_PHOENIX_ENDPOINT",
    default=None,
    help="Also post every result to this Arize Phoenix as a span annotation, e.g. http://127.0.0.1:6006 "
    "(API key from TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY).",
)
@_with_judge_options
def consume(
    bootstrap_servers: str,
    topic: str,
    group_id: str,
    evaluations_topic: str,
    dlq_topic: str,
    evaluation_spans_topic: str | None,
    sample_ratio: float,
    max_poll_records: int,
    max_records: int | None,
    idle_timeout: float | None,
    alert_threshold: float,
    alert_window: int,
    otlp_metrics_endpoint: str | None,
    phoenix_endpoint: str | None,
    judge: str,
    model: str | None,
    base_url: str | None,
    metrics: str,
    metric_config: Path | None,
) -> None:
    """Score the RAG interactions in traces read from Kafka, as a member of a consumer group."""
    from tracescore.alert import LogNotifier, RollingScoreAlerter
    from tracescore.consume import EvaluationConsumer, OutputNotAcknowledged
    from tracescore.emit import EvaluationMetrics, PhoenixAnnotations, PhoenixSettings
    from tracescore.sample import RatioSampler
    from tracescore.score._factory import make_judge, make_metrics

    settings = _consumer_settings(
        bootstrap_servers=bootstrap_servers,
        topic=topic,
        group_id=group_id,
        evaluations_topic=evaluations_topic,
        dlq_topic=dlq_topic,
        evaluation_spans_topic=evaluation_spans_topic,
        max_poll_records=max_poll_records,
        max_records=max_records,
        idle_timeout_s=idle_timeout,
    )
    meter_provider = _meter_provider(otlp_metrics_endpoint)
    alerter = RollingScoreAlerter([LogNotifier()], threshold=alert_threshold, window=alert_window)
    consumer = EvaluationConsumer(
        settings,
        judge=_or_usage_error(make_judge, judge, model=model, base_url=base_url),
        metrics=_or_usage_error(make_metrics, _names(metrics), metric_config),
        sampler=RatioSampler(sample_ratio),
        on_evaluation=alerter.observe,
        metrics_out=EvaluationMetrics(meter_provider.get_meter("tracescore.consumer", __version__)),
        sinks=[PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_endpoint))] if phoenix_endpoint else [],
    )
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: consumer.stop())
    try:
        stats = consumer.run()
    except OutputNotAcknowledged as exc:
        raise click.ClickException(str(exc)) from exc
    finally:
        meter_provider.shutdown()  # exports what was recorded since the last interval
    skipped = ", ".join(f"{k}={v}" for k, v in sorted(stats.skipped.items())) or "none"
    click.echo(
        f"messages={stats.messages} spans={stats.spans} traces={stats.traces} interactions={stats.rag_spans} "
        f"scored={stats.scored} sampled_out={stats.sampled_out} evaluations={stats.evaluations} "
        f"dead_letters={stats.dead_letters} skipped: {skipped}",
        err=True,
    )
    for (service, scope, reason), count in sorted(stats.skipped_by_source.items()):
        click.echo(f"  not scored: {count} x {reason} from service {service!r}, scope {scope!r}", err=True)
    assembly = ", ".join(f"{k}={v}" for k, v in sorted(stats.assembly.items()) if "released" not in k)
    if assembly:
        click.echo(f"  assembly: {assembly}", err=True)


@main.command()
@click.argument("input_path", metavar="INPUT", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Output JSONL [default: stdout].",
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
    default=0.5,
    show_default=True,
    help="Scores below this count as failing in the report.",
)
@_with_judge_options
def score(
    input_path: Path,
    out_path: Path | None,
    concurrency: int,
    no_progress: bool,
    report_path: Path | None,
    threshold: float,
    judge: str,
    model: str | None,
    base_url: str | None,
    metrics: str,
    metric_config: Path | None,
) -> None:
    """Score a JSONL or CSV file of {id, query, contexts, answer} records; one output line per input line."""
    from tracescore.score._batch import score_file
    from tracescore.score._factory import make_judge, make_metrics

    the_judge = _or_usage_error(make_judge, judge, model=model, base_url=base_url)
    the_metrics = _or_usage_error(make_metrics, _names(metrics), metric_config)
    collector = None
    if report_path:
        from tracescore.score._report import ReportCollector

        collector = ReportCollector(threshold=threshold)
    out = out_path.open("w", encoding="utf-8") if out_path else sys.stdout
    try:
        summary = score_file(
            input_path,
            out,
            metrics=the_metrics,
            judge=the_judge,
            concurrency=concurrency,
            progress=not no_progress,
            report=lambda line: click.echo(line, err=True),
            on_row=collector,
        )
    finally:
        if out_path:
            out.close()
    scored = ", ".join(f"{m}: {n} scored, {summary.unscored[m]} unscored" for m, n in summary.scored.items())
    click.echo(f"{summary.records} records ({summary.invalid} invalid); {scored}", err=True)
    if report_path and collector is not None:
        from tracescore.score._report import render_report

        html = render_report(collector, threshold=threshold, title=f"tracescore report: {input_path.name}")
        report_path.write_text(html, encoding="utf-8")
        click.echo(f"report: {report_path}", err=True)


def _meter_provider(otlp_endpoint: str | None) -> Any:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    readers = []
    if otlp_endpoint:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=otlp_endpoint)))
    return MeterProvider(
        metric_readers=readers, resource=Resource.create({SERVICE_NAME: "tracescore-consumer"})
    )


# ConsumerSettings fields whose `consume` option is not simply the field name with dashes.
_OPTION_OF_FIELD = {"idle_timeout_s": "--idle-timeout"}


def _consumer_settings(**values: Any) -> Any:
    """ConsumerSettings from the options; an invalid value is a one-line usage error, not a traceback."""
    from pydantic import ValidationError

    from tracescore.consume import ConsumerSettings

    try:
        return ConsumerSettings(**values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            if field in values:
                where = _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))
            else:  # only the environment can set the other fields
                where = "TRACESCORE_" + field.upper().replace(".", "__")
            problems.append(f"invalid value for {where}: {error['msg'].removeprefix('Value error, ')}")
        raise click.UsageError("; ".join(problems)) from exc


def _names(csv_names: str) -> list[str]:
    return [n.strip() for n in csv_names.split(",") if n.strip()]


def _or_usage_error(factory: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


if __name__ == "__main__":
    main()
