"""`tracescore score`: score a file of RAG records. Every input line yields exactly one output line."""

from __future__ import annotations

import asyncio
import csv
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError
from tqdm import tqdm

from tracescore.score._types import MetricResult, RagRecord
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._protocol import Metric, evaluate

__all__ = ["BatchSummary", "RowCallback", "read_records", "score_file"]

_log = logging.getLogger("tracescore.score")

# Receives each input record (None for an invalid line) with its output row, e.g. to build a report
# that needs the texts without writing them to the JSONL.
RowCallback = Callable[[RagRecord | None, dict[str, Any]], None]


@dataclass
class BatchSummary:
    records: int = 0
    invalid: int = 0
    scored: dict[str, int] = field(default_factory=dict)
    unscored: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Line:
    number: int
    record: RagRecord | None
    error: str | None = None


def read_records(path: Path) -> Iterator[_Line]:
    """Records from JSONL (one object per line) or CSV (contexts as a JSON list or a single string)."""
    with path.open(encoding="utf-8", newline="") as handle:
        rows = _csv_rows(handle) if path.suffix.lower() == ".csv" else _jsonl_rows(handle)
        for number, row, error in rows:
            if error is not None:
                yield _Line(number, None, error)
                continue
            try:
                yield _Line(number, _to_record(row))
            except (ValidationError, TypeError, ValueError) as exc:
                yield _Line(number, None, _short_error(exc))


def _jsonl_rows(handle: TextIO) -> Iterator[tuple[int, Any, str | None]]:
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as exc:
            yield number, None, f"not JSON: {exc.msg} at column {exc.colno}"


def _csv_rows(handle: TextIO) -> Iterator[tuple[int, Any, str | None]]:
    for index, row in enumerate(csv.DictReader(handle), start=2):  # line 1 is the header
        contexts = row.get("contexts") or ""
        try:
            parsed = json.loads(contexts) if contexts.lstrip().startswith("[") else [contexts]
        except json.JSONDecodeError:
            parsed = [contexts]
        yield index, {**row, "contexts": parsed}, None


def _to_record(row: Any) -> RagRecord:
    if not isinstance(row, dict):
        raise TypeError(f"expected a JSON object, got {type(row).__name__}")
    contexts = row.get("contexts")
    if isinstance(contexts, str):
        contexts = [contexts]
    record_id = row.get("id")
    return RagRecord.model_validate(
        {
            "id": None if record_id is None else str(record_id),
            "query": row.get("query", row.get("question")),
            "contexts": tuple(contexts or ()),
            "answer": row.get("answer"),
        }
    )


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
    return str(exc)


def _output_row(line: _Line, metric_names: Sequence[str], results: Sequence[MetricResult]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": line.record.id if line.record else None, "line": line.number}
    row.update(dict.fromkeys(metric_names))  # an invalid line still names every metric, as null
    reasons = []
    for result in results:
        row[result.metric] = result.score
        if result.score is None:
            reasons.append(f"{result.metric}: {result.reason}")
    if line.error is not None:
        reasons.append(f"invalid input: {line.error}")
    row["reason"] = "; ".join(reasons) or None
    row["results"] = {r.metric: r.model_dump(mode="json") for r in results}
    return row


async def _scored(
    lines: Iterator[_Line], metrics: Sequence[Metric], judge: Judge, concurrency: int
) -> AsyncIterator[tuple[_Line, list[MetricResult]]]:
    """Results in input order, with at most `concurrency` records in flight (bounded memory)."""
    window: list[tuple[_Line, asyncio.Task[list[MetricResult]] | None]] = []

    async def none() -> list[MetricResult]:
        return []

    for line in lines:
        task = asyncio.ensure_future(evaluate(line.record, metrics, judge) if line.record else none())
        window.append((line, task))
        if len(window) >= concurrency:
            head, head_task = window.pop(0)
            yield head, await head_task if head_task else []
    for line, task in window:
        yield line, await task if task else []


def score_file(
    source: Path,
    out: TextIO,
    *,
    metrics: Sequence[Metric],
    judge: Judge,
    concurrency: int = 8,
    progress: bool = True,
    report: Callable[[str], None] | None = None,
    on_row: RowCallback | None = None,
) -> BatchSummary:
    """Score `source` into `out`. `report` receives one line per invalid input line (default: the log);
    `on_row` receives (record, row) for every output row, in input order."""
    report = report or _log.warning
    names = [m.name for m in metrics]
    summary = BatchSummary(scored={m.name: 0 for m in metrics}, unscored={m.name: 0 for m in metrics})

    async def run() -> None:
        with tqdm(desc="scoring", unit="rec", disable=not progress) as bar:
            async for line, results in _scored(read_records(source), metrics, judge, max(1, concurrency)):
                summary.records += 1
                if line.error is not None:
                    summary.invalid += 1
                    report(f"{source} line {line.number}: {line.error}")
                for result in results:
                    bucket = summary.scored if result.score is not None else summary.unscored
                    bucket[result.metric] += 1
                row = _output_row(line, names, results)
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                if on_row is not None:
                    on_row(line.record, row)
                bar.update()

    asyncio.run(run())
    return summary
