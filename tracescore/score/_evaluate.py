"""The one record-scoring routine behind the library, `tracescore score` and the consumer.

`evaluate_many` scores a stream of items with at most `concurrency` records in flight and yields each
item's results as they complete (or in input order); it keeps no state between calls, so a long-running
service can call it per batch from its own event loop. `evaluate` / `evaluate_dataset` are the notebook
and pipeline entry points built on it, sync (safe inside a running event loop, e.g. Jupyter) and async.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
from collections import deque
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tracescore.model import MetricResult, RagRecord
from tracescore.score._factory import DEFAULT_METRICS, make_metrics
from tracescore.score._inputs import InputError, ReadRow, iter_inputs, read_row
from tracescore.score._summary import BatchSummary
from tracescore.score.judges._protocol import Judge, unanswerable
from tracescore.score.metrics._protocol import (
    Metric,
    UsesContexts,
    contexts_use,
    evaluate_record,
    needing_contexts,
)

__all__ = [
    "EvaluationResult",
    "IncompatibleJudge",
    "aevaluate",
    "aevaluate_dataset",
    "check_judge",
    "evaluate",
    "evaluate_dataset",
    "evaluate_many",
    "evaluate_read",
    "evaluate_reads",
    "result_row",
]

T = TypeVar("T")
R = TypeVar("R")
DEFAULT_CONCURRENCY = 8


class IncompatibleJudge(ValueError):
    """A metric needs a kind of judgement the judge cannot give (free-form criteria to the offline judge)."""


def check_judge(metrics: Sequence[Metric], judge: Judge) -> None:
    """Refuse, before any record is scored, metrics whose tasks `judge` cannot answer."""
    refused = unanswerable(judge, metrics)
    if refused:
        names = ", ".join(sorted(refused))
        raise IncompatibleJudge(
            f"metric(s) {names} need an LLM judge: the {judge.name} judge cannot answer free-form "
            "criteria; use --judge openai (in Python: OpenAIJudge()) or drop them from the metrics"
        )


async def evaluate_many(
    items: Iterable[T] | AsyncIterable[T],
    metrics: Sequence[Metric],
    judge: Judge,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    ordered: bool = False,
    record_of: Callable[[T], RagRecord | None] | None = None,
) -> AsyncIterator[tuple[T, list[MetricResult] | None]]:
    """(item, results) for every item, with at most `concurrency` records scored at once.

    `record_of` picks the RagRecord out of an item (default: the item is one); an item it gives None for
    is passed through with results None, in its place (an input the caller could not read). Anything else
    is a TypeError naming the item: rows and dicts are read by `evaluate_dataset` (an unreadable one gets a
    row with the reason) or `evaluate` (it raises `InputError`). Results come as they complete, or in input
    order with `ordered=True`. Items are pulled lazily, so memory is bounded by `concurrency` whatever the
    stream's length; closing the iterator cancels what is in flight.
    """
    pick: Callable[[T], object] = record_of or (lambda item: item)
    positions = itertools.count()

    def read_of(item: T) -> ReadRow:
        record, position = pick(item), next(positions)
        if record is not None and not isinstance(record, RagRecord):
            given = "record_of" if record_of else "the item"
            raise TypeError(
                f"evaluate_many: {given} gave a {type(record).__name__} for item {position}, expected a "
                "RagRecord or None (None: not scored, results None); rows and dicts are read by "
                "evaluate_dataset or evaluate"
            )
        return ReadRow(record)

    async with contextlib.aclosing(
        evaluate_reads(items, metrics, judge, read_of, concurrency=concurrency, ordered=ordered)
    ) as scored:
        async for pair in scored:
            yield pair


async def evaluate_reads(
    items: Iterable[T] | AsyncIterable[T],
    metrics: Sequence[Metric],
    judge: Judge,
    read_of: Callable[[T], ReadRow],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    ordered: bool = False,
) -> AsyncIterator[tuple[T, list[MetricResult] | None]]:
    """`evaluate_many` for the readers of rows (`evaluate_dataset`, `tracescore score`): each item's row as
    read (`read_of`, called as the item is pulled), scored by `evaluate_read`; a row that could not be read
    has results None, its reason in the row for the caller to report."""
    check_judge(metrics, judge)
    limit = max(1, concurrency)

    async def one(item: T, read: ReadRow) -> tuple[T, list[MetricResult] | None]:
        return item, await evaluate_read(read, metrics, judge)

    source = _aiter(items)
    in_flight: deque[asyncio.Task[tuple[T, list[MetricResult] | None]]] = deque()
    exhausted = False
    try:
        while True:
            while not exhausted and len(in_flight) < limit:
                try:
                    item = await anext(source)
                except StopAsyncIteration:
                    exhausted = True
                    break
                in_flight.append(asyncio.ensure_future(one(item, read_of(item))))
            if not in_flight:
                return
            if ordered:
                yield await in_flight.popleft()
                continue
            done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
            for task in [t for t in in_flight if t in done]:
                in_flight.remove(task)
                yield task.result()
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)


async def evaluate_read(read: ReadRow, metrics: Sequence[Metric], judge: Judge) -> list[MetricResult] | None:
    """The results of a row as read (None when it could not be). A row with no contexts column is not judged
    by the metrics that need them: each is `not_applicable`, its reason the row's `no_contexts` (the column,
    the names looked for and how to map it: the gate's words too); one that reads them if present is scored
    from the rest, with that reason as a warning."""
    record = read.record
    if record is None:
        return None
    if read.no_contexts is None:
        return await evaluate_record(record, metrics, judge)
    uses = [contexts_use(m) for m in metrics]
    scored = iter(
        await evaluate_record(
            record, [m for m, use in zip(metrics, uses, strict=True) if use is not UsesContexts.NEEDED], judge
        )
    )
    results = []
    for metric, use in zip(metrics, uses, strict=True):
        if use is UsesContexts.NEEDED:
            results.append(MetricResult.not_applicable(metric.name, read.no_contexts, judge=judge.name))
            continue
        result = next(scored)
        if use is UsesContexts.IF_PRESENT:
            result.warnings.append(f"scored without the contexts: {read.no_contexts}")
        results.append(result)
    return results


async def _aiter(items: Iterable[T] | AsyncIterable[T]) -> AsyncIterator[T]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item


# --- rows: one per input, the same shape in the library and the CLI's JSONL -----------------------------


def result_row(
    record: RagRecord | None,
    metric_names: Sequence[str],
    results: Sequence[MetricResult] | None,
    *,
    error: str | None = None,
    extra: Mapping[str, Any] | None = None,
    row_id: str | None = None,
) -> dict[str, Any]:
    """`id` (the record's, or `row_id`, an unreadable input's id column), `extra` (e.g. the input line or
    label), one key per metric (score or None), `reason` (why a score is None) and `results` (every
    MetricResult as JSON)."""
    row: dict[str, Any] = {"id": record.id if record else row_id, **(extra or {})}
    row.update(dict.fromkeys(metric_names))  # an unreadable input still names every metric, as None
    reasons = []
    for result in results or ():
        row[result.metric] = result.score
        if result.score is None:
            reasons.append(f"{result.metric}: {result.reason}")
    if error is not None:
        reasons.append(f"invalid input: {error}")
    row["reason"] = "; ".join(reasons) or None
    row["results"] = {r.metric: r.model_dump(mode="json") for r in results or ()}
    return row


@dataclass
class EvaluationResult:
    """What `evaluate_dataset` returns: one row per input record, in input order, and the summary."""

    rows: list[dict[str, Any]]
    results: list[list[MetricResult] | None]
    summary: BatchSummary
    metrics: list[str] = field(default_factory=list)

    def means(self) -> dict[str, float | None]:
        return {m: self.summary.mean(m) for m in self.metrics}

    def to_pandas(self, *, with_results: bool = False) -> Any:
        """A DataFrame with one row per record (needs pandas; `results` column only if asked)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from None
        rows = (
            self.rows if with_results else [{k: v for k, v in r.items() if k != "results"} for r in self.rows]
        )
        return pd.DataFrame(rows)


