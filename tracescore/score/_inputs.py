"""Records from what users have: RagRecords, dicts (tracescore, RAGAS or DeepEval names), a DataFrame.

One field reader serves the library and the CLI's JSONL/CSV reader, so a column is understood the same way
everywhere: `contexts` may be a list, a JSON list, a Python list repr (what `pandas.to_csv` writes for a
list column) or a single string; an agent's `run` is the `Run` fields, as a mapping or JSON.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tracescore._config import unknown_name
from tracescore.model import RagRecord, Run

__all__ = [
    "COLUMN_OPTION",
    "FIELD_ALIASES",
    "LABEL",
    "MAPPED_FIELDS",
    "InputError",
    "MappedWith",
    "ReadRow",
    "iter_inputs",
    "parse_column_map",
    "parse_contexts",
    "read_row",
    "to_record",
]

# tracescore field -> column names recognised without a mapping, in order of preference.
FIELD_ALIASES: Mapping[str, tuple[str, ...]] = {
    "id": ("id", "record_id"),
    "query": ("query", "question", "user_input", "input"),  # RAGAS: user_input; DeepEval: input
    "contexts": ("contexts", "retrieved_contexts", "retrieval_context", "context", "documents"),
    "answer": ("answer", "response", "actual_output"),  # RAGAS: response; DeepEval: actual_output
}
# The row's label (whether its answer is good, for the report's confusion matrix): copied to the output row,
# never part of the record judged. Read from the column of that name, or the one `column_map` gives.
LABEL = "label"
ID = "id"
# What `column_map` and `--column` map: the record's fields and the label.
MAPPED_FIELDS: tuple[str, ...] = (*FIELD_ALIASES, LABEL)


class InputError(ValueError):
    """A record that cannot be read; the message is one line naming what is missing and how to map it."""


@dataclass(frozen=True)
class MappedWith:
    """How the caller maps columns to fields, as a message about a record names it: the library's
    `column_map` keyword or `tracescore score`'s `--column` option."""

    name: str
    written: Callable[[Mapping[str, str]], str]  # a mapping as the caller writes it


COLUMN_MAP = MappedWith("column_map", lambda mapping: f"column_map={dict(mapping)!r}")
COLUMN_OPTION = MappedWith(
    "--column", lambda mapping: " ".join(f"--column {field}={column}" for field, column in mapping.items())
)


def parse_column_map(specs: Sequence[str]) -> dict[str, str]:
    """`--column`'s `["query=question", ...]` -> {"query": "question"}: the mapping `column_map` takes (the
    fields and the label, MAPPED_FIELDS);
    ValueError naming the bad spec, an unknown field (with the one meant) or a field mapped twice."""
    parsed: dict[str, str] = {}
    for spec in specs:
        field, sep, column = (part.strip() for part in spec.partition("="))
        if not sep or not field or not column:
            raise ValueError(f"--column {spec!r}: expected FIELD=COLUMN, e.g. query=question")
        if field not in MAPPED_FIELDS:
            raise ValueError(f"--column {spec!r}: {unknown_name('field', field, MAPPED_FIELDS)}")
        if field in parsed:
            raise ValueError(f"--column {spec!r}: {field} is already mapped to {parsed[field]!r}")
        parsed[field] = column
    return parsed


def to_record(
    row: Any, column_map: Mapping[str, str] | None = None, mapped_with: MappedWith = COLUMN_MAP
) -> RagRecord:
    """A RagRecord from a RagRecord or a mapping. `column_map` maps tracescore fields to column names
    (`{"query": "prompt"}`; `label` too, read by `read_row`); without it the names in FIELD_ALIASES are
    recognised. A message about a column says how to map it as `mapped_with` writes it."""
    if isinstance(row, RagRecord):
        return row
    if not isinstance(row, Mapping):
        raise InputError(f"expected a record (a mapping or RagRecord), got {type(row).__name__}")
    column_map = column_map or {}
    for field in column_map:
        if field not in MAPPED_FIELDS:
            # The caller's mistake, not the record's: raised out of a batch, never counted as an invalid row.
            raise ValueError(f"{mapped_with.name}: {unknown_name('field', field, MAPPED_FIELDS)}")
    # The label is not the record's: a row without the label column is unlabelled, as one without `label`
    # (a golden set labelled in part), never invalid.
    unmapped = [
        f"{column_map[f]!r} for {f}" for f in FIELD_ALIASES if f in column_map and column_map[f] not in row
    ]
    if unmapped:
        raise InputError(
            f"{mapped_with.name} names no such column: {', '.join(unmapped)}; the record's columns: "
            f"{_columns(row)}"
        )
    values: dict[str, Any] = {}
    missing = []
    for field, aliases in FIELD_ALIASES.items():
        column = column_map.get(field) or next(
            (a for a in aliases if a in row and not _is_null(row[a])), None
        )
        if column is None and field == "query" and any(a in row for a in aliases):
            # The column is there and empty on this record: the question was not recorded. Faithfulness
            # still checks the answer against the contexts; the metrics that need the question say so.
            values[field] = None
            continue
        if column is None:
            if field == "answer" and any(a in row for a in aliases):
                raise InputError(f"answer: null ({_present(row, aliases)}); give the answer, '' for none")
            if field in ("query", "answer"):
                missing.append(field)
            continue
        values[field] = row[column]
    if missing:
        raise InputError(_missing_message(missing, row, mapped_with))
    record_id = values.get("id")
    try:
        return RagRecord(
            id=None if _is_null(record_id) else str(record_id),
            query=None if _is_null(values["query"]) else values["query"],
            contexts=parse_contexts(values.get("contexts")),
            answer=values["answer"],
            run=_run(row.get("run")),
        )
    except ValidationError as exc:
        raise InputError(
            "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}, got {_given(e['input'])}" for e in exc.errors()
            )
        ) from None


