"""The documents one interaction is judged against, each with the span it came from, within fixed bounds.

Recognisers add what they read span by span; `Contexts` drops blanks and program reprs (never judged as
text), stops at `MAX_CONTEXTS` documents / `MAX_CONTEXT_CHARS` characters so an agent that loops hundreds of
tool calls stays bounded in memory and CPU, and keeps a note of everything it left out so the record can
say so.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from tracescore import semconv
from tracescore.extract._read import is_repr
from tracescore.model import ContextSource, DecodedSpan, Trace

__all__ = ["MAX_CONTEXTS", "MAX_CONTEXT_CHARS", "Context", "Contexts", "as_contexts", "session_of"]

MAX_CONTEXTS = 64
MAX_CONTEXT_CHARS = 2_000_000


class Context(NamedTuple):
    text: str
    source: ContextSource


class Contexts:
    """One interaction's documents as they are collected. Per call, never shared."""

    __slots__ = ("_chars", "_notes", "_over_chars", "_reprs", "_sources", "_texts", "_unread")

    def __init__(self) -> None:
        self._texts: list[str] = []
        self._sources: list[ContextSource] = []
        self._chars = 0
        self._notes: list[str] = []
        self._reprs: dict[str, int] = {}
        self._over_chars = 0
        self._unread = 0

    @property
    def full(self) -> bool:
        """No more documents are kept: callers stop reading spans (counted as unread)."""
        return len(self._texts) >= MAX_CONTEXTS or self._chars >= MAX_CONTEXT_CHARS

    def __len__(self) -> int:
        return len(self._texts)

    def add(self, span: DecodedSpan, kind: str, texts: Iterable[Any]) -> None:
        source = ContextSource(span.span_id, kind)
        for text in texts:
            self._add(text if isinstance(text, str) else str(text), source)

    def skip_span(self) -> None:
        """A span whose documents were not read because the bounds were already reached."""
        self._unread += 1

    def note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    def _add(self, text: str, source: ContextSource) -> None:
        if not text or text.isspace():
            return
        if is_repr(text):
            self._reprs[source.span_id] = self._reprs.get(source.span_id, 0) + 1
            return
        texts, size = self._texts, len(text)
        if len(texts) >= MAX_CONTEXTS:
            self._unread += 1
            return
        if self._chars + size > MAX_CONTEXT_CHARS:
            self._over_chars += 1
            return
        self._chars += size
        texts.append(text)
        self._sources.append(source)

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(self._texts)

    @property
    def sources(self) -> tuple[ContextSource, ...]:
        return tuple(self._sources)

    @property
    def notes(self) -> tuple[str, ...]:
        if not (self._notes or self._reprs or self._unread or self._over_chars):
            return ()
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
    if not contexts:
        return collected
    source = ContextSource(anchor.span_id, "span")
    add = collected._add
    for item in contexts:
        if type(item) is str:  # the common case first: documents recorded as text on the span
            add(item, source)
        elif isinstance(item, Context):
            add(item.text, item.source)
        else:
            add(item if isinstance(item, str) else str(item), source)
    return collected


def session_of(trace: Trace, anchor: DecodedSpan, read_from: Iterable[DecodedSpan] = ()) -> str | None:
    """`session.id` / `gen_ai.conversation.id` of the interaction: on its span or an ancestor (a request
    span), else on a span it was read from (agents put it on their LLM calls)."""
    lineage = (
        (anchor,) if anchor.parent_span_id is None else itertools.chain((anchor,), trace.ancestors(anchor))
    )
    for span in itertools.chain(lineage, read_from) if read_from else lineage:
        attrs = span.attributes
        value = attrs.get(semconv.SESSION_ID) or attrs.get(semconv.GEN_AI_CONVERSATION_ID)
        if value and isinstance(value, str):
            return value
    return None
