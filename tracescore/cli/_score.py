"""`tracescore score` (batch scoring of a file, a CI gate) and `tracescore report` (the HTML report of a
scored file)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from tracescore._config import unknown_name
from tracescore._plural import counted
from tracescore.cli._options import judge_and_metrics, judge_options, or_usage_error, threshold_option
from tracescore.score import DEFAULT_METRICS, GateCondition, GateFailure
from tracescore.score._ci import ANYTHING_SCORED, Check, junit_xml, summary_json
from tracescore.score._inputs import MAPPED_FIELDS
from tracescore.score._summary import FLAGGED_METRIC

if TYPE_CHECKING:
    from tracescore.score._batch import Source

__all__ = ["EXIT_GATE_FAILED", "report", "score"]

# Exit status of `tracescore score` when the CI gate fails or nothing could be scored, and of `tracescore
# report` when nothing could be reported (2 is a usage error).
EXIT_GATE_FAILED = 1
# A run stopped by Ctrl-C (SIGINT) exits as a shell says a command it interrupted did, 128 + 2: a CI job told
# apart a cancelled run from a failed gate.
EXIT_INTERRUPTED = 130


def _column_option(read_from: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--column FIELD=COLUMN`: `score` reads its input through it, `report` its --records the same way."""
    return click.option(
        "--column",
        "columns",
        multiple=True,
        metavar="FIELD=COLUMN",
        help=f"Read FIELD ({', '.join(MAPPED_FIELDS)}) from {read_from} COLUMN (repeatable), e.g. "
        "query=question or label=verdict: the library's column_map; the names read without it: see the "
        "docs, Offline evaluation.",
    )


