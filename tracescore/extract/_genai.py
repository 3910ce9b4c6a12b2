"""OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` with message content on the span.

The interaction is the outermost `invoke_workflow` / `invoke_agent` span, or without one each outermost `chat`
/ `text_completion` / `generate_content` span (a chat that asks for a tool is one interaction with the chat
that answers after it). The question is the last user message of `gen_ai.input.messages` (of the first chat
call when the agent span has none: Pydantic AI), the answer the assistant text of `gen_ai.output.messages`
(else the last chat call's). The documents come from `retrieval` spans (`gen_ai.retrieval.documents`) and
`execute_tool` spans (`gen_ai.tool.call.result`) below the interaction or beside a chat span; without a tool
span that recorded its result, from the tool results passed to the last chat call; after them, the tool
results of the conversation's earlier turns in `gen_ai.input.messages`. System instructions are never read as
documents.
"""

from __future__ import annotations

from collections.abc import Iterator

from tracescore import semconv
from tracescore.extract._context import Contexts
from tracescore.extract._history import genai_tool_results
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import documents_of, is_repr, last_message_text, parse_json
from tracescore.extract._tools import (
    add_earlier_turns,
    add_tool_result,
    answering_groups,
    called_by_tool,
    genai_tool_messages,
    ran_between,
)
from tracescore.model import DecodedSpan, Interaction, Trace

__all__ = ["GenAIRecognizer"]

_WORKFLOWS = frozenset({"invoke_workflow", "invoke_agent"})
_GENERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_RETRIEVAL = "retrieval"
_TOOL = "execute_tool"
RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"
RETRIEVAL_QUERY = "gen_ai.retrieval.query.text"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
# pydantic-ai before its GenAI-convention version 2 wrote `tool_response` / `tool_arguments`.
_TOOL_RESULTS = ("gen_ai.tool.call.result", "tool_response")
_TOOL_ARGUMENTS = ("gen_ai.tool.call.arguments", "tool_arguments")
_FINAL_RESULT = "final_result"


def _operation(span: DecodedSpan) -> str:
    operation = span.attributes.get(semconv.GEN_AI_OPERATION_NAME)
    if isinstance(operation, str):
        return operation
    # Span names follow `{operation} {target}` when a producer omits the attribute.
    name = span.name
    if name.startswith(("invoke_agent", "execute_tool")):
        return name.split(" ", 1)[0]
    return _TOOL if "gen_ai.tool.name" in span.attributes else ""


class GenAIRecognizer:
    name = "genai"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        workflows = trace.outermost(lambda s: _operation(s) in _WORKFLOWS)
        if workflows:
            for anchor in workflows:
                yield self._read(trace, anchor, list(trace.descendants(anchor)))
            return
        chats = trace.outermost(lambda s: _operation(s) in _GENERATIONS)
        for group, since in answering_groups(chats, _asks_for_tool):
            yield self._read(trace, group[-1], trace.beside(group[-1]), group, since)

    def _read(
        self,
        trace: Trace,
        anchor: DecodedSpan,
        around: list[DecodedSpan],
        group: list[DecodedSpan] | None = None,
        since: int = 0,
    ) -> Interaction | Skip:
        retrievals = [s for s in around if _operation(s) == _RETRIEVAL]
        contexts = Contexts()
        for retrieval in retrievals:
            if contexts.full:
                contexts.skip_span()
            else:
                docs = documents_of(retrieval.attributes.get(RETRIEVAL_DOCUMENTS))
                contexts.add(retrieval, "retriever", docs or ())
        tools = [s for s in around if _operation(s) == _TOOL]
        if group is not None:
            tools = ran_between(tools, since, anchor)
        for tool in tools:
            add_tool_result(contexts, tool, "tool", _tool_result(tool), "tool result", _tool_arguments(tool))
        chats = group if group is not None else [s for s in around if _operation(s) in _GENERATIONS]
        if all(_tool_result(tool) is None for tool in tools):
            # No tool span recorded its result (autogen-core's carry names only; content capture off): the
            # results passed to the model are what its answer rests on.
            _add_tool_messages(contexts, chats)
        answering = [chat for chat in chats if not called_by_tool(trace, chat, anchor, _is_tool)]
        add_earlier_turns(contexts, answering, _input_tool_results)
        question = _question(chats[0] if group else anchor)
        if question is None and chats:
            question = _question(chats[0])
        answer = _answer(anchor)
        if answer is None or is_repr(answer):
            # No answer, or an object's repr where text belongs: the text of the chat that wrote it.
            answer = (
                next((a for c in reversed(chats) if (a := _answer(c)) and not is_repr(a)), None) or answer
            )
        if answer is None and isinstance(anchor.attributes.get(_FINAL_RESULT), str):
            answer = anchor.attributes[_FINAL_RESULT]  # pydantic-ai: the agent's output
        asked = [r for r in retrievals if not called_by_tool(trace, r, anchor, _is_tool)]
        if question is None and asked:
            # A retrieval the workflow made itself; a tool's is the model's search, not the question.
            query = asked[0].attributes.get(RETRIEVAL_QUERY)
            question = str(query) if query is not None else None
        if not contexts and any(SYSTEM_INSTRUCTIONS in s.attributes for s in (anchor, *chats)):
            contexts.note(f"{SYSTEM_INSTRUCTIONS} are not read as documents")
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*retrievals, *chats, *tools],
            tools=tools,
            looked_in=_UNANSWERED if group is not None and _asks_for_tool(anchor) else _LOOKED_IN,
            llm_outputs=[(chat, _answer(chat)) for chat in chats],
        )


