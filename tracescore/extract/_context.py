"""The documents one interaction is judged against, each with the span it came from, within fixed bounds.

Recognisers add what they read span by span; `Contexts` drops blanks and program reprs (never judged as
text), stops at `MAX_CONTEXTS` documents / `MAX_CONTEXT_CHARS` characters so an agent that loops hundreds of
tool calls stays bounded in memory and CPU, and keeps a note of everything it left out so the record can
say so. Tool results keep where they came from (`ToolCall`) until the answer is known: one that merely
carries the answer is dropped then (`_tools.drop_answer_carriers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from tracescore.extract._read import documents_of, is_repr, may_start_repr, parse_json
from tracescore.model import ContextSource, ContextSourceKind, DecodedSpan

__all__ = [
    "MAX_CONTEXTS",
    "MAX_CONTEXT_CHARS",
    "Contexts",
    "ToolCall",
]

MAX_CONTEXTS = 64
MAX_CONTEXT_CHARS = 2_000_000
_new_source = tuple.__new__
_NO_REPRS: Mapping[str, int] = MappingProxyType({})


class ToolCall(NamedTuple):
    """Where a tool result came from: the tool span (or the LLM call it was passed to, for a tool message),
    the call's arguments as recorded (None: not recorded), whether the result was a list of documents, and
    what it is called in notes ("tool result")."""

    span: DecodedSpan
    arguments: Any
    document_like: bool
    what: str = "tool result"
    name: str | None = None  # the tool's, where the message list names it (`_history.TurnResult.tool`)


class Contexts:
    """One interaction's documents as they are collected. Per call, never shared."""

    __slots__ = (
        "_calls",
        "_chars",
        "_notes",
        "_over_chars",
        "_reprs",
        "_sources",
        "_texts",
        "_tool_results",
        "_unread",
        "span_ids",
    )

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._sources: list[ContextSource] = []
        # Aligned with _texts once a tool result is kept (the tool call of each, None for the others); an
        # empty tuple until then: most interactions have none (no list built for them).
        self._calls: list[ToolCall | None] | tuple[()] = ()
        self._tool_results = 0  # how many of _calls are not None
        # The spans the documents were read from, each once, in the order first read (an attribute, not a
        # property: every interaction's reading asks for it).
        self.span_ids: tuple[str, ...] = ()
        self._chars = 0
        # Built when first written: most interactions have no note and no repr among their documents.
        self._notes: tuple[str, ...] = ()
        self._reprs: Mapping[str, int] = _NO_REPRS
        self._over_chars = 0
        self._unread = 0

    @property
    def full(self) -> bool:
        """No more documents are kept: callers stop reading spans (counted as unread)."""
        return len(self._texts) >= MAX_CONTEXTS or self._chars >= MAX_CONTEXT_CHARS

    @property
    def from_earlier_turns(self) -> bool:
        """Some documents are earlier turns' tool results: the LLM input is a conversation."""
        return any(source.turns_back for source in self._sources)

    def __len__(self) -> int:
        return len(self._texts)

    def add(
        self,
        span: DecodedSpan,
        kind: ContextSourceKind,
        texts: Iterable[Any],
        call: ToolCall | None = None,
        turns_back: int = 0,
    ) -> None:
        """Documents read from `span`; `call` when they are a tool's result (see `tool_results`);
        `turns_back` when they belong to an earlier turn of the conversation."""
        # Every document of every interaction passes here: the bounds and lists are read once per call, only
        # the text is kept per document in the loop (its source and call, the same for the whole call, are
        # added after it), and the source is built as the tuple it is (a NamedTuple's own constructor is a
        # Python call). How many are kept is counted here, not asked of the list per document.
        kept, chars = self._texts, self._chars
        count = before = len(kept)
        for value in texts:
            text = value if isinstance(value, str) else str(value)
            if not text or text.isspace():
                continue
            if may_start_repr(text, 0, 300) and is_repr(text):
                reprs = self._reprs if isinstance(self._reprs, dict) else {}
                reprs[span.span_id] = reprs.get(span.span_id, 0) + 1
                self._reprs = reprs
                continue
            if count >= MAX_CONTEXTS:
                self._unread += 1
                continue
            size = len(text)
            if chars + size > MAX_CONTEXT_CHARS:
                self._over_chars += 1
                continue
            chars += size
            kept.append(text)
            count += 1
        self._chars = chars
        added = count - before
        if not added:
            return
        self._sources += (_new_source(ContextSource, (span.span_id, kind, turns_back)),) * added
        calls = self._calls
        if call is not None:
            if not calls:
                calls = self._calls = []
            calls += (None,) * (before - len(calls))  # the first tool result: the calls line up from here
            calls += (call,) * added
            self._tool_results += added
        elif calls:
            calls += (None,) * added
        if span.span_id not in self.span_ids:
            self.span_ids += (span.span_id,)  # a concatenation: no list built as `(*a, b)` builds one

    def add_inputs(self, inputs: Iterable[tuple[DecodedSpan, Any]]) -> None:
        """Documents handed to steps as their input: each (step, its input as recorded), an input being a JSON
        mapping with a list of documents under a `documents`-like key (`documents_of`). Nested steps pass the
        same list on: each text is taken once."""
        seen: set[str] = set()
        for step, value in inputs:
            value = parse_json(value)
            docs = documents_of(value) if isinstance(value, Mapping) else None
            if docs:
                self.add(step, ContextSourceKind.INPUT, [d for d in docs if d not in seen])
                seen.update(docs)

    @property
    def has_tool_results(self) -> bool:
        return self._tool_results > 0

    def tool_results(self) -> list[tuple[int, str, ToolCall]]:
        """(position, text, call) of every document that is a tool's result."""
        if not self._tool_results:
            return []
        return [(i, self._texts[i], call) for i, call in enumerate(self._calls) if call is not None]

    def drop(self, positions: Iterable[int]) -> None:
        """Documents at `positions` are not judged (the caller notes why)."""
        gone = set(positions)
        if not gone:
            return
        kept = [i for i in range(len(self._texts)) if i not in gone]
        self._chars -= sum(len(self._texts[i]) for i in gone)
        self._texts = [self._texts[i] for i in kept]
        self._sources = [self._sources[i] for i in kept]
        if self._calls:
            self._calls = [self._calls[i] for i in kept]
        self._tool_results = sum(call is not None for call in self._calls)
        self.span_ids = tuple(dict.fromkeys(source.span_id for source in self._sources))

    def skip_span(self) -> None:
        """A span whose documents were not read because the bounds were already reached."""
        self._unread += 1

    def note(self, text: str) -> None:
        if text not in self._notes:
            self._notes = (*self._notes, text)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(self._texts)

    @property
    def sources(self) -> tuple[ContextSource, ...]:
        return tuple(self._sources)

    @property
    def notes(self) -> tuple[str, ...]:
        if not (self._notes or self._tool_results or self._reprs or self._unread or self._over_chars):
            return ()  # the common case: nothing left out
        # A result judged as one text is noted once kept: one that carried the answer was dropped instead.
        whole = {
            f"{c.what} from span {c.span.span_id} '{c.span.name}' is not document-like: judged as one text": 0
            for c in (self._calls if self._tool_results else ())
            if c is not None and not c.document_like
        }
        if not (self._notes or whole or self._reprs or self._unread or self._over_chars):
            return ()
        notes = [*whole, *(n for n in self._notes if n not in whole)]
        for span_id, count in self._reprs.items():
            notes.append(
                f"{count} document(s) from span {span_id} were program reprs (e.g. NodeWithScore(...), "
                "Document(...)), not text: not judged"
            )
        if self._unread:
            notes.append(
                f"documents past the limit of {MAX_CONTEXTS} per interaction not judged "
                f"({self._unread} document(s) or span(s) left unread)"
            )
        if self._over_chars:
            notes.append(
                f"{self._over_chars} document(s) not judged: the interaction's documents would exceed "
                f"{MAX_CONTEXT_CHARS:,} characters"
            )
        return tuple(notes)
