"""Tool results as retrieved context, and function-calling loops as one interaction.

Agents get their documents from tool calls: an OpenInference TOOL span's `output.value`, an OTel GenAI
`execute_tool` span's `gen_ai.tool.call.result`, a traceloop `tool` span's `traceloop.entity.output`, a
Vercel AI SDK `ai.toolCall` span's `ai.toolCall.result`, or, with no tool span at all (OpenAI function
calling), the tool-role messages passed to the next LLM call. A result that is a list of documents (also as
`str()` of a Python list, read back exactly; or rows of one text and its scores, `{name, similarity}`) gives
one context per document; any other result (a number, a sentence) is one context, noted as not
document-like, because the answer may rest on it.

An answer never supports itself. A tool result that merely carries the answer is not evidence for it and
is dropped, with a note, once the answer is known (`drop_answer_carriers`): a result whose call arguments
hold the answer (a final-answer tool, a tool handed the answer to send or store), a result that is the
answer (its text, or one of its values, has the answer's words: an agent-as-tool whose reply the caller
repeats, `{"response": answer}`), and the result of a tool that started after the LLM call whose output
is the answer had ended (called after the answer was written). A result that contains the answer among
other text, and a list of documents one of which is the answer, are kept: an answer may quote its sources.

A conversation's earlier turns: the tool results of earlier turns that the app kept in the answering LLM
call's input are evidence too, after this turn's own documents (`add_earlier_turns`): a follow-up answered
from what an earlier turn looked up is judged against it. Earlier answers never are (see `_history`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from tracescore.extract._context import MAX_CONTEXT_CHARS, Contexts, ToolCall
from tracescore.extract._history import TurnResult, genai_tool_messages, indexed_tool_messages
from tracescore.extract._read import documents_of, is_repr, parse_json
from tracescore.model import ContextSourceKind, DecodedSpan, Trace, start_order

__all__ = [
    "add_earlier_turns",
    "add_tool_result",
    "answering_groups",
    "called_by_tool",
    "drop_answer_carriers",
    "genai_tool_messages",
    "indexed_tool_messages",
    "ran_between",
    "tool_result_texts",
]

# LangChain stringifies a tool's list[Document] as its repr; page_content is a Python string literal in it,
# read back exactly (never guessed) when every Document in the text has one.
_DOCUMENT_REPR = re.compile(r"\bDocument\(")
_PAGE_CONTENT = re.compile(r"""page_content=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
_MAX_LITERAL_ITEMS = 256
# A result's envelope (`_opened`): the field the result is in, and the fields that name the call beside it.
_RESULT_FIELDS = ("content", "response", "result", "output")
_CALL_FIELDS = frozenset({"name", "id", "call_id", "tool_call_id", "is_error", "isError"})
_TOOL_MESSAGE = "ToolMessage"  # a LangChain-serialised object's class, the last of its `id`


def tool_result_texts(value: Any) -> tuple[list[str], bool]:
    """(texts, document_like) of one tool result: its documents when it is a list of them (also inside a
    LangChain ToolMessage, `{"type": "tool", "data": {"content": ...}}` or `{"type": "tool", "content":
    ...}`, a LlamaIndex ToolOutput's text blocks, or the envelope a framework passes a result in:
    `_opened`), else the whole result as one text."""
    parsed = _opened(parse_json(value))
    if isinstance(parsed, Mapping) and str(parsed.get("type", "")).lower() == "tool":
        data = parsed.get("data")
        parsed = parse_json((data if isinstance(data, Mapping) else parsed).get("content"))
    elif isinstance(parsed, Mapping) and isinstance(parsed.get("kwargs"), Mapping):  # LangChain constructor
        kwargs = parsed["kwargs"]
        # Python's kwargs say `type: tool`; LangChain.js's only name the class (`id: [..., "ToolMessage"]`).
        named = parsed.get("id")
        tool = str(kwargs.get("type", "")).lower() == "tool" or (
            isinstance(named, list) and named[-1:] == [_TOOL_MESSAGE]
        )
        if tool and "content" in kwargs:
            parsed = parse_json(kwargs["content"])
    if isinstance(parsed, Mapping) and "tool_name" in parsed and isinstance(parsed.get("blocks"), list):
        # A LlamaIndex ToolOutput: what the model was given is its text blocks (`raw_output` may be an
        # object the tool returned, dumped).
        texts = [
            b["text"] for b in parsed["blocks"] if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        ]
        parsed = texts[0] if len(texts) == 1 else texts or None
    parsed = _opened(parsed)
    if parsed is None:
        return [], False
    if isinstance(parsed, str):
        parsed = _python_list(parsed)
    docs = documents_of(parsed)
    if docs:
        return docs, True
    if isinstance(parsed, list) and parsed and all(isinstance(p, Mapping) and "text" in p for p in parsed):
        return [str(p["text"]) for p in parsed], True  # content blocks
    if (rows := _scored_rows(parsed)) is not None:
        return rows, True
    if isinstance(parsed, str):
        if is_repr(parsed):
            return _page_contents(parsed), True  # else the repr itself, which Contexts drops and notes
        return [parsed], False
    if isinstance(value, str):
        return [value], False
    return [json.dumps(parsed, default=str)], False


