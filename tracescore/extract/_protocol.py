"""The extract stage's seam: a recogniser reads one convention's spans in an assembled trace.

Every convention tracescore knows is a `Recognizer` made of the convention's adapter (`_convention`) and the
shared reader (`_reader`); a recogniser that does not fit the shared reader (one that reads a trace in
another shape entirely) implements this Protocol directly and still plugs into `extract`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from tracescore.model import DecodedSpan, ExtractSkip, Interaction, Trace

__all__ = ["Recognizer", "Skip"]


@dataclass(frozen=True)
class Skip:
    """Why something in a trace is not scored. `expected` skips (traffic that is not RAG, our own evaluation
    spans) are counted quietly after the first log line; the others are counted and logged as warnings.
    `scored`: the interaction at `span` is scored all the same, only what `reason` names was not read (a
    session id a redacting exporter replaced); counted apart from what is not scored."""

    reason: ExtractSkip
    detail: str
    expected: bool = False
    span: DecodedSpan | None = None
    convention: str | None = None
    scored: bool = False


class Recognizer(Protocol):
    """Turns an assembled trace into the RAG interactions one instrumentation convention describes.

    Yields an interaction for each answer it can pair with a question and retrieved documents, and a Skip
    for each answer it recognises but cannot score (naming what is missing). Yields nothing for traces
    that do not use its convention. Stateless: one instance serves every trace.
    """

    name: str

    def recognize(self, trace: Trace) -> Iterable[Interaction | Skip]: ...