@click.command(short_help="Score a file of records (JSONL, CSV, TSV); a CI gate.")
@click.argument(
    "input_path",
    metavar="INPUT",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
)
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Output JSONL [default: stdout]; missing directories are created.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Records scored at once (judge calls in flight).",
)
@click.option(
    "--no-progress",
    is_flag=True,
    help="Hide the progress bar (shown only when stderr is a terminal: a CI log gets the summary alone).",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a self-contained HTML report here.",
)
@threshold_option("summary, report, --max-flagged")
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
    help="CI gate: exit 1 when more faithfulness results are flagged than a count (3) or a share of the "
    "scored records (0.05, or 5%); flagged: labelled hallucinated, see the docs, Offline evaluation > "
    "Metrics.",
)
@click.option(
    "--allow-unscored",
    "allow_unscored",
    type=click.IntRange(min=0),
    metavar="N",
    default=None,
    help="CI gate: pass with up to N records invalid or not scored (the judge failed on a gated metric, or "
    "a gated metric that needs the contexts found no contexts column); by default a gate fails on any. "
    "Needs --fail-under, --max-flagged or --baseline.",
)
@click.option(
    "--baseline",
    "baseline_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    metavar="SCORES",
    help="CI gate: exit 1 when the share of faithfulness-flagged records rose against SCORES (another run's "
    "--out of the same records, e.g. main's; paired by id) by more than --baseline-margin at the lower end "
    "of its 95% interval.",
)
@click.option(
    "--baseline-margin",
    metavar="SHARE",
    default=None,
    help="The rise of the flagged share --baseline allows, as a share or a percentage (0.02 or 2%) "
    "[default: 0].",
)
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a JUnit XML file here: one test case per condition of the gate, failed as the FAIL "
    "lines say.",
)
@click.option(
    "--summary-json",
    "summary_json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the summary, the gate's conditions and the exit status as JSON here.",
)
@_column_option("the file's column")
@judge_options(default_metrics=",".join(DEFAULT_METRICS))
def score(
    input_path: Path,
    out_path: Path | None,
    concurrency: int,
    no_progress: bool,
    report_path: Path | None,
    threshold: float | None,
    fail_under: tuple[str, ...],
    max_flagged: str | None,
    allow_unscored: int | None,
    baseline_path: Path | None,
    baseline_margin: str | None,
    junit_path: Path | None,
    summary_json_path: Path | None,
    columns: tuple[str, ...],
    judge: str,
    model: str | None,
    base_url: str | None,
    metrics: str,
    metric_config: Path | None,
) -> None:
    """Score a JSONL, CSV or TSV file of {id, query, contexts, answer} records (INPUT - reads standard
    input, its format told by its first line); one output line per input record. Exits 1 when nothing could
    be scored, a --fail-under mean is missed, --max-flagged exceeded, the flagged share rose against
    --baseline or, with any gate, a record invalid or not scored (beyond --allow-unscored) or an id on two
    records; 2 on a usage error; 130 when interrupted (Ctrl-C)."""
    from tracescore.score import check_judge
    from tracescore.score._baseline import Baseline
    from tracescore.score._batch import InputRefused, Source, score_file
    from tracescore.score._inputs import parse_column_map
    from tracescore.score._summary import parse_fail_under, parse_max_flagged, parse_share

    written = {"out": out_path, "report": report_path, "junit": junit_path, "summary-json": summary_json_path}
    _refuse_to_overwrite(input_path, **written)
    if baseline_path is not None:
        _refuse_to_overwrite(baseline_path, **written)
    gate = or_usage_error(parse_fail_under, fail_under)
    column_map = or_usage_error(parse_column_map, columns)
    flag_limit = or_usage_error(parse_max_flagged, max_flagged)
    # A share given as a percentage is echoed as one (`--max-flagged 60%`), not as the fraction it is read as.
    written = ((GateCondition.MAX_FLAGGED, max_flagged), (GateCondition.BASELINE, baseline_margin))
    percent = frozenset(c for c, text in written if text is not None and text.strip().endswith("%"))
    as_flag = partial(_as_flag, percent=percent)
    margin = (
        0.0 if baseline_margin is None else or_usage_error(parse_share, "--baseline-margin", baseline_margin)
    )
    if baseline_margin is not None and baseline_path is None:
        raise click.UsageError("--baseline-margin is the rise --baseline allows: add --baseline")
    the_judge, the_metrics = judge_and_metrics(judge, model, base_url, metrics, metric_config)
    scored = [m.name for m in the_metrics]
    if not_scored := sorted(set(gate) - set(scored)):
        named = "; ".join(_why_not_scored(name, scored, metric_config) for name in not_scored)
        raise click.UsageError(f"--fail-under: {named}")
    for flag, given in (("--max-flagged", flag_limit), ("--baseline", baseline_path)):
        if given is not None and FLAGGED_METRIC not in scored:
            raise click.UsageError(f"{flag} counts {FLAGGED_METRIC} flags: add it to --metrics")
    if allow_unscored is not None and not gate and flag_limit is None and baseline_path is None:
        raise click.UsageError(
            "--allow-unscored loosens a gate: add --fail-under, --max-flagged or --baseline"
        )
    or_usage_error(check_judge, the_metrics, the_judge)
    baseline = None
    if baseline_path is not None:
        try:
            baseline = Baseline.read(baseline_path, threshold)
        except ValueError as exc:
            raise click.ClickException(f"--baseline: {exc}") from None
    try:  # before --out is opened: a refused input leaves no empty scores file behind
        source = Source(input_path, sys.stdin.buffer)
    except InputRefused as exc:
        raise click.ClickException(str(exc)) from None
    if source.guessed:
        click.echo(f"reading {source.name} as {source.format} ({source.guessed})", err=True)
    collector = None
    if report_path:
        from tracescore.score._report import ReportCollector

        collector = ReportCollector(threshold=threshold)
    out = _open_output(out_path) if out_path else sys.stdout
    written_rows = 0

    def on_row(record: Any, row: dict[str, Any]) -> None:
        nonlocal written_rows
        written_rows += 1  # after the row's line is written: what an interrupted run kept
        if collector is not None:
            collector(record, row)

    try:
        summary = score_file(
            source,
            out,
            metrics=the_metrics,
            judge=the_judge,
            concurrency=concurrency,
            # A bar redrawn into a CI log is noise around the gate's lines: only a terminal gets it.
            progress=not no_progress and sys.stderr.isatty(),
            threshold=threshold,
            report=lambda line: click.echo(line, err=True),
            on_row=on_row,
            column_map=column_map,
        )
    except KeyboardInterrupt:
        click.echo(_interrupted(written_rows, source, out_path), err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        source.close()
        if out_path:
            out.close()
    said = summary.lines()  # and the JUnit file's output: what the log says, the comparison included
    for line in said:
        click.echo(line, err=True)
    if report_path and collector is not None:
        from tracescore.score._report import render_report

        shown = source.name if source.is_stdin else input_path.name
        html = render_report(collector, threshold=threshold, title=f"tracescore report: {shown}")
        _write_text(report_path, html)
        click.echo(f"report: {report_path}", err=True)
    checks, status = [Check(ANYTHING_SCORED)], 0
    if not summary.anything_scored:
        # Unreadable lines are reported above; a judge's failures are only in the rows: the first said here.
        # An LLM judge's address is the first thing to rule out when every call failed.
        address = getattr(the_judge, "base_url", None)
        at = f" (judge {the_judge.name} at {address})" if address else ""
        if summary.first_unscored:
            why = f"; the first reason: {summary.first_unscored}{at}"
        elif summary.records:
            why = " (see the reasons above)"
        else:
            why = _HOLDS_NO_RECORD
        checks, status = [Check(ANYTHING_SCORED, f"nothing could be scored in {source.name}{why}")], 1
    else:
        # Passed only when given: the gate's own default (none allowed) is the one rule, the library's too.
        allowance = {} if allow_unscored is None else {"allow_unscored": allow_unscored}
        failures = summary.gate_failures(
            gate, flag_limit, **allowance, baseline=baseline, baseline_margin=margin
        )
        if baseline is not None and GateCondition.BASELINE not in {f.condition for f in failures}:
            said.append(f"  {baseline.compare(summary.flags).words()}")  # a FAIL line says it else
            click.echo(said[-1], err=True)
        for failure in failures:
            click.echo(f"FAIL {failure.words(as_flag)}", err=True)
        checks += _gate_checks(
            gate, flag_limit, allow_unscored or 0, baseline is not None, margin, failures, percent
        )
        status = EXIT_GATE_FAILED if failures else 0
    comparison = baseline.compare(summary.flags) if baseline is not None else None
    if junit_path is not None:
        _write_bytes(junit_path, junit_xml(source.name, checks, said))
    if summary_json_path is not None:
        document = summary_json(source.name, summary, checks, exit_status=status, comparison=comparison)
        _write_text(summary_json_path, json.dumps(document, indent=2) + "\n")
    if not summary.anything_scored:
        _nothing_in(source.name, "scored", why)
    if status:
        sys.exit(status)


def _gate_checks(
    gate: dict[str, float],
    flag_limit: float | None,
    allow_unscored: int,
    with_baseline: bool,
    margin: float,
    failures: list[GateFailure],
    percent: frozenset[GateCondition],
) -> list[Check]:
    """The gate's conditions, each named as its flag says it (the baseline's by what it checks), with its
    failure's words where it failed; `percent`: the conditions given as a percentage."""
    conditions: list[tuple[GateCondition, float, str | None]] = [
        (GateCondition.FAIL_UNDER, minimum, metric) for metric, minimum in gate.items()
    ]
    if flag_limit is not None:
        conditions.append((GateCondition.MAX_FLAGGED, flag_limit, FLAGGED_METRIC))
    if with_baseline:
        conditions.append((GateCondition.BASELINE, margin, FLAGGED_METRIC))
    if conditions:  # any gate: the records it could not judge, and the ids read twice
        conditions += [
            (GateCondition.ALLOW_UNSCORED, allow_unscored, None),
            (GateCondition.UNIQUE_IDS, 1, None),
        ]
    failed = {(f.condition, f.metric): f for f in failures}
    as_flag = partial(_as_flag, percent=percent)
    checks = []
    for condition, limit, metric in conditions:
        failure = failed.get((condition, metric))
        checks.append(
            Check(
                _case_name(condition, limit, metric, percent),
                None if failure is None else failure.words(as_flag),
            )
        )
    return checks


@click.command(short_help="Rebuild the HTML report of a `tracescore score` output.")
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
    help="The scored input file, to show queries, answers and contexts (joined by line number; an error "
    "where it is not the file scored: another count of records, an input line with another id or label).",
)
@_column_option("--records' column")
@threshold_option("the page's tables and counts")
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    default=50,
    show_default=True,
    help="Records listed in each table of the page.",
)
def report(
    scores_path: Path,
    out_path: Path,
    records_path: Path | None,
    columns: tuple[str, ...],
    threshold: float | None,
    rows: int,
) -> None:
    """Rebuild the HTML report from the JSONL that `tracescore score` wrote, without re-scoring."""
    from tracescore.score._inputs import parse_column_map
    from tracescore.score._report import ReportCollector, read_scores, render_report

    _refuse_to_overwrite(scores_path, out=out_path)
    if records_path is not None:
        _refuse_to_overwrite(records_path, out=out_path)
    column_map = or_usage_error(parse_column_map, columns)
    if column_map and records_path is None:
        raise click.UsageError("--column says how to read --records: add it")
    collector = ReportCollector(threshold=threshold, limit=rows)
    try:
        for record, row in read_scores(scores_path, records_path, column_map):
            collector(record, row)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    if not collector.records:
        _nothing_in(str(scores_path), "reported", _HOLDS_NO_RECORD)  # not an empty page that exits 0
    html = render_report(collector, threshold=threshold, title=f"tracescore report: {scores_path.name}")
    _write_text(out_path, html)
    click.echo(f"{counted(collector.records, 'record')}; report: {out_path}", err=True)