def _scored_rows(parsed: Any) -> list[str] | None:
    """The texts of a list of database rows that are documents with their scores: each row one text (words,
    not an identifier) under the same key, every other value a number (the AI SDK's RAG guide returns
    `{name, similarity}` rows from its vector search); None for any other value."""
    if not isinstance(parsed, list) or not parsed:
        return None
    keys = set()
    for row in parsed:
        if not isinstance(row, Mapping):
            return None
        texts = [k for k, v in row.items() if isinstance(v, str)]
        scores = [v for k, v in row.items() if k not in texts]
        if len(texts) != 1 or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in scores):
            return None
        if not row[texts[0]].strip().count(" "):
            return None  # `{"id": "doc-1", "score": 0.9}`: which document is unknown
        keys.add(texts[0])
    if len(keys) != 1:
        return None
    [key] = keys
    return [row[key] for row in parsed]


def _opened(parsed: Any) -> Any:
    """A result out of the envelope it was passed in: a function call's result beside the call's name or id
    (AutoGen's `{"name", "content", "call_id", "is_error"}`, Gemini's and ADK's `{"id", "name",
    "response"}`, an MCP result's `{"content", "isError"}`), or a result alone under one of those fields
    (ADK's `{"result": ...}` for a tool that returns no dict, a run's `{"output": ...}`); nested envelopes
    are opened in turn."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(parsed, Mapping):
            return parsed
        held = [key for key in _RESULT_FIELDS if key in parsed]
        if len(held) != 1 or not _CALL_FIELDS.issuperset(parsed.keys() - {held[0]}):
            return parsed
        parsed = parse_json(parsed[held[0]])
    return parsed


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
    contexts: Contexts,
    span: DecodedSpan,
    kind: ContextSourceKind,
    value: Any,
    what: str,
    arguments: Any = None,
    name: str | None = None,
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
    contexts.add(span, kind, texts, ToolCall(span, arguments, document_like, what, name))


def add_earlier_turns(contexts: Contexts, llm: DecodedSpan, results: Iterable[TurnResult]) -> None:
    """The tool results of earlier turns in the input of `llm`, the call that answered (`results`: its tool
    results with their turns, see `_history`; the calls of one turn are given the same history, the last the
    most of this turn's), after the documents already in `contexts`: the most recent turn first, each marked
    `earlier_turn` with how many turns back it was. A document already judged (the same tool asked the same
    again this turn) is not added twice."""
    earlier = sorted((result for result in results if result.back > 0), key=_TURNS_BACK)
    if not earlier:
        return
    seen = set(contexts.texts)
    for result in earlier:
        if contexts.full:
            contexts.skip_span()
            continue
        texts, document_like = tool_result_texts(result.value)
        fresh = [text for text in texts if text not in seen]
        seen.update(fresh)
        what = f"tool result of an earlier turn ({result.back} back) in the LLM input"
        call = ToolCall(llm, result.arguments, document_like, what, result.tool)
        contexts.add(llm, ContextSourceKind.EARLIER_TURN, fresh, call, turns_back=result.back)


_TURNS_BACK = attrgetter("back")


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
    groups.sort(key=_first_start)
    return groups


def _first_start(group: tuple[list[DecodedSpan], int]) -> tuple[int, int, str]:
    return start_order(group[0][0])


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
