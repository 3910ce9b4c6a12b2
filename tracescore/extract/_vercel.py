"""The Vercel AI SDK's telemetry (`experimental_telemetry: {isEnabled: true}`; tracer `ai`; `ai.*` spans).

The interaction is the outermost `ai.generateText` / `ai.streamText` / `ai.generateObject` /
`ai.streamObject` span. The question is its `ai.prompt` (the call's `{system, prompt, messages}` as JSON: the
prompt text, else the last user message), else the last user message of the first model call's
`ai.prompt.messages` (`.doGenerate` / `.doStream`); system text is never read as a document. The answer is
its `ai.response.text` (an object call's answer field of `ai.response.object`), else the last model call's.

The documents: each `ai.toolCall` span's `ai.toolCall.result` (with its `ai.toolCall.args`, so one that merely
carries the answer is dropped by the shared rule, `drop_answer_carriers`); retrieval the app recorded below or
beside the call before it answered (the SDK's `ai.rerank`: its top-ranked `ai.documents`; an OTel GenAI
`retrieval` span; an OpenInference RETRIEVER); without tool spans, tool results passed in the model call's
messages after the question; after them, the earlier turns' tool results in those messages. Where the app
recorded none of these, its documents can only be inside the prompt text, which is not split into documents:
the call is skipped as `no_retrieval`, saying so.

The route is `ai.telemetry.functionId`, the session `ai.telemetry.metadata.sessionId`, the user
`ai.telemetry.metadata.userId`. The model calls carry a few `gen_ai.*` attributes; the GenAI recogniser runs
later, so the interaction is scored once, here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._context import Contexts
from tracescore.extract._history import genai_tool_results
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import (
    ANSWER_KEYS,
    documents_of,
    indexed,
    last_message_text,
    parse_json,
    text_of,
)
from tracescore.extract._tools import add_earlier_turns, add_tool_result, genai_tool_messages
from tracescore.model import DecodedSpan, Interaction, Trace

__all__ = ["VercelAIRecognizer"]

OPERATION = "ai.operationId"
_CALLS = frozenset({"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"})
_MODEL_CALLS = frozenset(
    {"ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate"}
    | {"ai.streamObject.doStream"}
)
_TOOL_CALL = "ai.toolCall"
_RERANK, _RERANK_CALL = "ai.rerank", "ai.rerank.doRerank"
PROMPT = "ai.prompt"
PROMPT_MESSAGES = "ai.prompt.messages"
PROMPT_TOOLS = "ai.prompt.tools"
RESPONSE_TEXT = "ai.response.text"
RESPONSE_OBJECT = "ai.response.object"
# The AI SDK before 4.0 wrote the result as ai.result.*.
_TEXT_KEYS = (RESPONSE_TEXT, "ai.result.text")
_OBJECT_KEYS = (RESPONSE_OBJECT, "ai.result.object")
TOOL_RESULT = "ai.toolCall.result"
TOOL_ARGS = "ai.toolCall.args"
RERANK_DOCUMENTS = "ai.documents"
RERANK_RANKING = "ai.ranking"
FUNCTION_ID = "ai.telemetry.functionId"
_METADATA = "ai.telemetry.metadata."
_SESSION_KEYS = ("sessionId", "session_id", "conversationId")
_USER_ID_KEYS = ("userId", "user_id")
_USER = ("user", "human")


def _operation(span: DecodedSpan) -> str:
    operation = span.attributes.get(OPERATION)
    if isinstance(operation, str):
        return operation
    return span.name if span.scope_name == "ai" else ""


class VercelAIRecognizer:
    name = "vercel_ai"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        for anchor in trace.outermost(lambda s: _operation(s) in _CALLS):
            yield self._read(trace, anchor)

    def _read(self, trace: Trace, anchor: DecodedSpan) -> Interaction | Skip:
        below = list(trace.descendants(anchor))
        calls = sorted((s for s in below if _operation(s) in _MODEL_CALLS), key=_start)
        # The last model call gives the answer: what ran after it started cannot have informed it.
        answered_at = calls[-1].start_time_unix_nano if calls else anchor.end_time_unix_nano
        question = _question(anchor, calls)
        answer = _answer(anchor) or (_answer(calls[-1]) if calls else None)
        tool_spans = [s for s in below if _operation(s) == _TOOL_CALL]
        inside_tools = {d.span_id for tool in tool_spans for d in trace.descendants(tool)}
        # A retrieval inside a tool is read as the tool's result: that is what the model saw.
        retrievals = [
            s
            for s in trace.beside(anchor)
            if s.start_time_unix_nano <= answered_at and s.span_id not in inside_tools and _retrieval_kind(s)
        ]
        contexts = Contexts()
        for retrieval in retrievals:
            _add_retrieval(trace, contexts, retrieval)
        # With their arguments and the model calls' outputs, so the shared rule drops a tool result that
        # merely carries the answer (its arguments, itself, or called after the answer was written).
        for tool in tool_spans:
            attrs = tool.attributes
            add_tool_result(
                contexts, tool, "tool", attrs.get(TOOL_RESULT), "tool result", arguments=attrs.get(TOOL_ARGS)
            )
        if not tool_spans and calls:
            for result in genai_tool_messages(calls[-1].attributes.get(PROMPT_MESSAGES)):
                add_tool_result(contexts, calls[-1], "tool_message", result, "tool result in the prompt")
        add_earlier_turns(
            contexts, calls, lambda call: genai_tool_results(call.attributes.get(PROMPT_MESSAGES))
        )
        offered_tools = any(c.attributes.get(PROMPT_TOOLS) for c in calls)
        if question and answer and not (tool_spans or retrievals or contexts or offered_tools):
            return self._no_retrieval(trace, anchor)
        function_id = anchor.attributes.get(FUNCTION_ID)
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*calls, *tool_spans, *retrievals],
            tools=tool_spans,
            llm_outputs=[(call, _answer(call)) for call in calls],
            looked_in=_LOOKED_IN,
            route=function_id if isinstance(function_id, str) else None,
            session_id=_metadata(anchor, _SESSION_KEYS),
            user_id=_metadata(anchor, _USER_ID_KEYS),
        )

    def _no_retrieval(self, trace: Trace, anchor: DecodedSpan) -> Skip:
        return Skip(
            "no_retrieval",
            f"vercel_ai span {anchor.span_id} '{anchor.name}' of trace {trace.trace_id} "
            f"({anchor.service_name}): no tool call and no retrieval span recorded its documents (an app "
            "that puts retrieved documents into the prompt leaves them only inside the prompt text, "
            f"{PROMPT}, which is not split into documents); return them from a tool, record the retrieval "
            "as its own span (gen_ai.operation.name=retrieval with gen_ai.retrieval.documents), or use "
            "tracescore's decorators",
            span=anchor,
            convention=self.name,
        )


_LOOKED_IN = {
    "question": f"{PROMPT} of the span, else the last user message of {PROMPT_MESSAGES} of its first model "
    "call (neither is recorded with experimental_telemetry recordInputs: false)",
    "answer": f"{RESPONSE_TEXT} / {RESPONSE_OBJECT} of the span, else of its last model call (not recorded "
    "with recordOutputs: false, or when the last step only called tools)",
    "documents": f"{TOOL_RESULT} of ai.toolCall spans before the answering model call, retrieval spans "
    f"(ai.rerank, gen_ai retrieval, OpenInference RETRIEVER) and tool results in {PROMPT_MESSAGES}",
}


def _start(span: DecodedSpan) -> int:
    return span.start_time_unix_nano


def _question(anchor: DecodedSpan, calls: Sequence[DecodedSpan]) -> str | None:
    prompt = parse_json(anchor.attributes.get(PROMPT))
    if isinstance(prompt, Mapping):
        text = prompt.get("prompt")
        if isinstance(text, str) and text.strip():
            return text
        for key in ("prompt", "messages"):
            if isinstance(prompt.get(key), list) and (found := last_message_text(prompt[key], _USER)):
                return found
    return last_message_text(calls[0].attributes.get(PROMPT_MESSAGES), _USER) if calls else None


def _answer(span: DecodedSpan) -> str | None:
    attrs = span.attributes
    for key in _TEXT_KEYS:
        text = attrs.get(key)
        if isinstance(text, str) and text.strip():
            return text
    value = next((attrs[key] for key in _OBJECT_KEYS if attrs.get(key) is not None), None)
    return text_of(value, ANSWER_KEYS) if value is not None else None


def _metadata(anchor: DecodedSpan, keys: tuple[str, ...]) -> str | None:
    """The first text value of `keys` in the call's `experimental_telemetry.metadata`."""
    for key in keys:
        value = anchor.attributes.get(_METADATA + key)
        if isinstance(value, str) and value:
            return value
    return None


