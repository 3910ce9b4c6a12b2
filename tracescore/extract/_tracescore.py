"""tracescore's own spans (`@tracescore.rag`): question, documents and answer on one span, by name.

Every span of the SDK's scope is an interaction (a decorated function called inside another is one too):
its `input.value` is the question, its `retrieval.documents.N.document.content` the documents and its
`output.value` the answer. Its `@tracescore.generation` calls write OpenInference's LLM keys: their prompts
are read as OpenInference's are, for a chat's resent history (`infer_conversations`) and for documents the
app put into a prompt under a label.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from tracescore import semconv
from tracescore.extract._convention import Convention, Reading
from tracescore.extract._openinference import OpenInference
from tracescore.extract._read import Prompt, indexed
from tracescore.model import ContextSourceKind, DecodedSpan, Trace

__all__ = ["Tracescore"]

_ON_THE_SPAN = ContextSourceKind.SPAN
_OPENINFERENCE = OpenInference()  # the keys of the SDK's `@tracescore.generation` spans


class Tracescore(Convention):
    """The keys `@tracescore.rag` writes, read from the one span it records."""

    name = "tracescore"
    CALLS = False
    SCOPE = semconv.SDK_SCOPE
    QUESTION = semconv.INPUT_VALUE
    ANSWER = semconv.OUTPUT_VALUE
    # The SDK writes OpenInference's keys (and GenAI's beside them).
    DOCUMENTS = OpenInference.RETRIEVAL_DOCUMENTS  # flattened: retrieval.documents.N.document.content
    DOCUMENT_CONTENT = OpenInference.DOCUMENT_CONTENT
    LOOKED_IN = {
        "question": QUESTION,
        "answer": ANSWER,
        "documents": f"{DOCUMENTS}.N.{DOCUMENT_CONTENT}",
    }

    def is_interaction(self, span: DecodedSpan) -> bool:
        return span.scope_name == self.SCOPE

    def candidates(self, trace: Trace) -> Iterable[Reading]:
        spans = trace.spans
        if len(spans) == 1:  # most traces of ours: one span, nothing to put in order
            (only,) = spans
            if only.scope_name != self.SCOPE:
                return ()
            # Positional (around, group, since, retrievals): keywords to Reading's generated __init__ cost
            # ~1/3 more, on every trace of ours. A tuple: one allocation, a list's items are a second.
            return (Reading(trace, self, only, (), None, 0, ((only, _ON_THE_SPAN),)),)
        return [
            Reading(trace, self, span, retrievals=((span, _ON_THE_SPAN),))
            for span in trace.select(self.is_interaction)
        ]

    def read_retrieval(self, reading: Reading, span: DecodedSpan, kind: ContextSourceKind) -> None:
        # Each document is read as text (str() of anything else).
        reading.contexts.add(span, kind, indexed(span.attributes, self.DOCUMENTS, self.DOCUMENT_CONTENT))

    def question(self, reading: Reading) -> str | None:
        query = reading.anchor.attributes.get(self.QUESTION)
        return None if query is None else str(query)

    def own_answer(self, span: DecodedSpan) -> str | None:
        answer = span.attributes.get(self.ANSWER)
        return None if answer is None else str(answer)

    def prompt_spans(self, reading: Reading) -> Iterator[DecodedSpan]:
        """The `@tracescore.generation` calls under the interaction, the last first (nearest the answer),
        then the interaction span."""
        trace, anchor = reading.trace, reading.anchor
        if len(trace.spans) > 1:
            yield from reversed([s for s in trace.descendants(anchor) if _OPENINFERENCE.is_llm(s)])
        yield anchor

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        return _OPENINFERENCE.prompt(span)
