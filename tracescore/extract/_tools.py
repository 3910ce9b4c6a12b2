"""Tool results as retrieved context, and function-calling loops as one interaction.

Agents get their documents from tool calls: an OpenInference TOOL span's `output.value`, an OTel GenAI
`execute_tool` span's `gen_ai.tool.call.result`, a traceloop `tool` span's `traceloop.entity.output`, a
Vercel AI SDK `ai.toolCall` span's `ai.toolCall.result`, or, with no tool span at all (OpenAI function
calling), the tool-role messages passed to the next LLM call. A result that is a list of documents (also as
`str()` of a Python list, read back exactly) gives one context per document; any other result (a number, a
sentence) is one context, noted as not document-like, because the answer may rest on it.

An answer never supports itself. A tool result that merely carries the answer is not evidence for it and
is dropped, with a note, once the answer is known (`drop_answer_carriers`): a result whose call arguments
hold the answer (a final-answer tool, a tool handed the answer to send or store), a result that is the
answer (its text, or one of its values, has the answer's words: an agent-as-tool whose reply the caller
repeats, `{"response": answer}`), and the result of a tool that started after the LLM call whose output
is the answer had ended (called after the answer was written). A result that contains the answer among
other text, and a list of documents one of which is the answer, are kept: an answer may quote its sources.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from tracescore.extract._context import MAX_CONTEXT_CHARS, Contexts, ToolCall
from tracescore.extract._read import documents_of, indexed, is_repr, parse_json
from tracescore.model import DecodedSpan, Trace

__all__ = [
    "add_tool_result",
    "answering_groups",
    "called_by_tool",
    "drop_answer_carriers",
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
_MAX_LITERAL_ITEMS = 256


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
    if isinstance(parsed, str):
        parsed = _python_list(parsed)
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


def _python_list(text: str) -> Any:
    """A tool's list written with Python's str() (`['a', 'b']`: Semantic Kernel, smolagents observations)
    read back as the list when it is one literal of strings or dicts; else `text` itself. Only literals are
    read (never code run), up to the size of everything one interaction may judge and `_MAX_LITERAL_ITEMS`
    items (parsing costs about 1 KB and 50 us an item: a list of 100,000 short strings stays one text)."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")) or len(stripped) > MAX_CONTEXT_CHARS:
        return text
    separators = sum(stripped.count(s) for s in ("', ", '", ', "}, "))  # at least one per item
    if separators >= _MAX_LITERAL_ITEMS:
        return text
    try:
        value = ast.literal_eval(stripped)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return text
    if isinstance(value, list) and value and all(isinstance(v, str | dict) for v in value):
        return value
    return text


def _page_contents(text: str) -> list[str]:
    literals = _PAGE_CONTENT.findall(text)
    if not literals or len(literals) != len(_DOCUMENT_REPR.findall(text)):
        return [text]  # a repr Contexts drops and notes
    try:
        return [str(ast.literal_eval(literal)) for literal in literals]
    except (ValueError, SyntaxError):
        return [text]


def add_tool_result(
    contexts: Contexts, span: DecodedSpan, kind: str, value: Any, what: str, arguments: Any = None
) -> None:
    """One tool result into `contexts` (noted when it is not a list of documents). `arguments` are the
    call's arguments as recorded (a JSON string or a mapping), when the convention records them: a result
    whose arguments hold the answer is not evidence for it (`drop_answer_carriers`)."""
    if value is None:
        return
    if contexts.full:
        contexts.skip_span()
        return
    texts, document_like = tool_result_texts(value)
    contexts.add(span, kind, texts, ToolCall(span, arguments, document_like, what))