def _interrupted(rows: int, source: Source, out_path: Path | None) -> str:
    """The line a run stopped by Ctrl-C ends with: the rows it wrote of the input's, where, and what they are
    good for (each row written is whole, the first records' in input order; no summary, no gate)."""
    from tracescore.score._batch import count_rows

    of = f"{source.name}'s records"
    if not source.is_stdin:
        # A second Ctrl-C while counting, or the file gone: the total is left out.
        with contextlib.suppress(KeyboardInterrupt, OSError):
            of = f"{count_rows(source.path)} records"
    where = f"{out_path} holds" if out_path else "stdout got"
    return (
        f"interrupted after {rows} of {of}: {where} their rows, whole and in input order (usable, but "
        "incomplete: no summary and no gate)"
    )


# Why nothing could be done with a file that was read: `score`'s input, `report`'s scores.
_HOLDS_NO_RECORD = ": it holds no record (an empty file, blank lines or a header alone)"


def _nothing_in(name: str, done: str, why: str) -> NoReturn:
    """Exit 1 saying nothing could be `done` with the input `name`d (a path, stdin), and `why`."""
    click.echo(f"Error: nothing could be {done} in {name}{why}", err=True)  # as click says its own
    sys.exit(EXIT_GATE_FAILED)


def _why_not_scored(name: str, scored: list[str], metric_config: Path | None) -> str:
    """Why `--fail-under` names a metric that is not scored: one --metrics leaves out (a metric it knows:
    `quality`, not "unknown metric 'quality'"), or a name that is no metric (a typo, with the one meant)."""
    from tracescore.score import make_metrics

    try:
        make_metrics([name], metric_config)
    except ValueError:
        return f"{unknown_name('metric', name, scored)}: it gates the metrics --metrics scores"
    return f"{name!r} is not among the metrics scored ({', '.join(scored)}): add it to --metrics"