@dataclass(frozen=True)
class _Input:
    position: int
    read: ReadRow


def _inputs(data: Any, column_map: Mapping[str, str] | None) -> Iterator[_Input]:
    for position, row in enumerate(iter_inputs(data)):
        yield _Input(position, read_row(row, column_map))


def _setup(metrics: Sequence[Metric | str] | None, judge: Judge | None) -> tuple[list[Metric], Judge]:
    if judge is None:
        from tracescore.score.judges._offline import OfflineJudge

        judge = OfflineJudge()
    names = [m for m in metrics or DEFAULT_METRICS if isinstance(m, str)]
    built = iter(make_metrics(names)) if names else iter(())
    resolved = [next(built) if isinstance(m, str) else m for m in metrics or DEFAULT_METRICS]
    check_judge(resolved, judge)
    return resolved, judge


async def aevaluate_dataset(
    data: Any,
    metrics: Sequence[Metric | str] | None = None,
    judge: Judge | None = None,
    *,
    column_map: Mapping[str, str] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    threshold: float | None = None,
    progress: bool = False,
) -> EvaluationResult:
    """Score many records: RagRecords, dicts (tracescore, RAGAS or DeepEval names; `column_map` for
    others), an iterable of them or a pandas DataFrame. Default metrics: faithfulness, answer relevancy and
    context relevance; default judge: the offline judge. An unreadable record gets a row with the reason."""
    resolved, the_judge = _setup(metrics, judge)
    names = [m.name for m in resolved]
    inputs = list(_inputs(data, column_map))
    by_position: list[list[MetricResult] | None] = [None] * len(inputs)
    from tqdm.auto import tqdm

    with tqdm(total=len(inputs), desc="scoring", unit="rec", disable=not progress) as bar:
        async for item, results in evaluate_reads(
            inputs, resolved, the_judge, lambda i: i.read, concurrency=concurrency
        ):
            by_position[item.position] = results
            bar.update()
    summary = BatchSummary(threshold=threshold, needs_contexts=needing_contexts(resolved))
    rows = []
    for item, results in zip(inputs, by_position, strict=True):
        read = item.read
        where = f"rows[{item.position}]"
        summary.add(
            results,
            metric_names=names,
            where=where,
            error=read.error,
            no_contexts=read.no_contexts,
            record_id=read.record_id,
        )
        extra = {} if read.label is None else {"label": read.label}
        rows.append(
            result_row(read.record, names, results, error=read.error, extra=extra, row_id=read.record_id)
        )
    return EvaluationResult(rows=rows, results=by_position, summary=summary, metrics=names)


