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

from collections.abc import Mapping
from typing import Any

from tracescore import semconv
from tracescore.extract._convention import PROMPT_DOCUMENTS_DOCS, Convention, Reading
from tracescore.extract._genai import GenAI
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._openinference import OpenInference
from tracescore.extract._read import (
    Prompt,
    answer_text,
    documents_of,
    indexed,
    message_prompt,
    parse_json,
    user_text,
)
from tracescore.model import ContextSourceKind, DecodedSpan, Trace, start_order

__all__ = ["VercelAI"]

# Retrieval the app recorded in another convention, read beside the SDK's spans.
_OPENINFERENCE, _GENAI = OpenInference(), GenAI()


class VercelAI(Convention):
    """The AI SDK's keys (`ai.*`; its spans are told apart by `ai.operationId`) and readers."""

    name = "vercel_ai"
    SCOPE = "ai"
    OPERATION = "ai.operationId"
    INTERACTION_KINDS = frozenset(
        {"ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject"}
    )
    LLM_KINDS = frozenset(
        {"ai.generateText.doGenerate", "ai.streamText.doStream", "ai.generateObject.doGenerate"}
        | {"ai.streamObject.doStream"}
    )
    TOOL_KINDS = frozenset({"ai.toolCall"})
    RERANK, RERANK_CALL = "ai.rerank", "ai.rerank.doRerank"
    PROMPT = "ai.prompt"
    PROMPT_MESSAGES = "ai.prompt.messages"
    PROMPT_TOOLS = "ai.prompt.tools"
    RESPONSE_TEXT = "ai.response.text"
    RESPONSE_OBJECT = "ai.response.object"
    RESPONSE_TOOL_CALLS = "ai.response.toolCalls"
    # The AI SDK before 4.0 wrote the result as ai.result.*.
    TEXT_KEYS = (RESPONSE_TEXT, "ai.result.text")
    OBJECT_KEYS = (RESPONSE_OBJECT, "ai.result.object")
    TOOL_NAME = "ai.toolCall.name"
    TOOL_RESULT = "ai.toolCall.result"
    TOOL_ARGS = "ai.toolCall.args"
    RERANK_DOCUMENTS = "ai.documents"
    RERANK_RANKING = "ai.ranking"
    INPUT_TOKENS = ("ai.usage.inputTokens", "ai.usage.promptTokens")
    OUTPUT_TOKENS = ("ai.usage.outputTokens", "ai.usage.completionTokens")
    FUNCTION_ID = "ai.telemetry.functionId"
    METADATA = "ai.telemetry.metadata."
    SESSION_KEYS = ("sessionId", "session_id", "conversationId")
    USER_ID_KEYS = ("userId", "user_id")
    TOOL_MESSAGE = "tool result in the prompt"
    LOOKED_IN = {
        "question": f"{PROMPT} of the span, else the last user message of {PROMPT_MESSAGES} of its first "
        "model call (neither is recorded with experimental_telemetry recordInputs: false)",
        "answer": f"{RESPONSE_TEXT} / {RESPONSE_OBJECT} of the span, else of its last model call (not "
        "recorded with recordOutputs: false, or when the last step only called tools)",
        "documents": f"{TOOL_RESULT} of ai.toolCall spans before the answering model call, retrieval spans "
        f"(ai.rerank, gen_ai retrieval, OpenInference RETRIEVER) and tool results in {PROMPT_MESSAGES}",
    }

    RUN_TOOL_NAME = (TOOL_NAME,)
    RUN_TOOL_ARGUMENTS = (TOOL_ARGS,)
    RUN_TOOL_RESULT = (TOOL_RESULT,)
    RUN_PROMPT_TOKENS = INPUT_TOKENS
    RUN_COMPLETION_TOKENS = OUTPUT_TOKENS
    RUN_MODEL_OUTPUT = (RESPONSE_TEXT, RESPONSE_TOOL_CALLS, RESPONSE_OBJECT)
    RUN_TOOL_DEFINITIONS = {PROMPT_TOOLS: ()}

    def kind(self, span: DecodedSpan) -> str:
        operation = span.attributes.get(self.OPERATION)
        if isinstance(operation, str):
            return operation
        return span.name if span.scope_name == self.SCOPE else ""

    def collect(self, reading: Reading) -> Reading:
        trace, anchor, around = reading.trace, reading.anchor, reading.around
        calls = sorted((s for s in around if self.is_llm(s)), key=start_order)
        # The last model call gives the answer: what ran after it started cannot have informed it.
        answered_at = calls[-1].start_time_unix_nano if calls else anchor.end_time_unix_nano
        tools = [s for s in around if self.is_tool(s)]
        inside_tools = {d.span_id for tool in tools for d in trace.descendants(tool)}
        # A retrieval inside a tool is read as the tool's result: that is what the model saw.
        retrievals = [
            (s, kind)
            for s in trace.beside(anchor)
            if s.start_time_unix_nano <= answered_at
            and s.span_id not in inside_tools
            and (kind := self._retrieval_kind(s))
        ]
        return reading.found(
            retrievals=retrievals,
            tools=tools,
            llms=calls,
            prompted=calls[-1:],
            sources=[*calls, *tools, *(s for s, _ in retrievals)],
        )

    def read_retrieval(self, reading: Reading, span: DecodedSpan, kind: ContextSourceKind) -> None:
        contexts = reading.contexts
        if kind == ContextSourceKind.RERANKER:
            texts = self._reranked(reading.trace, span)
            if texts is None:
                contexts.note(
                    f"{self.RERANK} span {span.span_id} has no {self.RERANK_RANKING} on its "
                    f"{self.RERANK_CALL} (recordOutputs off?): which of its documents the app kept is "
                    "unknown, none read"
                )
                return
        else:
            attrs = span.attributes
            flattened = indexed(attrs, _OPENINFERENCE.RETRIEVAL_DOCUMENTS, _OPENINFERENCE.DOCUMENT_CONTENT)
            texts = [str(d) for d in flattened] or _GENAI.documents(span, kind) or []
        contexts.add(span, kind, texts)

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        return genai_tool_results(llm.attributes.get(self.PROMPT_MESSAGES))

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """A model call's `ai.prompt.messages`; the call's `ai.prompt` (`system`, and `prompt` as text or
        messages, or `messages`)."""
        if self.PROMPT_MESSAGES in span.attributes:
            return message_prompt(span.attributes[self.PROMPT_MESSAGES])
        prompt = parse_json(span.attributes.get(self.PROMPT))
        if not isinstance(prompt, Mapping):
            return None
        asked = prompt.get("prompt")
        messages = prompt.get("messages") if not isinstance(asked, list) else asked
        found = message_prompt(messages or [], prompt.get("system")) or Prompt(None, None)
        return found._replace(user=asked) if isinstance(asked, str) else found

    def question(self, reading: Reading) -> str | None:
        prompt = parse_json(reading.anchor.attributes.get(self.PROMPT))
        if isinstance(prompt, Mapping):
            text = prompt.get("prompt")
            if isinstance(text, str) and text.strip():
                return text
            for key in ("prompt", "messages"):
                if isinstance(prompt.get(key), list) and (found := user_text(prompt[key])):
                    return found
        calls = reading.llms
        return user_text(calls[0].attributes.get(self.PROMPT_MESSAGES)) if calls else None

    def answer(self, reading: Reading) -> str | None:
        calls = reading.llms
        return self.llm_output(reading.anchor) or (self.llm_output(calls[-1]) if calls else None)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        attrs = llm.attributes
        for key in self.TEXT_KEYS:
            text = attrs.get(key)
            if isinstance(text, str) and text.strip():
                return text
        value = next((attrs[key] for key in self.OBJECT_KEYS if attrs.get(key) is not None), None)
        return answer_text(value) if value is not None else None

    def prompt_only(self, reading: Reading) -> str | None:
        if any(call.attributes.get(self.PROMPT_TOOLS) for call in reading.llms):
            return None  # the model was offered tools: not an app that put its documents in the prompt
        return (
            f"{reading.place()}: no tool call and no retrieval span recorded its documents (an app that puts "
            "retrieved documents into the prompt leaves them only inside the prompt text, "
            f"{self.PROMPT}, which is read only under a label that names them, {PROMPT_DOCUMENTS_DOCS}, and "
            "never split into guessed documents); label them (Context:, ## Context), return them from a "
            "tool, record the retrieval as its own span (gen_ai.operation.name=retrieval with "
            "gen_ai.retrieval.documents), or use tracescore's decorators"
        )

    def route(self, anchor: DecodedSpan) -> str | None:
        function_id = anchor.attributes.get(self.FUNCTION_ID)
        return function_id if isinstance(function_id, str) else None

    def named_conversation(self, anchor: DecodedSpan) -> tuple[str | None, str | None]:
        return self._metadata(anchor, self.SESSION_KEYS), self._metadata(anchor, self.USER_ID_KEYS)

    def _metadata(self, anchor: DecodedSpan, keys: tuple[str, ...]) -> str | None:
        """The first text value of `keys` in the call's `experimental_telemetry.metadata`."""
        for key in keys:
            value = anchor.attributes.get(self.METADATA + key)
            if isinstance(value, str) and value:
                return value
        return None

    def _retrieval_kind(self, span: DecodedSpan) -> ContextSourceKind | None:
        if self.kind(span) == self.RERANK:
            return ContextSourceKind.RERANKER
        if _GENAI.is_retrieval(span) or _OPENINFERENCE.kind(span) == semconv.SPAN_KIND_RETRIEVER:
            return ContextSourceKind.RETRIEVER
        return None

    def _reranked(self, trace: Trace, span: DecodedSpan) -> list[str] | None:
        """The documents `rerank()` returned, best first: `ai.documents` (each JSON-encoded) at the indices of
        its model call's `ai.ranking`."""
        candidates = span.attributes.get(self.RERANK_DOCUMENTS)
        ranking = next(
            (
                c.attributes[self.RERANK_RANKING]
                for c in trace.children(span)
                if self.kind(c) == self.RERANK_CALL and self.RERANK_RANKING in c.attributes
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
