"""OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` with message content on the span.

The interaction is the outermost `invoke_workflow` / `invoke_agent` span, or without one each outermost
`chat` / `text_completion` / `generate_content` span. The question is the last user message of
`gen_ai.input.messages`, the answer the assistant text of `gen_ai.output.messages`; the documents come from
`retrieval` spans (`gen_ai.retrieval.documents`) below the interaction, or beside a chat span.
"""

from __future__ import annotations

from collections.abc import Iterator

from tracescore import semconv
from tracescore._rag_span import DecodedSpan, RagSpan, Trace
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import documents_of, last_message_text, parse_json

__all__ = ["GenAIRecognizer"]

_WORKFLOWS = frozenset({"invoke_workflow", "invoke_agent"})
_GENERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_RETRIEVAL = "retrieval"
RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"


def _operation(span: DecodedSpan) -> str:
    operation = span.attributes.get(semconv.GEN_AI_OPERATION_NAME)
    return operation if isinstance(operation, str) else ""


class GenAIRecognizer:
    name = "genai"

    def recognize(self, trace: Trace) -> Iterator[RagSpan | Skip]:
        workflows = trace.outermost(lambda s: _operation(s) in _WORKFLOWS)
        if workflows:
            for anchor in workflows:
                yield self._read(trace, anchor, list(trace.descendants(anchor)))
            return
        for anchor in trace.outermost(lambda s: _operation(s) in _GENERATIONS):
            yield self._read(trace, anchor, trace.beside(anchor))

    def _read(self, trace: Trace, anchor: DecodedSpan, around: list[DecodedSpan]) -> RagSpan | Skip:
        retrievals = [s for s in around if _operation(s) == _RETRIEVAL]
        contexts = [
            doc for s in retrievals for doc in (documents_of(s.attributes.get(RETRIEVAL_DOCUMENTS)) or [])
        ]
        chats = [s for s in around if _operation(s) in _GENERATIONS]
        question = _question(anchor)
        answer = _answer(anchor)
        if answer is None and chats:
            answer = _answer(chats[-1])
        if question is None and retrievals:
            query = retrievals[0].attributes.get(RETRIEVAL_QUERY)
            question = str(query) if query is not None else None
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*retrievals, *chats],
            looked_in=_LOOKED_IN,
        )


_LOOKED_IN = {
    "question": f"the last user message of {semconv.GEN_AI_INPUT_MESSAGES}",
    "answer": f"the assistant message of {semconv.GEN_AI_OUTPUT_MESSAGES}",
    "documents": f"the content of each document in {RETRIEVAL_DOCUMENTS} of retrieval spans; document ids "
    "alone cannot be checked",
}


def _question(span: DecodedSpan) -> str | None:
    messages = parse_json(span.attributes.get(semconv.GEN_AI_INPUT_MESSAGES))
    return last_message_text(messages, roles=("user", "human"))


def _answer(span: DecodedSpan) -> str | None:
    messages = parse_json(span.attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES))
    return last_message_text(messages, roles=("assistant", "ai", "model"))
