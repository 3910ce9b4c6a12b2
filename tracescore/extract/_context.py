"""The documents one interaction is judged against, each with the span it came from, within fixed bounds.

Recognisers add what they read span by span; `Contexts` drops blanks and program reprs (never judged as
text), stops at `MAX_CONTEXTS` documents / `MAX_CONTEXT_CHARS` characters so an agent that loops hundreds of
tool calls stays bounded in memory and CPU, and keeps a note of everything it left out so the record can
say so.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from tracescore import semconv
from tracescore._rag_span import ContextSource, DecodedSpan, Trace
from tracescore.extract._read import is_repr

__all__ = ["MAX_CONTEXTS", "MAX_CONTEXT_CHARS", "Context", "Contexts", "as_contexts", "session_of"]

MAX_CONTEXTS = 64
MAX_CONTEXT_CHARS = 2_000_000
_SESSION_KEYS = (semconv.SESSION_ID, semconv.GEN_AI_CONVERSATION_ID)


class Context(NamedTuple):
    text: str
    source: ContextSource


class Contexts:
    """One interaction's documents as they are collected. Per call, never shared."""

    __slots__ = ("_chars", "_notes", "_over_chars", "_reprs", "_unread", "items")

    def __init__(self, items: Iterable[Context] = ()) -> None:
        self.items: list[Context] = []
        self._chars = 0
        self._notes: list[str] = []
        self._reprs: dict[str, int] = {}
        self._over_chars = 0
        self._unread = 0
        for item in items:
            self._add(item)

    @property
    def full(self) -> bool:
        """No more documents are kept: callers stop reading spans (counted as unread)."""
        return len(self.items) >= MAX_CONTEXTS or self._chars >= MAX_CONTEXT_CHARS

    def add(self, span: DecodedSpan, kind: str, texts: Iterable[Any]) -> None:
        source = ContextSource(span.span_id, kind)
        for text in texts:
            self._add(Context(str(text), source))

    def skip_span(self) -> None:
        """A span whose documents were not read because the bounds were already reached."""
        self._unread += 1

    def note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    def _add(self, item: Context) -> None:
        text = item.text
        if not text.strip():
            return
        if is_repr(text):
            self._reprs[item.source.span_id] = self._reprs.get(item.source.span_id, 0) + 1
            return
        if len(self.items) >= MAX_CONTEXTS:
            self._unread += 1
            return
        if self._chars + len(text) > MAX_CONTEXT_CHARS:
            self._over_chars += 1
            return
        self._chars += len(text)
        self.items.append(item)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(item.text for item in self.items)

    @property
    def sources(self) -> tuple[ContextSource, ...]:
        return tuple(item.source for item in self.items)

    @property
    def notes(self) -> tuple[str, ...]:
        notes = list(self._notes)
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


def as_contexts(anchor: DecodedSpan, contexts: Contexts | Sequence[Context | str] | None) -> Contexts:
    """`contexts` as a collector; plain strings were recorded on the interaction span itself."""
    if isinstance(contexts, Contexts):
        return contexts
    collected = Contexts()
    source = ContextSource(anchor.span_id, "span")
    for item in contexts or ():
        collected._add(item if isinstance(item, Context) else Context(str(item), source))
    return collected


def session_of(trace: Trace, anchor: DecodedSpan, read_from: Iterable[DecodedSpan] = ()) -> str | None:
    """`session.id` / `gen_ai.conversation.id` of the interaction: on its span or an ancestor (a request
    span), else on a span it was read from (agents put it on their LLM calls)."""
    for span in (anchor, *trace.ancestors(anchor)):
        if (found := _session(span)) is not None:
            return found
    for span in read_from:
        if (found := _session(span)) is not None:
            return found
    return None


def _session(span: DecodedSpan) -> str | None:
    for key in _SESSION_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None