def evaluate_dataset(
    data: Any,
    metrics: Sequence[Metric | str] | None = None,
    judge: Judge | None = None,
    **options: Any,
) -> EvaluationResult:
    """`aevaluate_dataset` for synchronous code; also works inside a running event loop (a notebook)."""
    return run_sync(lambda: aevaluate_dataset(data, metrics, judge, **options))


async def aevaluate(
    record: RagRecord | Mapping[str, Any],
    metrics: Sequence[Metric | str] | None = None,
    judge: Judge | None = None,
    *,
    column_map: Mapping[str, str] | None = None,
) -> list[MetricResult]:
    """Every metric's result for one record (a RagRecord or a dict), judge calls shared between metrics; a
    dict without a contexts column is not judged by the metrics that need them (see `evaluate_read`)."""
    resolved, the_judge = _setup(metrics, judge)
    read = read_row(record, column_map)
    results = await evaluate_read(read, resolved, the_judge)
    if results is None:
        raise InputError(read.error)
    return results


def evaluate(
    record: RagRecord | Mapping[str, Any],
    metrics: Sequence[Metric | str] | None = None,
    judge: Judge | None = None,
    *,
    column_map: Mapping[str, str] | None = None,
) -> list[MetricResult]:
    """`aevaluate` for synchronous code; also works inside a running event loop (a notebook)."""
    return run_sync(lambda: aevaluate(record, metrics, judge, column_map=column_map))


def run_sync(make: Callable[[], Awaitable[R]]) -> R:
    """Run a coroutine to completion from sync code. Inside a running loop (Jupyter) it runs on a fresh
    loop in a worker thread: blocking the caller's loop on itself would deadlock."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(make))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tracescore") as pool:
        return pool.submit(lambda: asyncio.run(_await(make))).result()


async def _await(make: Callable[[], Awaitable[R]]) -> R:
    return await make()
