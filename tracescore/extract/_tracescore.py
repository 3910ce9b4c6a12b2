"""tracescore's own spans (`@tracescore.rag`): question, documents and answer on one span, by name."""

from __future__ import annotations

from collections.abc import Iterator

from tracescore import semconv
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import indexed
from tracescore.model import Interaction, Trace

__all__ = ["TracescoreRecognizer"]

_SCOPE = semconv.SDK_SCOPE
_LOOKED_IN = {
    "question": semconv.INPUT_VALUE,
    "answer": semconv.OUTPUT_VALUE,
    "documents": semconv.document_content_key(0).replace(".0.", ".N."),
}


class TracescoreRecognizer:
    name = "tracescore"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        spans = trace.spans
        # Most traces of ours are one span: nothing to put in order.
        ours = (
            [s for s in spans if s.scope_name == _SCOPE]
            if len(spans) == 1
            else trace.select(lambda s: s.scope_name == _SCOPE)
        )
        for span in ours:
            attrs = span.attributes
            query = attrs.get(semconv.INPUT_VALUE)
            answer = attrs.get(semconv.OUTPUT_VALUE)
            # as_contexts reads each document as text (str() of anything else).
            contexts = indexed(attrs, semconv.RETRIEVAL_DOCUMENTS, "document.content")
            yield interaction(
                trace,
                span,
                convention=self.name,
                question=None if query is None else str(query),
                contexts=contexts,
                answer=None if answer is None else str(answer),
                looked_in=_LOOKED_IN,
            )
