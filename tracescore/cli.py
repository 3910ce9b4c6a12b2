"""The `tracescore` command: `consume` (the scoring service) and `score` (batch scoring of a file)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import click

from tracescore import __version__

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
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # kafka-python is chatty at INFO (every connection); its warnings and errors still show.
    logging.getLogger("kafka").setLevel(logging.DEBUG if verbose else logging.WARNING)


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


def _names(csv_names: str) -> list[str]:
    return [n.strip() for n in csv_names.split(",") if n.strip()]


def _or_usage_error(factory: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return factory(*args, **kwargs)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc


def _add_service_commands() -> None:
    from tracescore.consume._cli import consume

    main.add_command(consume)


_add_service_commands()

if __name__ == "__main__":
    main()