@dataclass(frozen=True)
class ReadRow:
    """One input row as read: its record, or why it could not be read (`error`); its `label` column; and
    `no_contexts`, set when no column held the contexts (the record's are empty for want of a column, not
    because nothing was retrieved): the reason the row and the gate give for the metrics that need them.
    `row_id`: an invalid row's id column, so its output row can still be joined to the input by id."""

    record: RagRecord | None
    error: str | None = None
    label: Any = None
    no_contexts: str | None = None
    row_id: str | None = None

    @property
    def record_id(self) -> str | None:
        """The record's id, or an invalid row's id column."""
        return self.record.id if self.record is not None else self.row_id


def read_row(
    row: Any, column_map: Mapping[str, str] | None = None, mapped_with: MappedWith = COLUMN_MAP
) -> ReadRow:
    """`to_record(row, ...)` as a ReadRow: an InputError becomes its `error`, a ValueError (the caller's
    mapping) is raised."""
    label = row.get((column_map or {}).get(LABEL, LABEL)) if isinstance(row, Mapping) else None
    if _is_null(label) or (isinstance(label, str) and not label.strip()):
        label = None  # an empty CSV cell, pandas' NaN: an unlabelled row, not an unknown label
    try:
        record = to_record(row, column_map, mapped_with)
    except InputError as exc:
        return ReadRow(None, str(exc), label, row_id=_row_id(row, column_map))
    # A mapped contexts column is there (to_record checked); a list of RagRecords has no columns.
    unread = (
        isinstance(row, Mapping)
        and "contexts" not in (column_map or {})
        and not any(a in row for a in FIELD_ALIASES["contexts"])
    )
    return ReadRow(record, None, label, _missing_message(["contexts"], row, mapped_with) if unread else None)


def _run(value: Any) -> Run | None:
    """An agent's run, as `tracescore.model.Run` fields (a mapping or its JSON); None when absent."""
    if isinstance(value, str) and value.strip():
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise InputError(f"run: not JSON ({exc})") from None
    return None if _is_null(value) or value == "" else Run.model_validate(value)


def _missing_message(missing: list[str], row: Mapping[str, Any], mapped_with: MappedWith) -> str:
    wanted = "; ".join(f"no {f} (looked for {', '.join(FIELD_ALIASES[f])})" for f in missing)
    hint = mapped_with.written(dict.fromkeys(missing, "<column>"))
    return f"{wanted}; the record's columns: {_columns(row)}; map them with {hint}"


def _row_id(row: Any, column_map: Mapping[str, str] | None) -> str | None:
    if not isinstance(row, Mapping):
        return None
    aliases = (column_map[ID],) if column_map and ID in column_map else FIELD_ALIASES[ID]
    value = next((row[a] for a in aliases if a in row and not _is_null(row[a])), None)
    return None if value is None else str(value)


def _present(row: Mapping[str, Any], aliases: Sequence[str]) -> str:
    return "column " + ", ".join(repr(a) for a in aliases if a in row)


def _given(value: Any) -> str:
    """What a field held, briefly: `int 5`, `list ['It is 5.']` (cut at 60 characters)."""
    shown = repr(value)
    return f"{type(value).__name__} {shown[:60]}{'...' if len(shown) > 60 else ''}"


def _columns(row: Mapping[str, Any]) -> str:
    return ", ".join(map(str, list(row)[:12])) or "none"


def _is_null(value: Any) -> bool:
    # pandas gives NaN for an empty cell.
    return value is None or (isinstance(value, float) and value != value)


def parse_contexts(value: Any) -> tuple[str, ...]:
    """Contexts as a tuple of strings from a list (or array), a JSON list, a Python list repr or a string."""
    if _is_null(value):
        return ()
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        if text.startswith("["):
            parsed = _list_literal(text)
            if parsed is not None:
                return _texts(parsed)
        return (value,)
    if isinstance(value, Mapping):
        raise InputError("contexts: expected a list of strings, got a mapping")
    if isinstance(value, Iterable):
        return _texts(value)
    raise InputError(f"contexts: expected a list of strings, got {type(value).__name__}")


def _texts(items: Iterable[Any]) -> tuple[str, ...]:
    texts = []
    for position, item in enumerate(items):
        if isinstance(item, Mapping):
            # A document as an object ({"text", "source"}, LangChain's page_content and metadata) would be
            # judged as its repr, metadata and all, and quoted so as evidence.
            keys = ", ".join(map(str, list(item)[:6]))
            raise InputError(
                f"contexts[{position}]: expected a string, got a mapping (keys {keys}): "
                "give each document's text"
            )
        texts.append(str(item))
    return tuple(texts)


def _list_literal(text: str) -> list[Any] | None:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        try:
            parsed = ast.literal_eval(text)  # literals only: never evaluates code
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return parsed if isinstance(parsed, list | tuple) else None


def iter_inputs(data: Any) -> Iterator[Any]:
    """The rows of `data`: a pandas DataFrame (row dicts), one record or mapping, or an iterable of them."""
    if _is_dataframe(data):
        yield from data.to_dict(orient="records")
    elif isinstance(data, RagRecord | Mapping):
        yield data
    elif isinstance(data, Iterable) and not isinstance(data, str | bytes):
        yield from data
    else:  # a string iterates, by character: no more a dataset than None or a number
        got = "a string" if isinstance(data, str | bytes) else "None" if data is None else type(data).__name__
        raise InputError(f"expected records, a list of records or a DataFrame, got {got}")


def _is_dataframe(data: Any) -> bool:
    # Checked by shape, not by import: pandas is optional.
    return hasattr(data, "to_dict") and hasattr(data, "columns") and hasattr(data, "iloc")
