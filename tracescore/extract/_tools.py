"""Tool results as retrieved context, and function-calling loops as one interaction.

Agents get their documents from tool calls: an OpenInference TOOL span's `output.value`, an OTel GenAI
`execute_tool` span's `gen_ai.tool.call.result`, a traceloop `tool` span's `traceloop.entity.output`, a
Vercel AI SDK `ai.toolCall` span's `ai.toolCall.result`, or, with no tool span at all (OpenAI function
calling), the tool-role messages passed to the next LLM call. A
result that is a list of documents gives one context per document; any other result (a number, a
sentence) is one context, noted as not document-like, because the answer may rest on it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tracescore.extract._context import Contexts
from tracescore.extract._read import documents_of, indexed, is_repr, parse_json
from tracescore.model import DecodedSpan

__all__ = [
    "add_tool_result",
    "answering_groups",
    "genai_tool_messages",
    "indexed_tool_messages",
    "ran_between",
    "tool_result_texts",
]

_USER_ROLES = ("user", "human")
_TOOL_ROLES = ("tool", "function", "ipython")
_TOOL_PARTS = ("tool_call_response", "tool_result", "function_response")
# LangChain stringifies a tool's list[Document] as its repr; page_content is a Python string literal in it,
# read back exactly (never guessed) when every Document in the text has one.
_DOCUMENT_REPR = re.compile(r"\bDocument\(")
_PAGE_CONTENT = re.compile(r"""page_content=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


def tool_result_texts(value: Any) -> tuple[list[str], bool]:
    """(texts, document_like) of one tool result: its documents when it is a list of them (also inside a
    LangChain ToolMessage, `{"type": "tool", "data": {"content": ...}}` or `{"type": "tool", "content":
    ...}`), else the whole result as one text."""
    parsed = parse_json(value)
    if isinstance(parsed, Mapping) and len(parsed) == 1 and "output" in parsed:  # a run's {"output": ...}
        parsed = parse_json(parsed["output"])
    if isinstance(parsed, Mapping) and str(parsed.get("type", "")).lower() == "tool":
        data = parsed.get("data") if isinstance(parsed.get("data"), Mapping) else parsed
        parsed = parse_json(data.get("content"))
    elif isinstance(parsed, Mapping) and isinstance(parsed.get("kwargs"), Mapping):  # LangChain constructor
        kwargs = parsed["kwargs"]
        if str(kwargs.get("type", "")).lower() == "tool" and "content" in kwargs:
            parsed = parse_json(kwargs["content"])
    if parsed is None:
        return [], False
    docs = documents_of(parsed)
    if docs:
        return docs, True
    if isinstance(parsed, list) and parsed and all(isinstance(p, Mapping) and "text" in p for p in parsed):
        return [str(p["text"]) for p in parsed], True  # content blocks
    if isinstance(parsed, str):
        if is_repr(parsed):
            return _page_contents(parsed), True  # else the repr itself, which Contexts drops and notes
        return [parsed], False
    if isinstance(value, str):
        return [value], False
    return [json.dumps(parsed, default=str)], False


def _page_contents(text: str) -> list[str]:
    literals = _PAGE_CONTENT.findall(text)
    if not literals or len(literals) != len(_DOCUMENT_REPR.findall(text)):
        return [text]  # a repr Contexts drops and notes
    try:
        return [str(ast.literal_eval(literal)) for literal in literals]
    except (ValueError, SyntaxError):
        return [text]


def add_tool_result(
    contexts: Contexts, span: DecodedSpan, kind: str, value: Any, what: str, answer: str | None = None
) -> None:
    """One tool result into `contexts`, with a note when it is not a list of documents. A result that is
    the `answer` itself (a tool the model calls to hand in its answer) is not evidence for it: noted."""
    if value is None:
        return
    if contexts.full:
        contexts.skip_span()
        return
    texts, document_like = tool_result_texts(value)
    if answer is not None and len(texts) == 1 and texts[0].split() == answer.split():
        contexts.note(f"{what} from span {span.span_id} '{span.name}' is the answer itself: not evidence")
        return
    if texts and not document_like:
        contexts.note(
            f"{what} from span {span.span_id} '{span.name}' is not document-like: judged as one text"
        )
    contexts.add(span, kind, texts)


def genai_tool_messages(messages: Any) -> list[Any]:
    """Tool results passed to an LLM call in OTel GenAI / OpenAI message lists (`gen_ai.input.messages`):
    role `tool` messages and `tool_call_response` parts, only after the last user message with text, so a
    conversation's earlier turns are never read as this turn's documents."""
    messages = parse_json(messages)
    if not isinstance(messages, list):
        return []
    start = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, Mapping) and _role(message) in _USER_ROLES and _has_user_text(message):
            start = index + 1
            break
    results: list[Any] = []
    for message in messages[start:]:
        if not isinstance(message, Mapping):
            continue
        parts = message.get("parts") if isinstance(message.get("parts"), list) else None
        if parts is not None:
            for part in parts:
                if isinstance(part, Mapping) and str(part.get("type", "")) in _TOOL_PARTS:
                    results.append(_first(part, ("response", "result", "content", "output")))
        elif _role(message) in _TOOL_ROLES:
            content = message.get("content")
            parts = _tool_result_parts(content)
            results.extend(parts if parts is not None else [content])
    return [r for r in results if r is not None]


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


def indexed_tool_messages(attributes: Mapping[str, Any], prefix: str, role: str, content: str) -> list[Any]:
    """Tool-role messages after the last user message of flattened message attributes
    (`llm.input_messages.N.message.role` / OpenLLMetry's `gen_ai.prompt.N.role`)."""
    roles = [str(r).lower() for r in indexed(attributes, prefix, role)]
    start = 0
    for index in range(len(roles) - 1, -1, -1):
        if roles[index] in _USER_ROLES:
            start = index + 1
            break
    return [
        value
        for index in range(start, len(roles))
        if roles[index] in _TOOL_ROLES
        and (value := attributes.get(f"{prefix}.{index}.{content}")) is not None
    ]


def answering_groups(
    llms: Sequence[DecodedSpan], asks_for_tool: Callable[[DecodedSpan], bool]
) -> list[tuple[list[DecodedSpan], int]]:
    """LLM calls (in start order) grouped into interactions: a call that asks for a tool joins the next call
    under the same parent (the function-calling loop: ask, run the tool, answer). Each group comes with the
    time after which its tool calls ran (the end of the previous group under that parent)."""
    groups: list[tuple[list[DecodedSpan], int]] = []
    pending: dict[str | None, list[DecodedSpan]] = {}
    since: dict[str | None, int] = {}
    for llm in llms:
        parent = llm.parent_span_id
        group = [*pending.pop(parent, []), llm]
        if asks_for_tool(llm):
            pending[parent] = group
        else:
            groups.append((group, since.get(parent, 0)))
            since[parent] = llm.end_time_unix_nano
    groups.extend((group, since.get(parent, 0)) for parent, group in pending.items())
    groups.sort(key=lambda item: item[0][0].start_time_unix_nano)
    return groups


def ran_between(spans: Iterable[DecodedSpan], since: int, before: DecodedSpan) -> list[DecodedSpan]:
    """The spans that started after `since` and before `before` started: one loop's tool calls."""
    return [
        s for s in spans if since <= s.start_time_unix_nano <= before.start_time_unix_nano and s is not before
    ]


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
