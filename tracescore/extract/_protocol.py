"""The extract stage's seam: a recogniser reads one convention's spans in an assembled trace.

Every convention tracescore knows is a `Recognizer` made of the convention's adapter (`_convention`) and the
shared reader (`_reader`); a recogniser that does not fit the shared reader (one that reads a trace in
another shape entirely) implements this Protocol directly and still plugs into `extract`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tracescore.model import DecodedSpan, ExtractSkip, Interaction, Trace

if TYPE_CHECKING:
    from tracescore.extract._reader import Found

__all__ = ["Recognizer", "Skip"]


@dataclass(frozen=True)
class Skip:
    """Why something in a trace is not scored. `expected` skips (traffic that is not RAG, our own evaluation
    spans) are counted quietly after the first log line; the others are counted and logged as warnings.
    `scored`: the interaction at `span` is scored all the same, only what `reason` names was not read (a
    session id a redacting exporter replaced); counted apart from what is not scored. `turn`: an answer
    with nothing to judge it against (`empty_context`) read up to its conversation and its response ids, so
    that it still takes its place in a conversation (a chain of responses goes on from it), never scored."""

    reason: ExtractSkip
    detail: str
    expected: bool = False
    span: DecodedSpan | None = None
    convention: str | None = None
    scored: bool = False
    turn: Found | None = field(default=None, compare=False, repr=False)


class Recognizer(Protocol):
    """Turns an assembled trace into the RAG interactions one instrumentation convention describes.

    Yields an interaction for each answer it can pair with a question and retrieved documents, and a Skip
    for each answer it recognises but cannot score (naming what is missing). Yields nothing for traces
    that do not use its convention. Stateless: one instance serves every trace.
    """

    name: str

    def recognize(self, trace: Trace) -> Iterable[Interaction | Skip]: ...
