"""Tool results in an LLM call's input messages, each with the turn of the conversation it belongs to.

An LLM call's input is the conversation so far, as the app kept it: earlier turns (a user message, the
model's tool calls, their results, its answer) and then this turn's. A tool result after the last user
message with text is this turn's (`turns_back` 0); one before it belongs to an earlier turn, counted back by
the user messages after it (1: the previous turn). Only tool results are read, never assistant text: an
answer never supports itself, and an earlier answer may itself be a hallucination.

Two shapes: message lists (OTel GenAI `gen_ai.input.messages`, OpenAI-style, the Vercel AI SDK's
`ai.prompt.messages`, Langfuse generation input) and flattened attributes (OpenInference
`llm.input_messages.N.message.role`, OpenLLMetry `gen_ai.prompt.N.role`).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from tracescore.extract._read import USER_ROLES, indexed, parse_json

__all__ = [
    "genai_tool_messages",
    "genai_tool_results",
    "indexed_tool_messages",
    "indexed_tool_results",
]

_TOOL_ROLES = ("tool", "function", "ipython")
_TOOL_PARTS = ("tool_call_response", "tool_result", "function_response")

# (the result as recorded, how many turns back it was given: 0 for this turn's)
TurnResult = tuple[Any, int]


def genai_tool_results(messages: Any) -> list[TurnResult]:
    """Every tool result in a message list, with its turn: role `tool` messages and `tool_call_response`
    parts (a Vercel AI SDK `tool-result` part's output; a failed tool's `error-*` output is not evidence)."""
    messages = parse_json(messages)
    if not isinstance(messages, list):
        return []
    users = [
        index
        for index, message in enumerate(messages)
        if isinstance(message, Mapping) and _role(message) in USER_ROLES and _has_user_text(message)
    ]
    results: list[TurnResult] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        found: list[Any] = []
        parts = message.get("parts") if isinstance(message.get("parts"), list) else None
        if parts is not None:
            for part in parts:
                if isinstance(part, Mapping) and str(part.get("type", "")) in _TOOL_PARTS:
                    found.append(_first(part, ("response", "result", "content", "output")))
        elif _role(message) in _TOOL_ROLES:
            content = message.get("content")
            tool_parts = _tool_result_parts(content)
            found.extend(tool_parts if tool_parts is not None else [content])
        if found:
            back = len(users) - bisect.bisect_right(users, index)  # user messages after this one
            results.extend((value, back) for value in found if value is not None)
    return results


def genai_tool_messages(messages: Any) -> list[Any]:
    """This turn's tool results in a message list (after the last user message with text), so a
    conversation's earlier turns are never read as this turn's documents."""
    return [value for value, back in genai_tool_results(messages) if back == 0]


def indexed_tool_results(
    attributes: Mapping[str, Any], prefix: str, role: str, content: str
) -> list[TurnResult]:
    """Every tool-role message of flattened message attributes (`llm.input_messages.N.message.role` /
    OpenLLMetry's `gen_ai.prompt.N.role`), with its turn."""
    roles = [str(r).lower() for r in indexed(attributes, prefix, role)]
    users = [index for index, name in enumerate(roles) if name in USER_ROLES]
    return [
        (value, len(users) - bisect.bisect_right(users, index))
        for index, name in enumerate(roles)
        if name in _TOOL_ROLES and (value := attributes.get(f"{prefix}.{index}.{content}")) is not None
    ]


def indexed_tool_messages(attributes: Mapping[str, Any], prefix: str, role: str, content: str) -> list[Any]:
    """This turn's tool-role messages of flattened message attributes (after the last user message)."""
    return [value for value, back in indexed_tool_results(attributes, prefix, role, content) if back == 0]


def _tool_result_parts(content: Any) -> list[Any] | None:
    """The results in a Vercel AI SDK tool message: `{"type": "tool-result", "output": {"type": "json",
    "value": ...}}` parts (`result` before v5); a failed tool's `error-*` output is not evidence."""
    if not isinstance(content, list):
        return None
    parts = [p for p in content if isinstance(p, Mapping) and p.get("type") == "tool-result"]
    if not parts:
        return None
    results = []
    for part in parts:
        output = part.get("output", part.get("result"))
        if isinstance(output, Mapping) and "value" in output:
            if str(output.get("type", "")).startswith("error"):
                continue
            output = output["value"]
        results.append(output)
    return results


def _role(message: Mapping[str, Any]) -> str:
    return str(message.get("role") or message.get("type") or "").lower()


def _has_user_text(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    parts = content if isinstance(content, list) else message.get("parts")
    if isinstance(parts, list):
        return any(isinstance(p, Mapping) and p.get("type", "text") == "text" for p in parts)
    return content is not None


def _first(part: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if part.get(key) is not None:
            return part[key]
    return None
