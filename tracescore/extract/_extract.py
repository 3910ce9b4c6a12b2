"""Run every recogniser on a trace and keep each interaction once.

Recognisers run in priority order: tracescore's own spans first (they name question, documents and answer
explicitly), then OpenInference, OpenLLMetry and the OTel GenAI conventions. Two readings describe the same
interaction when one's anchor span is the other's ancestor or descendant, or they were read from a shared
span: the earlier recogniser's reading is kept. Sibling interactions (two RAG calls in one request) stay
separate. Once the kept interactions cover every span of the trace (each is an anchor, read from, or an
ancestor or descendant of an anchor), later recognisers could only repeat them and are not run: our own
spans carry tracescore, OpenInference and GenAI attributes, and are read once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tracescore._rag_span import DecodedSpan, RagSpan, Trace
from tracescore.extract._genai import GenAIRecognizer
from tracescore.extract._openinference import OpenInferenceRecognizer
from tracescore.extract._openllmetry import OpenLLMetryRecognizer
from tracescore.extract._protocol import Recognizer, Skip
from tracescore.extract._tracescore import TracescoreRecognizer

__all__ = ["DEFAULT_RECOGNIZERS", "Extraction", "extract"]

DEFAULT_RECOGNIZERS: tuple[Recognizer, ...] = (
    TracescoreRecognizer(),
    OpenInferenceRecognizer(),
    OpenLLMetryRecognizer(),
    GenAIRecognizer(),
)


@dataclass
class Extraction:
    interactions: list[RagSpan] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)


def extract(trace: Trace, recognizers: Sequence[Recognizer] = DEFAULT_RECOGNIZERS) -> Extraction:
    found = Extraction()
    skipped: list[Skip] = []
    for recognizer in recognizers:
        for outcome in recognizer.recognize(trace):
            if isinstance(outcome, Skip):
                skipped.append(outcome)
            elif not any(_same(trace, outcome.span, outcome.span_ids, kept) for kept in found.interactions):
                found.interactions.append(outcome)
        if found.interactions and _covered(trace, found.interactions):
            break
    seen: set[str] = set()
    for skip in skipped:
        anchor = skip.span
        if anchor is not None:
            if anchor.span_id in seen or any(
                _same(trace, anchor, frozenset(), kept) for kept in found.interactions
            ):
                continue  # another reading scored it, or an earlier recogniser already explained it
            seen.add(anchor.span_id)
        found.skips.append(skip)
    if not found.interactions and not found.skips:
        found.skips.append(_not_rag(trace))
    return found


def _same(trace: Trace, anchor: DecodedSpan, span_ids: frozenset[str], kept: RagSpan) -> bool:
    if anchor.span_id == kept.span.span_id or span_ids & kept.span_ids or anchor.span_id in kept.span_ids:
        return True
    return any(a.span_id == kept.span.span_id for a in trace.ancestors(anchor)) or any(
        a.span_id == anchor.span_id for a in trace.ancestors(kept.span)
    )


def _covered(trace: Trace, interactions: list[RagSpan]) -> bool:
    """Every span of the trace belongs to a kept interaction, so any later reading is one of them."""
    if len(trace.spans) == 1:
        return True  # the one span is the kept interaction's anchor
    covered: set[str] = set()
    for kept in interactions:
        covered.add(kept.span.span_id)
        covered.update(kept.span_ids)
        covered.update(s.span_id for s in trace.ancestors(kept.span))
        covered.update(s.span_id for s in trace.descendants(kept.span))
    return len(covered) >= len(trace.by_id)


def _not_rag(trace: Trace) -> Skip:
    scopes = sorted({span.scope_name or "(no scope)" for span in trace.spans})
    root = trace.roots[0] if trace.roots else trace.spans[0]
    return Skip(
        "not_rag",
        f"trace {trace.trace_id} ({len(trace.spans)} spans, scopes: {', '.join(scopes)}) has no span "
        "in a known RAG convention (tracescore, OpenInference, OpenLLMetry, OTel GenAI) with a question, "
        "an answer or retrieved documents",
        expected=True,
        span=root,
    )
