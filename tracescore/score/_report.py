"""`tracescore score --report` and `tracescore report`: a self-contained HTML page summarising a scored batch.

Memory stays bounded on large batches: every score is kept (histograms, medians), but texts are kept only
for the worst `limit` records (a heap) and the first `limit` unscored ones. A record is flagged as
`is_flagged` reads its results: a bad label (Faithfulness' label rule), or a score below the threshold
when one is set. When
rows carry a `label` (faithful/hallucinated, pass/fail, ...), the page adds a confusion matrix and the
balanced accuracy of "rank metric flagged" against it. One small inline script sorts, filters and searches
the tables; the page stays one file with no external resource.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from tracescore._plural import counted
from tracescore.model import UNLABELLED_THRESHOLD, RagRecord, is_flagged, label_is_bad
from tracescore.score._baseline import share_interval
from tracescore.score._inputs import ReadRow
from tracescore.score._report_views import (
    RANK_METRIC,
    VERDICT_SEVERITY,
    Kept,
    css,
    histogram,
    kept,
    record_view,
    snippet,
)
from tracescore.score._summary import FLAGGED_METRIC, is_long_offline, long_answers_note

__all__ = ["ReportCollector", "read_scores", "render_report"]

DEFAULT_TITLE = "tracescore report"
_UNREAD_LABELS_SHOWN = 3
_NOT_METRICS = frozenset({"id", "line", "reason", "results", "query", "answer", "contexts", "label"})


class ReportCollector:
    """`score_file(on_row=...)` callback; also built from plain JSONL rows by `render_report`."""

    def __init__(
        self, *, threshold: float | None = None, limit: int = 50, rank_metric: str = RANK_METRIC
    ) -> None:
        self.threshold = threshold
        self.limit = limit
        self.rank_metric = rank_metric
        self.records = 0
        self.invalid = 0
        self.metrics: list[str] = []  # in first-seen order, so columns follow the CLI's --metrics
        self.scores: dict[str, list[float]] = {}
        self.unscored: dict[str, Counter[str]] = {}
        self.flagged: Counter[str] = Counter()  # metric -> records it flags
        self.flagged_records = 0  # records flagged by at least one metric
        self.unscored_total = 0
        self.unscored_kept: list[Kept] = []
        # (label says bad, rank metric flags it) -> records; only rows with a readable label and a score.
        self.confusion: Counter[tuple[bool, bool]] = Counter()
        self.unlabelled = 0
        # The first values of the label column read neither as good nor bad ("yes", "no"): the page names
        # them, or a column of them would leave no confusion matrix and no word of why.
        self.unread_labels: list[str] = []
        # Faithfulness scores the offline judge gave long answers: the summary's note, when most are.
        self.long_offline = 0
        self._worst: list[tuple[tuple[float, ...], int, Kept]] = []  # max-heap on the negated rank key
        self._seq = itertools.count()

    def __call__(self, record: RagRecord | None, row: Mapping[str, Any]) -> None:
        self.records += 1
        results = row.get("results") or {}
        if not results and str(row.get("reason") or "").startswith("invalid input"):
            self.invalid += 1
        scores = {k: v for k, v in row.items() if _is_metric(k, v)}
        flags: dict[str, bool] = {}
        for name, score in scores.items():
            if name not in self.scores:
                self.metrics.append(name)
                self.scores[name] = []
                self.unscored[name] = Counter()
            if score is not None:
                self.scores[name].append(float(score))
                flags[name] = is_flagged(_result(results, name, score), self.threshold)
                self.flagged[name] += flags[name]
                if name == FLAGGED_METRIC and isinstance(result := results.get(name), Mapping):
                    self.long_offline += is_long_offline(result)
            elif name in results:  # an invalid line has no result: it is counted as invalid, not here
                self.unscored[name][(results[name] or {}).get("reason") or "no reason given"] += 1
        self._count_label(row.get("label"), scores.get(self.rank_metric), flags.get(self.rank_metric, False))
        present = [float(v) for v in scores.values() if v is not None]
        if present:
            self.flagged_records += any(flags.values())
            self._keep_if_worst(record, row, scores, min(present), any(flags.values()))
        if any(v is None for v in scores.values()) or not scores:
            self.unscored_total += 1
            if len(self.unscored_kept) < self.limit:
                view = kept(record, row, scores)
                view.contexts = []  # the unscored table shows the reason, not the context
                self.unscored_kept.append(view)

    def _count_label(self, label: Any, score: Any, flagged: bool) -> None:
        if label is None:
            return
        truth = label_is_bad(label)
        if (
            truth is None
            and len(self.unread_labels) < _UNREAD_LABELS_SHOWN
            and str(label) not in self.unread_labels
        ):
            self.unread_labels.append(str(label))
        if truth is None or score is None:
            self.unlabelled += 1
            return
        self.confusion[(truth, flagged)] += 1

    def _keep_if_worst(
        self,
        record: RagRecord | None,
        row: Mapping[str, Any],
        scores: Mapping[str, Any],
        lowest: float,
        flagged: bool,
    ) -> None:
        rank = scores.get(self.rank_metric)
        # Flagged records first, then by the rank metric, lowest first.
        key = (
            0.0 if flagged else 1.0,
            2.0 if rank is None else float(rank),
            lowest,
            float(row.get("line") or 0),
        )
        view = kept(record, row, scores)
        view.flagged = flagged
        entry = (tuple(-k for k in key), next(self._seq), view)
        if len(self._worst) < self.limit:
            heapq.heappush(self._worst, entry)
        elif entry[0] > self._worst[0][0]:  # lower rank key than the best of the kept worst
            heapq.heapreplace(self._worst, entry)

    def worst(self) -> list[Kept]:
        """Kept worst records, flagged first, then lowest rank-metric score first."""
        return [view for _, _, view in sorted(self._worst, key=lambda e: (tuple(-k for k in e[0]), e[1]))]

    @classmethod
    def from_rows(
        cls, rows: Iterable[Mapping[str, Any]], *, threshold: float | None = None, limit: int = 50
    ) -> ReportCollector:
        """Rows as written to the JSONL, optionally carrying `query`, `answer` and `contexts`."""
        collector = cls(threshold=threshold, limit=limit)
        for row in rows:
            collector(None, row)
        return collector


def _result(results: Mapping[str, Any], name: str, score: Any) -> Mapping[str, Any]:
    """The row's score with the label of the metric's result, when the row has one."""
    result = results.get(name)
    return {"score": score, "label": result.get("label") if isinstance(result, Mapping) else None}


def read_scores(
    scores: Path, records: Path | None = None, column_map: Mapping[str, str] | None = None
) -> Iterator[tuple[RagRecord | None, dict[str, Any]]]:
    """(record, row) for each row of a `tracescore score` JSONL; with `records` (the scored input file, its
    columns read through `column_map` as `score` read them) each row gets its record by line number, for the
    texts. ValueError names a line that is not a row, or where `records` is not the file that was scored:
    another count of records, or a row whose input line holds another id or label (`_joined`)."""
    from tracescore.score._batch import Decoded, read_records

    reads: dict[int, ReadRow] = {}
    if records is not None:
        reads = {line.number: line.read for line in read_records(records, column_map)}
    rows = scored = 0
    with scores.open("rb") as handle:
        lines = Decoded(handle)
        for text in lines:
            number = lines.number
            if number in lines.bad:  # a binary file: said by line, as `tracescore score` says it
                raise ValueError(
                    f"{scores} line {number}: {lines.bad[number]}; is it a `tracescore score` output?"
                )
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"{scores} line {number}: not JSON ({exc.msg}); is it a `tracescore score` output?"
                ) from None
            if not isinstance(row, dict):
                raise ValueError(f"{scores} line {number}: expected a JSON object")
            rows, scored = rows + 1, scored + ("results" in row)  # every row score writes has results
            if records is None:
                yield None, row
                continue
            read = _joined(row, reads, f"{scores} line {number}", records)
            yield read.record, row
    if rows and not scored:
        # The input file given for the scores: a page of unscored records, said to be a batch that failed.
        lines = counted(rows, "line")
        raise ValueError(
            f"{scores}: none of its {lines} is a `tracescore score` output row (no `results`); is it "
            "the scored input? Give what `tracescore score --out` wrote, and the input with --records"
        )
    if records is not None and rows != len(reads):
        # `score` writes one row per record read (an invalid one too): another count is another file.
        raise ValueError(
            f"{records} holds {counted(len(reads), 'record')} (invalid ones included) but {scores} "
            f"{counted(rows, 'row')}{_NOT_THE_SCORED}"
        )


_NOT_THE_SCORED = (
    ": is it the file these scores were made from? Give it with --records, with the --column options the "
    "scores were made with"
)


def _joined(row: Mapping[str, Any], reads: Mapping[int, ReadRow], where: str, records: Path) -> ReadRow:
    """The input line of `row` (at `where`) in `reads` (read from `records`), checked to be the one scored:
    the row repeats the record's id (None where the record has none or could not be read) and its label
    column (left out where none), so where they differ the rows and the records are of different files."""
    line = row.get("line")
    if not isinstance(line, int) or isinstance(line, bool):
        raise ValueError(f"{where}: the row has no input line number to join {records} by{_NOT_THE_SCORED}")
    read = reads.get(line)
    if read is None:
        raise ValueError(
            f"{where} is the row of input line {line}, but {records} has no record there (it holds "
            f"{counted(len(reads), 'record')}){_NOT_THE_SCORED}"
        )
    carried = {"id": row.get("id"), "label": row.get("label")}
    held = {"id": read.record_id, "label": read.label}
    for name, value in carried.items():
        if json.dumps(value) != json.dumps(held[name]):  # as the row wrote it: a NaN label is equal too
            raise ValueError(
                f"{where} is the row of input line {line}, {_named(name, value)}, but {records} line {line} "
                f"holds {_named(name, held[name])}{_NOT_THE_SCORED}"
            )
    return read


def _named(name: str, value: Any) -> str:
    return f"no {name}" if value is None else f"{name} {json.dumps(value, ensure_ascii=False)}"


def _confusion_view(collector: ReportCollector) -> dict[str, Any] | None:
    counts = collector.confusion
    if not counts and not collector.unlabelled:
        return None  # no row has a label
    tp, fn = counts[(True, True)], counts[(True, False)]
    tn, fp = counts[(False, False)], counts[(False, True)]
    tpr = tp / (tp + fn) if tp + fn else None
    tnr = tn / (tn + fp) if tn + fp else None
    rates = [r for r in (tpr, tnr) if r is not None]
    return {
        "metric": collector.rank_metric,
        "tp": tp,
        "fn": fn,
        "tn": tn,
        "fp": fp,
        "tpr": tpr,
        "tnr": tnr,
        "balanced_accuracy": sum(rates) / len(rates) if rates else None,
        "unlabelled": collector.unlabelled,
        "unread_labels": collector.unread_labels,
        "read": bool(counts),
    }


def _is_metric(key: str, value: Any) -> bool:
    if key in _NOT_METRICS or isinstance(value, bool):
        return False
    return value is None or isinstance(value, int | float)


def _metric_summary(collector: ReportCollector, name: str, threshold: float) -> dict[str, Any]:
    scores = collector.scores[name]
    below = collector.flagged[name]
    return {
        "name": name,
        "scored": len(scores),
        "unscored": sum(collector.unscored[name].values()),
        "reasons": collector.unscored[name].most_common(),
        "mean": statistics.fmean(scores) if scores else None,
        "median": statistics.median(scores) if scores else None,
        "below": below,
        "below_share": below / len(scores) if scores else None,
        "below_interval": share_interval(below, len(scores)),
        "histogram": histogram(scores, threshold),
    }


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(
        autoescape=True,  # every text in a record is untrusted: a <script> in an answer must render as text
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["counted"] = counted  # `{{ n | counted("row") }}`: 1 row, 2 rows, as everything else says
    source = resources.files("tracescore.score").joinpath("report.html.jinja").read_text(encoding="utf-8")
    return env.from_string(source)


def render_report(
    rows: Iterable[Mapping[str, Any]] | ReportCollector,
    *,
    threshold: float | None = None,
    title: str = DEFAULT_TITLE,
    limit: int = 50,
) -> str:
    """The report as one HTML page. `rows` is a `ReportCollector` fed by `score_file(on_row=...)`, or
    output rows (the JSONL), which may carry `query`/`answer`/`contexts` to show texts and highlights."""
    if isinstance(rows, ReportCollector):
        collector = rows
    else:
        collector = ReportCollector.from_rows(rows, threshold=threshold, limit=limit)
    metrics = collector.metrics
    # Scores are drawn against the caller's threshold, else the one unlabelled results are flagged at.
    shown = UNLABELLED_THRESHOLD if threshold is None else threshold
    worst = [k for k in collector.worst() if k.flagged]
    unscored = []
    for kept_record in collector.unscored_kept:
        view = record_view(kept_record, metrics, threshold)
        view.update(query=snippet(kept_record.query), answer=snippet(kept_record.answer))
        unscored.append(view)
    return _template().render(
        title=title,
        threshold=threshold,
        shown_threshold=shown,
        records=collector.records,
        invalid=collector.invalid,
        metrics=[_metric_summary(collector, m, shown) for m in metrics],
        long_answers=long_answers_note(collector.long_offline, len(collector.scores.get(FLAGGED_METRIC, []))),
        below_total=collector.flagged_records,
        worst=[record_view(k, metrics, threshold) for k in worst],
        unscored=unscored,
        unscored_total=collector.unscored_total,
        limit=collector.limit,
        rank_metric=RANK_METRIC if RANK_METRIC in metrics else None,
        confusion=_confusion_view(collector),
        verdicts=list(VERDICT_SEVERITY)[::-1],
        css=css,
    )
