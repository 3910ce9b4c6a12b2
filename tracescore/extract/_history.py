"""Tool results in an LLM call's input messages, each with the turn of the conversation it belongs to.

An LLM call's input is the conversation so far, as the app kept it: earlier turns (a user message, the
model's tool calls, their results, its answer) and then this turn's. A tool result after the last user
message with text is this turn's (`turns_back` 0); one before it belongs to an earlier turn, counted back by
the user messages after it (1: the previous turn). Only tool results are read, never assistant text: an
answer never supports itself, and an earlier answer may itself be a hallucination.

Two shape families, one rule each. Message lists (OTel GenAI `gen_ai.input.messages`, OpenAI-style lists,
MLflow's `mlflow.spanInputs.messages`, the Vercel AI SDK's `ai.prompt.messages`, Langfuse generation input,
Haystack's ChatMessages): a tool-role message's content (or its text parts, as LiteLLM's OTel callback writes
it), or a tool-result content part in any message (`tool_call_response`, `tool_result`, `tool-result`,
`tool_call_result`, `function_response`). Flattened
attributes (OpenInference `llm.input_messages.N.message.role`, OpenLLMetry `gen_ai.prompt.N.role`): each
tool-role (`tool`, `function`) message's result, read by its convention (`MessageResults`: its content, its
content parts, or the function results recorded beside it). A result is kept as recorded: the envelope a
framework passes it in (`{"name", "content", "call_id"}`, `{"result": ...}`) is opened where results are read
(`_tools.tool_result_texts`). A tool-role message's result is named (`tool_name`) by its own `name`, else
by the assistant's OpenAI-style `tool_calls` entry whose `id` is its `tool_call_id`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping
from typing import Any

from tracescore.extract._read import USER_ROLES, indexed, parse_json

__all__ = [
    "MessageResults",
    "TurnResult",
    "genai_tool_messages",
    "genai_tool_results",
    "indexed_tool_messages",
    "indexed_tool_results",
    "tool_name",
]

_TOOL_ROLES = ("tool", "function", "ipython")
# Content parts that carry a tool's result, told apart by their `type` (OTel GenAI `tool_call_response`,
# Anthropic `tool_result`, the Vercel AI SDK's `tool-result`) or by their one key (Haystack's ChatMessage
# `tool_call_result`, Gemini's `function_response`); each with the fields its result may sit in.
_TOOL_PART_TYPES = frozenset({"tool_call_response", "tool_result", "function_response", "tool-result"})
_TYPED_RESULT_FIELDS = ("response", "result", "content", "output")
_TOOL_PART_KEYS = {
    "tool_call_result": "result",
    "function_response": "response",
    "functionResponse": "response",
}


class TurnResult(tuple[Any, int]):
    """(the result as recorded, how many turns back it was given: 0 for this turn's); `tool` names the
    tool it is the result of where the message list does (`tool_name`). Still a pair: adapters unpack it."""

    tool: str | None = None

    def __new__(cls, value: Any, back: int, tool: str | None = None) -> TurnResult:
        result = super().__new__(cls, (value, back))
        result.tool = tool
        return result


def tool_name(result: tuple[Any, int]) -> str | None:
    """The tool a result is of, where its message list names it (None for a plain pair)."""
    return result.tool if isinstance(result, TurnResult) else None


# Reads the results of one tool-role message of flattened attributes, given the message's prefix
# (`llm.input_messages.3`): a convention records a tool message's result under its own keys.
MessageResults = Callable[[Mapping[str, Any], str], list[Any]]


def genai_tool_results(messages: Any) -> list[TurnResult]:
    """Every tool result in a message list, with its turn: role `tool` / `function` messages and tool-result
    content parts in any message (`_part_result`; a failed AI SDK tool's `error-*` output is not evidence).
    A user message that only carries tool results (Anthropic, Gemini) is not a turn of its own."""
    messages = parse_json(messages)
    if not isinstance(messages, list):
        return []
    users = [
        index
        for index, message in enumerate(messages)
        if isinstance(message, Mapping) and _role(message) in USER_ROLES and _is_user_turn(message)
    ]
    results: list[TurnResult] = []
    called: dict[str, str] = {}  # tool call id -> the tool's name, from the assistant messages so far
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        called.update(_called(message))
        found = _message_results(message)
        if found:
            back = len(users) - bisect.bisect_right(users, index)  # user messages after this one
            tool = _result_name(message, called)
            results.extend(TurnResult(value, back, tool) for value in found if value is not None)
    return results


def _called(message: Mapping[str, Any]) -> dict[str, str]:
    """The tool calls an OpenAI-style assistant message makes (`tool_calls`: `{"id", "function": {"name"}}`),
    by id."""
    calls = message.get("tool_calls")
    named: dict[str, str] = {}
    for call in calls if isinstance(calls, list) else ():
        function = call.get("function") if isinstance(call, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else None
        if isinstance(name, str) and isinstance(call.get("id"), str):
            named[call["id"]] = name
    return named


def _result_name(message: Mapping[str, Any], called: Mapping[str, str]) -> str | None:
    """A tool-role message's tool: its own `name`, else the assistant's call it answers (`tool_call_id`:
    LiteLLM's and OpenAI's tool messages carry no name)."""
    if _role(message) not in _TOOL_ROLES:
        return None
    name = message.get("name")
    if isinstance(name, str) and name:
        return name
    call = message.get("tool_call_id")
    return called.get(call) if isinstance(call, str) else None


def genai_tool_messages(messages: Any) -> list[Any]:
    """This turn's tool results in a message list (after the last user message with text), so a
    conversation's earlier turns are never read as this turn's documents."""
    return [value for value, back in genai_tool_results(messages) if back == 0]


def indexed_tool_results(
    attributes: Mapping[str, Any], prefix: str, role: str, results: MessageResults
) -> list[TurnResult]:
    """Every tool-role message of flattened message attributes (`llm.input_messages.N.message.role` /
    OpenLLMetry's `gen_ai.prompt.N.role`), with its turn; `results` reads one message's results."""
    roles = [str(r).lower() for r in indexed(attributes, prefix, role)]
    users = [index for index, name in enumerate(roles) if name in USER_ROLES]
    found: list[TurnResult] = []
    for index, name in enumerate(roles):
        if name in _TOOL_ROLES:
            back = len(users) - bisect.bisect_right(users, index)
            found.extend(
                (value, back) for value in results(attributes, f"{prefix}.{index}") if value is not None
            )
    return found


def indexed_tool_messages(
    attributes: Mapping[str, Any], prefix: str, role: str, results: MessageResults
) -> list[Any]:
    """This turn's tool-role messages of flattened message attributes (after the last user message)."""
    return [value for value, back in indexed_tool_results(attributes, prefix, role, results) if back == 0]


def _message_results(message: Mapping[str, Any]) -> list[Any]:
    """The tool results one message carries: its tool-result parts (`parts`, or `content` as a list of
    parts), else, for a tool-role message, its content. A message with GenAI `parts` and none of them a tool
    result carries none."""
    parts = message.get("parts")
    listed = parts if isinstance(parts, list) else message.get("content")
    tool_role = _role(message) in _TOOL_ROLES
    if isinstance(listed, list):
        tool_parts = [part for part in listed if _is_tool_part(part)]
        if tool_parts:
            return [value for part in tool_parts if (value := _part_result(part)) is not None]
        if listed is parts:
            # LiteLLM's OTel callback writes a tool message's result as its text parts.
            return [part["content"] for part in parts if _is_text_part(part)] if tool_role else []
    if tool_role:
        content = message.get("content")
        return [] if content is None else [content]
    return []


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and part.get("content") is not None


def _is_tool_part(part: Any) -> bool:
    if not isinstance(part, Mapping):
        return False
    return part.get("type") in _TOOL_PART_TYPES or any(key in part for key in _TOOL_PART_KEYS)


def _part_result(part: Mapping[str, Any]) -> Any:
    """The result a tool-result part carries (None for a failed AI SDK tool's `error-*` output: not
    evidence). The AI SDK wraps it as `{"type": "text" | "json", "value": ...}` (`result` before v5)."""
    if part.get("type") in _TOOL_PART_TYPES:
        value = _first(part, _TYPED_RESULT_FIELDS)
    else:
        key = next(key for key in _TOOL_PART_KEYS if key in part)
        inner = part[key]
        value = inner.get(_TOOL_PART_KEYS[key]) if isinstance(inner, Mapping) else inner
    if isinstance(value, Mapping) and "value" in value and isinstance(value.get("type"), str):
        if value["type"].startswith("error"):
            return None
        value = value["value"]
    return value


def _role(message: Mapping[str, Any]) -> str:
    return str(message.get("role") or message.get("type") or "").lower()


def _is_user_turn(message: Mapping[str, Any]) -> bool:
    """A user message that asks something: text or other content, not only tool results (which Anthropic
    and Gemini pass in user-role messages)."""
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    parts = content if isinstance(content, list) else message.get("parts")
    if isinstance(parts, list):
        return any(isinstance(p, Mapping) and not _is_tool_part(p) for p in parts)
    return content is not None


def _first(part: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if part.get(key) is not None:
            return part[key]
    return None