def _refuse_to_overwrite(read: Path, **written: Path | None) -> None:
    """A usage error when a file the command writes is one it reads: opened for writing, the golden set was
    emptied before it was read, and the run said it held no record."""
    for flag, path in written.items():
        if path is not None and path.exists() and read.exists() and path.samefile(read):
            raise click.UsageError(
                f"--{flag} {path} is {read}, a file read: writing it would erase it before it is read"
            )


def _as_flag(failure: GateFailure, percent: frozenset[GateCondition]) -> str:
    """The failed condition as the flag that set it (`--fail-under faithfulness=0.8`): the library's
    parameter, written as an option (the gate's words are the library's, `str(failure)`)."""
    return _flag_words(failure.condition, failure.limit, failure.metric, percent)


def _flag_words(
    condition: GateCondition, limit: float, metric: str | None, percent: frozenset[GateCondition]
) -> str:
    if condition is GateCondition.UNIQUE_IDS:
        return "ids read once"  # no flag sets it: every gate checks it
    value = _limit_words(condition, limit, percent)
    if condition is GateCondition.FAIL_UNDER:
        value = f"{metric}={value}"
    return f"--{condition.replace('_', '-')} {value}"


def _case_name(
    condition: GateCondition, limit: float, metric: str | None, percent: frozenset[GateCondition]
) -> str:
    """A JUnit case's name (and the JSON's check's): what a CI page lists as a test. The baseline's says what
    it checks, as "records scored" and "ids read once" do (its flag alone, `--baseline-margin 0`, read as a
    test of the margin); the others are their flags, as given."""
    if condition is GateCondition.BASELINE:
        by = _limit_words(condition, limit, percent)
        return f"{metric} flagged share not above the baseline's by more than {by}"
    return _flag_words(condition, limit, metric, percent)


def _limit_words(condition: GateCondition, limit: float, percent: frozenset[GateCondition]) -> str:
    """A condition's limit as given: a percentage (`60%`) where it was given as one, else the number."""
    return f"{limit * 100:g}%" if condition in percent else f"{limit:g}"


def _open_output(path: Path) -> Any:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None


def _write_text(path: Path, text: str) -> None:
    with _open_output(path) as handle:
        handle.write(text)


def _write_bytes(path: Path, data: bytes) -> None:
    _write_text(path, data.decode("utf-8"))