def _retrieval_kind(span: DecodedSpan) -> str | None:
    attrs = span.attributes
    if _operation(span) == _RERANK:
        return "reranker"
    if attrs.get(semconv.GEN_AI_OPERATION_NAME) == "retrieval":
        return "retriever"
    kind = attrs.get(semconv.OPENINFERENCE_SPAN_KIND)
    return "retriever" if isinstance(kind, str) and kind.upper() == "RETRIEVER" else None


def _add_retrieval(trace: Trace, contexts: Contexts, span: DecodedSpan) -> None:
    if contexts.full:
        contexts.skip_span()
        return
    kind = _retrieval_kind(span)
    if kind == "reranker":
        texts = _reranked(trace, span)
        if texts is None:
            contexts.note(
                f"{_RERANK} span {span.span_id} has no {RERANK_RANKING} on its {_RERANK_CALL} (recordOutputs "
                "off?): which of its documents the app kept is unknown, none read"
            )
            return
    else:
        attrs = span.attributes
        texts = [str(d) for d in indexed(attrs, semconv.RETRIEVAL_DOCUMENTS, "document.content")]
        texts = texts or documents_of(attrs.get(semconv.GEN_AI_RETRIEVAL_DOCUMENTS)) or []
    contexts.add(span, str(kind), texts)


def _reranked(trace: Trace, span: DecodedSpan) -> list[str] | None:
    """The documents `rerank()` returned, best first: `ai.documents` (each JSON-encoded) at the indices of
    its model call's `ai.ranking`."""
    candidates = span.attributes.get(RERANK_DOCUMENTS)
    ranking = next(
        (
            c.attributes[RERANK_RANKING]
            for c in trace.children(span)
            if _operation(c) == _RERANK_CALL and RERANK_RANKING in c.attributes
        ),
        None,
    )
    if not isinstance(candidates, list | tuple) or not isinstance(ranking, list | tuple):
        return None
    texts = []
    for entry in ranking:
        rank = parse_json(entry)
        index = rank.get("index") if isinstance(rank, Mapping) else None
        if isinstance(index, int) and 0 <= index < len(candidates):
            texts.append(_candidate_text(candidates[index]))
    return texts


def _candidate_text(candidate: Any) -> str:
    document = parse_json(candidate)
    if isinstance(document, str):
        return document
    found = documents_of([document])
    return found[0] if found else str(candidate)  # an object without a text field: judged as its JSON