# Text compared with the answer: its words, case-folded, so quoting, spacing and punctuation do not matter.
_WORD = re.compile(r"\w+")
# An answer of fewer words (a number, a name) may well sit inside a search query the model wrote; from this
# many words on, arguments that contain it were handed the answer.
_MIN_CONTAINED_WORDS = 4
_MAX_COMPARED_CHARS = 200_000  # a longer value (a code blob, a file) is not compared: bounded work per tool
_MAX_VALUES = 256
_MAX_DEPTH = 6


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def drop_answer_carriers(
    contexts: Contexts, answer: str, llm_outputs: Iterable[tuple[DecodedSpan, str | None]] = ()
) -> None:
    """Drop the tool results that merely carry `answer` (never evidence for it), noting each. `llm_outputs`
    are the interaction's LLM calls with their text output: they tell when the answer was written."""
    results = contexts.tool_results()
    if not results:
        return  # most interactions: nothing to compare
    key = _words(answer)
    if not key:
        return
    written_at = _written_at(key, llm_outputs)
    # One ToolCall per tool result: a result's documents share its verdict (only a result read as one text
    # is compared with the answer itself).
    reasons: dict[int, str | None] = {}
    dropped = []
    for position, text, call in results:
        if id(call) not in reasons:
            reasons[id(call)] = _carried(key, text, call, written_at)
        if (reason := reasons[id(call)]) is not None:
            dropped.append(position)
            contexts.note(
                f"tool result from span {call.span.span_id} '{call.span.name}' not judged: {reason} (an "
                "answer never supports itself)"
            )
    contexts.drop(dropped)


def _written_at(key: list[str], llm_outputs: Iterable[tuple[DecodedSpan, str | None]]) -> int | None:
    """When the answer was written: the end of the last LLM call whose text output is the answer (same
    words: a model that says it twice wrote it, as delivered, the second time, after the tools between);
    None when no LLM call's output is the answer as such (e.g. it sits in code or a tool call)."""
    ends = [
        llm.end_time_unix_nano
        for llm, output in llm_outputs
        if output and len(output) <= _MAX_COMPARED_CHARS and _words(output) == key
    ]
    return max(ends) if ends else None


def _carried(key: list[str], result: str, call: ToolCall, written_at: int | None) -> str | None:
    """Why one tool result (`result`, a text read from `call`) merely carries the answer (its words: `key`)
    and so is not evidence for it, or None when it may support it. See the module docstring."""
    if written_at is not None and call.span.start_time_unix_nano >= written_at:
        return "the tool was called after the LLM call that wrote the answer"
    if call.arguments is not None and any(
        _holds(value, key, contained=len(key) >= _MIN_CONTAINED_WORDS) for value in _strings(call.arguments)
    ):
        return "its call arguments hold the answer"
    if not call.document_like and any(_holds(value, key, contained=False) for value in _strings(result)):
        return "its result is the answer"
    return None


def _holds(value: str, key: list[str], *, contained: bool) -> bool:
    if len(value) > _MAX_COMPARED_CHARS:
        return False
    words = _words(value)
    if words == key:
        return True
    return contained and len(words) > len(key) and f" {' '.join(key)} " in f" {' '.join(words)} "


def _strings(value: Any) -> list[str]:
    """The text of `value` and, when it is JSON or a structure, its string values (bounded)."""
    found: list[str] = [value] if isinstance(value, str) else []
    if isinstance(value, int | float) and not isinstance(value, bool):
        return [str(value)]  # final_answer(14)
    if isinstance(value, str) and len(value) > _MAX_COMPARED_CHARS:
        return found  # not parsed either: no value of a text this long is compared
    stack = [(parse_json(value), 0)]
    while stack and len(found) < _MAX_VALUES:
        item, depth = stack.pop()
        if isinstance(item, str):
            if item is not value:
                found.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            found.append(str(item))
        elif depth < _MAX_DEPTH and isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif depth < _MAX_DEPTH and isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
    return found


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


def called_by_tool(
    trace: Trace, span: DecodedSpan, anchor: DecodedSpan, is_tool: Callable[[DecodedSpan], bool]
) -> bool:
    """Whether `span` ran inside a tool call below `anchor`: its input is what the model wrote (a search
    query), never the user's question, and an LLM call there has the tool's own prompt."""
    for ancestor in trace.ancestors(span):
        if ancestor.span_id == anchor.span_id:
            return False
        if is_tool(ancestor):
            return True
    return False


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
