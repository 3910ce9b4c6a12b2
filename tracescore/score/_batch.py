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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from tqdm import tqdm

from tracescore._plural import counted
from tracescore.model import RagRecord
from tracescore.score._evaluate import evaluate_reads, result_row
from tracescore.score._inputs import COLUMN_OPTION, LABEL, ReadRow, read_row
from tracescore.score._summary import BatchSummary
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._protocol import Metric, needing_contexts

__all__ = [
    "STDIN",
    "BatchSummary",
    "Decoded",
    "Format",
    "InputRefused",
    "RowCallback",
    "Source",
    "count_rows",
    "read_records",
    "score_file",
]

_log = logging.getLogger("tracescore.score")

# Receives each input record (None for an invalid line) with its output row, e.g. to build a report
# that needs the texts without writing them to the JSONL.
RowCallback = Callable[[RagRecord | None, dict[str, Any]], None]


@dataclass(frozen=True)
class _Line:
    number: int
    read: ReadRow


# The input path that means standard input (a pipe from another tool), as Unix commands write it.
STDIN = Path("-")
# What a file starts with when it is not lines of records: each of its lines would be reported invalid, and
# none would say what the file is.
_GZIP_MAGIC = b"\x1f\x8b"
_SNIFFED_BYTES = 4096
_BLANK_START = b"\xef\xbb\xbf \t\r\n"  # a byte-order mark and blank lines before the first record


class Format(StrEnum):
    JSONL = "JSON Lines"
    CSV = "CSV"
    TSV = "TSV"


_BY_SUFFIX = {".csv": Format.CSV, ".tsv": Format.TSV}


class InputRefused(ValueError):
    """An input that is no lines of records (gzip-compressed, a JSON array): the message says what it is and
    the command that makes JSON Lines of it."""


class Source:
    """An input opened once, a file or standard input: its first bytes read to tell its format and refuse
    what is no table, the lines then read from where they left off (a pipe cannot be read twice)."""

    def __init__(self, path: Path, stdin: BinaryIO | None = None) -> None:
        self.path = path
        self.is_stdin = path == STDIN
        # As messages name it: `in.jsonl line 3`, `stdin line 3`.
        self.name = "stdin" if self.is_stdin else str(path)
        if self.is_stdin:
            if stdin is None:
                raise ValueError("reading - (standard input) needs the stream: pass stdin")
            self._handle, self._owned = stdin, False
        else:
            self._handle, self._owned = path.open("rb"), True
        try:
            self._head = self._handle.read(_SNIFFED_BYTES)
            self.format, self.guessed = self._format()
        except BaseException:
            self.close()
            raise

    def _format(self) -> tuple[Format, str | None]:
        """The format, and why when it was guessed: a file's comes from its suffix, standard input's from its
        first line (a JSON object: JSON Lines; else a header, TSV with a tab in it, else CSV)."""
        if self._head.startswith(_GZIP_MAGIC):
            how = _IN_THE_PIPE.format("gunzip") if self.is_stdin else f"(gunzip -k {self.path})"
            raise InputRefused(f"{self.name} is gzip-compressed: decompress it first {how}")
        start = self._head.lstrip(_BLANK_START)
        if start.startswith(b"[") and (self.is_stdin or self.path.suffix.lower() not in _BY_SUFFIX):
            jq = "jq -c '.[]'"
            how = (
                _IN_THE_PIPE.format(jq)
                if self.is_stdin
                else f"with {jq} {self.path} > {self.path.stem}.jsonl"
            )
            raise InputRefused(
                f"{self.name} holds a JSON array: tracescore score reads JSON Lines, one record a line; "
                f"convert it {how}, or in pandas with to_json(..., orient='records', lines=True)"
            )
        if not self.is_stdin:
            return _BY_SUFFIX.get(self.path.suffix.lower(), Format.JSONL), None
        if not start or start.startswith(b"{"):
            return Format.JSONL, "its first line is a JSON object" if start else None
        header = start.split(b"\n", 1)[0]
        return (Format.TSV, "its first line has a tab") if b"\t" in header else (Format.CSV, _NO_TAB)

    def lines(self) -> Iterator[bytes]:
        """The input's lines, as bytes, the first ones from the bytes read to tell the format."""
        first = self._head.splitlines(keepends=True)
        if first and not first[-1].endswith(b"\n"):
            first[-1] += self._handle.readline()  # the line the sniffed bytes cut
        yield from first
        yield from self._handle

    def close(self) -> None:
        if self._owned:
            self._handle.close()

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


_NO_TAB = "its first line is no JSON object and has no tab"
# How standard input is converted: in the pipe that feeds it.
_IN_THE_PIPE = "in the pipe (... | {} | tracescore score -)"


def read_records(source: Path | Source, column_map: Mapping[str, str] | None = None) -> Iterator[_Line]:
    """Records from JSONL (one object per line), CSV or TSV (contexts as a JSON or Python list, or one
    string); a file's format comes from its suffix, standard input's from its first line (`Source`).
    `column_map` as the library's, given with `--column`. InputRefused for what is no lines of records."""
    opened = source if isinstance(source, Source) else Source(source)
    with opened:
        lines = Decoded(opened.lines())
        if opened.format is Format.JSONL:
            rows = _jsonl_rows(lines)
        else:
            rows = _table_rows(lines, "\t" if opened.format is Format.TSV else ",")
        for number, row, error in rows:
            yield _Line(
                number,
                ReadRow(None, error) if error is not None else read_row(row, column_map, COLUMN_OPTION),
            )


def count_rows(path: Path) -> int:
    """The rows `score_file` writes for the file at `path`: one per record, valid or not, read as
    `read_records` reads them but without parsing the JSON (what an interrupted run's rows are counted
    against)."""
    with Source(path) as opened:
        lines = Decoded(opened.lines())
        if opened.format is Format.JSONL:
            return sum(1 for line in lines if line.strip())
        return sum(1 for _ in _table_rows(lines, "\t" if opened.format is Format.TSV else ","))


class Decoded:
    """Text lines of a binary file; `bad` holds the numbers of lines that were not valid UTF-8."""

    def __init__(self, handle: Iterable[bytes]) -> None:
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
    source: Path | Source,
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
    """Score `source` (a path, or a `Source`: standard input) into `out`, rows in input order, its columns
    read through `column_map` (fields to column names). `report` receives one line per invalid input line
    (default: the log); `on_row` receives (record, row) for every output row."""
    report = report or _log.warning
    name = source.name if isinstance(source, Source) else str(source)
    names = [m.name for m in metrics]
    summary = BatchSummary(threshold=threshold, needs_contexts=needing_contexts(metrics))
    labelled = False

    async def run() -> None:
        nonlocal labelled
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
                    record_id=read.record_id,
                )
                if read.error is not None:
                    report(f"{name} line {line.number}: {read.error}")
                extra: dict[str, Any] = {"line": line.number}
                if read.label is not None:
                    extra["label"] = read.label
                    labelled = True
                row = result_row(
                    read.record, names, results, error=read.error, extra=extra, row_id=read.record_id
                )
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                if on_row is not None:
                    on_row(read.record, row)
                bar.update()

    asyncio.run(run())
    mapped_label = (column_map or {}).get(LABEL)
    if mapped_label is not None and not labelled and summary.records:
        # Rows without the label column are unlabelled, not invalid: a misspelt column would go unnoticed.
        report(
            f"--column {LABEL}={mapped_label}: no record has a value in that column, so no row has a label"
        )
    return summary