_LOOKED_IN = {
    "question": f"the last user message of {semconv.GEN_AI_INPUT_MESSAGES} of the span or its first chat",
    "answer": f"the assistant message of {semconv.GEN_AI_OUTPUT_MESSAGES} of the span or its last chat",
    "documents": f"the content of each document in {RETRIEVAL_DOCUMENTS} of retrieval spans, "
    f"{_TOOL_RESULTS[0]} of execute_tool spans and tool results in {semconv.GEN_AI_INPUT_MESSAGES}; "
    "document ids alone cannot be checked",
}


_UNANSWERED = {
    **_LOOKED_IN,
    "answer": "the chat's output: it asked for a tool and no later chat beside it answered (the trace may "
    "be incomplete)",
}


def _is_tool(span: DecodedSpan) -> bool:
    return _operation(span) == _TOOL


def _tool_result(span: DecodedSpan) -> object:
    return _first(span, _TOOL_RESULTS)


def _tool_arguments(span: DecodedSpan) -> object:
    return _first(span, _TOOL_ARGUMENTS)


def _first(span: DecodedSpan, keys: tuple[str, ...]) -> object:
    for key in keys:
        if (value := span.attributes.get(key)) is not None:
            return value
    return None


def _input_tool_results(chat: DecodedSpan) -> list[tuple[object, int]]:
    return genai_tool_results(chat.attributes.get(semconv.GEN_AI_INPUT_MESSAGES))


def _add_tool_messages(contexts: Contexts, chats: list[DecodedSpan]) -> None:
    for chat in reversed(chats):
        results = genai_tool_messages(chat.attributes.get(semconv.GEN_AI_INPUT_MESSAGES))
        if results:
            for result in results:
                add_tool_result(contexts, chat, "tool_message", result, "tool message passed to LLM")
            return


def _asks_for_tool(span: DecodedSpan) -> bool:
    messages = parse_json(span.attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES))
    if isinstance(messages, list):
        for message in messages:
            parts = message.get("parts") if isinstance(message, dict) else None
            if isinstance(parts, list) and any(
                isinstance(p, dict) and p.get("type") == "tool_call" for p in parts
            ):
                return True
    return _answer(span) is None


def _question(span: DecodedSpan) -> str | None:
    messages = parse_json(span.attributes.get(semconv.GEN_AI_INPUT_MESSAGES))
    return last_message_text(messages, roles=("user", "human"))


def _answer(span: DecodedSpan) -> str | None:
    messages = parse_json(span.attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES))
    return last_message_text(messages, roles=("assistant", "ai", "model"))
