"""OpenInference (Phoenix, Arize; LangChain, LlamaIndex, manual tracers): `openinference.span.kind`.

The interaction is the outermost CHAIN or AGENT span: its `input.value` is the question and its
`output.value` the answer. The documents are those of the RETRIEVER / RERANKER spans below it, read from
`retrieval.documents.N.document.content` (a reranker's `reranker.output_documents`), or from their
`output.value` JSON when the flattened attributes are absent (manual tracers). Without a CHAIN or AGENT, an
LLM span is the interaction, with the retrievals that ran beside it. RETRIEVER, EMBEDDING, RERANKER, TOOL and
PROMPT spans are never read as answers.
"""

from __future__ import annotations

from collections.abc import Iterator

from tracescore import semconv
from tracescore._rag_span import DecodedSpan, RagSpan, Trace
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import ANSWER_KEYS, QUESTION_KEYS, documents_of, indexed, text_of

__all__ = ["OpenInferenceRecognizer"]

_KIND = semconv.OPENINFERENCE_SPAN_KIND
_ANSWERING = frozenset({"CHAIN", "AGENT"})
_RETRIEVING = frozenset({"RETRIEVER", "RERANKER"})


def _kind(span: DecodedSpan) -> str:
    kind = span.attributes.get(_KIND)
    return kind.upper() if isinstance(kind, str) else ""


class OpenInferenceRecognizer:
    name = "openinference"

    def recognize(self, trace: Trace) -> Iterator[RagSpan | Skip]:
        if not trace.select(lambda s: _KIND in s.attributes):
            return
        anchors = trace.outermost(lambda s: _kind(s) in _ANSWERING)
        if anchors:
            for anchor in anchors:
                yield self._read(trace, anchor, list(trace.descendants(anchor)))
            return
        for anchor in trace.outermost(lambda s: _kind(s) == "LLM"):
            yield self._read(trace, anchor, trace.beside(anchor))

    def _read(self, trace: Trace, anchor: DecodedSpan, around: list[DecodedSpan]) -> RagSpan | Skip:
        retrievals = [s for s in around if _kind(s) in _RETRIEVING]
        rerankers = [s for s in retrievals if _kind(s) == "RERANKER"]
        # A reranker's output is what the model saw; fall back to every retriever's documents.
        used = [s for s in rerankers if _documents(s)] or [s for s in retrievals if _kind(s) == "RETRIEVER"]
        contexts = [doc for s in used for doc in (_documents(s) or [])]
        contexts += [
            str(d) for d in indexed(anchor.attributes, semconv.RETRIEVAL_DOCUMENTS, "document.content")
        ]
        llms = [s for s in around if _kind(s) == "LLM"]
        if _kind(anchor) == "LLM":
            question = _last_user_message(anchor) or _io(anchor, semconv.INPUT_VALUE, QUESTION_KEYS)
            answer = _output_message(anchor) or _io(anchor, semconv.OUTPUT_VALUE, ANSWER_KEYS)
        else:
            question = _io(anchor, semconv.INPUT_VALUE, QUESTION_KEYS)
            answer = _io(anchor, semconv.OUTPUT_VALUE, ANSWER_KEYS)
            if answer is None and llms:
                answer = _output_message(llms[-1])
        if question is None and retrievals:
            # A chain called with several inputs: the retriever's query is the question it answered.
            question = _io(retrievals[0], semconv.INPUT_VALUE, QUESTION_KEYS)
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*used, *llms],
        )


def _io(span: DecodedSpan, key: str, keys: tuple[str, ...]) -> str | None:
    return text_of(span.attributes.get(key), keys)


def _documents(span: DecodedSpan) -> list[str] | None:
    attrs = span.attributes
    prefix = "reranker.output_documents" if _kind(span) == "RERANKER" else semconv.RETRIEVAL_DOCUMENTS
    flattened = indexed(attrs, prefix, "document.content")
    if flattened:
        return [str(d) for d in flattened]
    return documents_of(attrs.get(semconv.OUTPUT_VALUE))


def _last_user_message(span: DecodedSpan) -> str | None:
    roles = indexed(span.attributes, "llm.input_messages", "message.role")
    for index in reversed(range(len(roles))):
        if str(roles[index]).lower() in ("user", "human"):
            return _message_content(span, "llm.input_messages", index)
    return None


def _output_message(span: DecodedSpan) -> str | None:
    return _message_content(span, "llm.output_messages", 0)


def _message_content(span: DecodedSpan, prefix: str, index: int) -> str | None:
    attrs = span.attributes
    content = attrs.get(f"{prefix}.{index}.message.content")
    if isinstance(content, str) and content.strip():
        return content
    parts = indexed(attrs, f"{prefix}.{index}.message.contents", "message_content.text")
    joined = "".join(str(p) for p in parts)
    return joined if joined.strip() else None
