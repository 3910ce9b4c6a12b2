"""`tracescore score`: score a file of RAG records. Every input record yields exactly one output line.

Files are read as bytes and decoded line by line, so one line that is not UTF-8 is reported by number
instead of stopping the run; a UTF-8 byte-order mark is dropped. CSV (`.csv`) and TSV (`.tsv`) records
may span lines inside quotes, but a record that spans lines *and* has the wrong number of fields is an
unbalanced quote: each line it swallowed gets its own error line, so N records in give N lines out.
"""

from __future__ import annotations

import asyncio
import csv
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from tqdm import tqdm

from tracescore._plural import counted
from tracescore.model import RagRecord
from tracescore.score._evaluate import evaluate_reads, result_row
from tracescore.score._inputs import COLUMN_OPTION, ReadRow, read_row
from tracescore.score._summary import BatchSummary
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._protocol import Metric, needing_contexts

__all__ = ["BatchSummary", "Decoded", "RowCallback", "read_records", "score_file"]

_log = logging.getLogger("tracescore.score")

# Receives each input record (None for an invalid line) with its output row, e.g. to build a report
# that needs the texts without writing them to the JSONL.
RowCallback = Callable[[RagRecord | None, dict[str, Any]], None]


@dataclass(frozen=True)
class _Line:
    number: int
    read: ReadRow


def read_records(path: Path, column_map: Mapping[str, str] | None = None) -> Iterator[_Line]:
    """Records from JSONL (one object per line), CSV or TSV (contexts as a JSON or Python list, or one
    string); the format comes from the file suffix. `column_map` as the library's, given with `--column`."""
    suffix = path.suffix.lower()
    with path.open("rb") as handle:
        lines = Decoded(handle)
        if suffix in (".csv", ".tsv"):
            rows = _table_rows(lines, "\t" if suffix == ".tsv" else ",")
        else:
            rows = _jsonl_rows(lines)
        for number, row, error in rows:
            yield _Line(
                number,
                ReadRow(None, error) if error is not None else read_row(row, column_map, COLUMN_OPTION),
            )


class Decoded:
    """Text lines of a binary file; `bad` holds the numbers of lines that were not valid UTF-8."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self.number = 0
        self.bad: dict[int, str] = {}

    def __iter__(self) -> Iterator[str]:
        for raw in self._handle:
            self.number += 1
            try:
                text = raw.decode("utf-8-sig" if self.number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                self.bad[self.number] = f"not valid UTF-8 (byte {exc.start + 1} of the line)"
                text = raw.decode("utf-8", errors="replace")
            yield text


def _jsonl_rows(lines: Decoded) -> Iterator[tuple[int, Any, str | None]]:
    for line in lines:
        number = lines.number
        if number in lines.bad:
            yield number, None, lines.bad[number]
        elif not line.strip():
            continue
        else:
            try:
                yield number, json.loads(line), None
            except json.JSONDecodeError as exc:
                yield number, None, f"not JSON: {exc.msg} at column {exc.colno}"


def _table_rows(lines: Decoded, delimiter: str) -> Iterator[tuple[int, Any, str | None]]:
    # strict: a quote that closes early (`"Where is it?,...` then a quote on a later line) is an error
    # instead of text silently merged with the next record.
    reader = csv.reader(iter(lines), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        yield reader.line_num, None, f"the header line is not valid CSV: {exc}"
        return
    if header is None:
        return
    header = [h.strip() for h in header]
    last = reader.line_num
    while True:
        problem = None
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            fields, problem = [], str(exc)
        first, last = last + 1, reader.line_num
        span = range(first, last + 1)
        bad = [lines.bad[n] for n in span if n in lines.bad]
        if problem is None and (
            not fields or (len(fields) == 1 and not fields[0].strip() and len(span) == 1)
        ):
            continue  # a blank line
        if bad:
            for number in span:
                yield number, None, lines.bad.get(number, f"part of the record at line {first}: {bad[0]}")
            continue
        if problem is None and len(fields) != len(header):
            problem = f"expected {counted(len(header), 'field')}, got {len(fields)}"
        if problem is None:
            yield first, dict(zip(header, fields, strict=True)), None
            continue
        if len(span) > 1:
            problem = f"unbalanced quote: the record runs from line {first} to {last} ({problem})"
        for number in span:
            yield number, None, problem


def score_file(
    source: Path,
    out: TextIO,
    *,
    metrics: Sequence[Metric],
    judge: Judge,
    concurrency: int = 8,
    progress: bool = True,
    threshold: float | None = None,
    report: Callable[[str], None] | None = None,
    on_row: RowCallback | None = None,
    column_map: Mapping[str, str] | None = None,
) -> BatchSummary:
    """Score `source` into `out`, rows in input order, its columns read through `column_map` (fields to
    column names). `report` receives one line per invalid input line (default: the log); `on_row` receives
    (record, row) for every output row."""
    report = report or _log.warning
    names = [m.name for m in metrics]
    summary = BatchSummary(threshold=threshold, needs_contexts=needing_contexts(metrics))

    async def run() -> None:
        with tqdm(desc="scoring", unit="rec", disable=not progress) as bar:
            scored = evaluate_reads(
                read_records(source, column_map),
                metrics,
                judge,
                lambda line: line.read,
                concurrency=concurrency,
                ordered=True,
            )
            async for line, results in scored:
                read = line.read
                summary.add(
                    results,
                    metric_names=names,
                    where=f"line {line.number}",
                    error=read.error,
                    no_contexts=read.no_contexts,
                    record_id=read.record.id if read.record else None,
                )
                if read.error is not None:
                    report(f"{source} line {line.number}: {read.error}")
                extra: dict[str, Any] = {"line": line.number}
                if read.label is not None:
                    extra["label"] = read.label
                row = result_row(read.record, names, results, error=read.error, extra=extra)
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                if on_row is not None:
                    on_row(read.record, row)
                bar.update()

    asyncio.run(run())
    return summary
