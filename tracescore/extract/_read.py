"""Reading text out of attribute values that instrumentations fill very differently: plain strings, JSON of
a function's arguments or return value, chat messages, lists of documents. Every function returns None
rather than guess when the shape is not one it knows, so a score is never built from the wrong text."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from sys import intern
from typing import Any, NamedTuple

__all__ = [
    "ANSWER_KEYS",
    "ASSISTANT_ROLES",
    "QUESTION_KEYS",
    "REDACTED",
    "SYSTEM_ROLES",
    "USER_ROLES",
    "Prompt",
    "answer_text",
    "assistant_text",
    "call_arguments",
    "documents_of",
    "indexed",
    "indexed_prompt",
    "is_repr",
    "keyword_question",
    "last_message_text",
    "may_start_repr",
    "message_prompt",
    "parse_json",
    "qa_pairs",
    "question_text",
    "text_of",
    "user_text",
]

# Field names that hold the user's question or the final answer in chain inputs / outputs of LangChain,
# LlamaIndex, Haystack, DSPy, agent runs (`task`: smolagents, CrewAI, AutoGen) and hand-written pipelines.
QUESTION_KEYS = (
    "question",
    "query",
    "input",
    "user_input",
    "user_query",
    "q",
    "prompt",
    "text",
    "message",
    "task",
)
ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content", "output_text", "generation")
# Chat roles: who asks (the question is the last user message) and who answers.
USER_ROLES = ("user", "human")
ASSISTANT_ROLES = ("assistant", "ai", "model")
SYSTEM_ROLES = ("system", "developer")  # who instructs the model (OpenAI's `developer` for reasoning models)
_DOC_TEXT_KEYS = ("page_content", "pageContent", "content", "text", "document.content", "chunk", "body")
_DOC_LIST_KEYS = ("documents", "docs", "source_documents", "source_nodes", "nodes", "results", "context")
# A programming-language repr where text belongs: `ChatMessage(_role=...)`, `[Document(id=..., content=...)]`,
# `<NodeWithScore(node=TextNode(...))>`, `StopEvent(result=AgentOutput(...` cut at any length. Prose rarely
# puts a capitalised identifier directly before `(name=`, and when it does the parenthesis closes and the
# sentence goes on ("Call Foo(bar=1) to configure it."): a repr is its whole text (see `_is_object_repr`).
# Also `<generator object ...>`, `<x.Y object at 0x...>` and JavaScript's `[object Object]`.
_OBJECT_REPR = re.compile(r"\[?<?[A-Z][\w.]*\((?:\)|[A-Za-z_]\w*=|['\"]|[A-Z][\w.]*\()")
# How every repr shape here starts (after blanks, within the first 300 characters): `[`, `<`, `{`, or a
# capitalised name and its `(`. Prose fails this at its first word, the rest of it never scanned. Possessive
# (`*+`): what follows each run is never a character the run takes, so giving some back cannot help, and a
# first word that is not a call fails at once instead of retrying each shorter prefix (every document, answer
# and question is tested).
_REPR_START = re.compile(r"\s*+(?:[\[<{]|[A-Z][\w.]*+\(|__REDACTED__)")
# What OpenInference's TraceConfig writes in place of the content it hides (OPENINFERENCE_HIDE_OUTPUTS,
# ..._INPUTS, ..._RETRIEVAL_DOCUMENTS): no text a person or model wrote either, read as a repr is (an answer
# that is one is read from the LLM call, a document that is one is dropped), never judged as text.
REDACTED = "__REDACTED__"
_OBJECT_AT = re.compile(
    r"<(?:generator|coroutine|async_generator|function|bound method) object "
    r"|<[\w.]+ object at 0x[0-9a-fA-F]+>"
    r"|\[object [A-Z]\w*\]"
)
# What a repr's nesting is read from: brackets, and quotes (with escapes) whose contents are skipped.
_REPR_TOKEN = re.compile(r"""[()\[\]{}]|'(?:[^'\\\n]|\\.)*(?:'|$)|"(?:[^"\\\n]|\\.)*(?:"|$)""")
_CLOSING = {")": "(", "]": "[", "}": "{"}
# Text content parts: chat messages' `text`, the OpenAI Responses API's `input_text` / `output_text` (an
# agent SDK's Response object recorded as an LLM span's output).
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_MAX_DEPTH = 6
_GROUP_DEPTH = 2  # how far down grouped inputs are looked through for the question
_MAX_JSON_CHARS = 8_000_000  # a bigger attribute is not parsed: never worth the memory of a parse tree


def parse_json(value: Any) -> Any:
    """`value` parsed if it is a JSON object, array or string literal in a string (function arguments and
    return values are recorded JSON-encoded); otherwise `value` itself."""
    if isinstance(value, str) and len(value) <= _MAX_JSON_CHARS:
        stripped = value.lstrip()
        if stripped[:1] in ("{", "[", '"'):
            try:
                return json.loads(stripped)
            except (ValueError, RecursionError):
                return value
    return value


# `is_repr`'s first test, for a caller that checks many texts (every document of every interaction): a str it
# does not match, `may_start_repr(text, 0, 300)`, is never a repr, and the test is a C call, not a Python one.
may_start_repr = _REPR_START.match


def is_repr(text: Any) -> bool:
    """Whether `text` is a program's repr of an object (or a JSON object whose only values are such reprs,
    e.g. `{"response_gen": "<generator object ...>"}`, or OpenInference's `REDACTED` mask) rather than text a
    person or model wrote. A repr cut
    short (a span attribute truncated at 200 characters, its brackets never closed) is a repr too."""
    if not isinstance(text, str) or not _REPR_START.match(text, 0, 300):
        return False  # most text: its first word starts no repr
    if text.strip() == REDACTED:
        return True
    head = text[:300]
    # Single characters first: found by a fast scan, where a substring search on each text costs ~5x.
    if "(" not in head and "<" not in head and ("[" not in head or "[object " not in head):
        return False  # no repr's bracket near the start (a JSON object is parsed only if it may hold one)
    start = head.lstrip()
    if _OBJECT_REPR.match(start):
        return _is_object_repr(text)
    if _OBJECT_AT.match(start):
        return text[-64:].rstrip().endswith((">", "]", ")"))
    if start.startswith("{") and text[-64:].rstrip().endswith("}") and len(text) < 100_000:
        parsed = parse_json(text)
        if isinstance(parsed, Mapping) and parsed:
            return all(is_repr(v) for v in parsed.values())
    return False


def _is_object_repr(text: str) -> bool:
    """`Name(...`: a repr when the bracket it opens (or the `[` of a list of them) closes at the end of the
    text, or never closes (the text was cut). Prose that names a call closes it and goes on."""
    body = text.lstrip().lstrip("<")
    first = body.index("(") if not body.startswith("[") else 0
    stack: list[str] = []
    for token in _REPR_TOKEN.finditer(body, first):
        mark = token.group()
        if mark in "([{":
            stack.append(mark)
        elif mark in _CLOSING:
            if not stack or stack.pop() != _CLOSING[mark]:
                return False  # unbalanced: not a program's output
            if not stack:
                return not body[token.end() :].strip(" \t\r\n>])")
    return True  # never closed: cut short


def text_of(value: Any, keys: Sequence[str], depth: int = 0) -> str | None:
    """The text in `value`: itself if a string, else the first of `keys` in a mapping (recursively), the
    only string of a one-field mapping or one-item list, or the last user/assistant message's text."""
    if depth > _MAX_DEPTH or value is None:
        return None
    value = parse_json(value)
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Mapping):
        if _looks_like_message(value):
            return _message_text(value)
        for key in keys:
            if key in value and (found := text_of(value[key], keys, depth + 1)) is not None:
                return found
        strings = [v for v in value.values() if v is not None]
        if len(strings) == 1:
            return text_of(strings[0], keys, depth + 1)
        return None
    if isinstance(value, list):
        if value and all(isinstance(m, Mapping) and _looks_like_message(m) for m in value):
            return last_message_text(value, roles=("user", "human", "assistant", "ai"))
        if len(value) == 1:
            return text_of(value[0], keys, depth + 1)
    return None


def question_text(value: Any) -> str | None:
    """The question in `value` (text, or a question-like field of a call's input), else in inputs grouped one
    level down (`_grouped_question`)."""
    found = text_of(value, QUESTION_KEYS)
    return found if found is not None else _grouped_question(value)


def _grouped_question(value: Any) -> str | None:
    """The question in inputs grouped by step, up to two levels down: a pipeline's inputs by component
    (Haystack's `{"data": {"retriever": {...}, "prompt_builder": {"question": ...}}}`), a question-like field
    of any group, the keys in their order, the nearer level first; else the one user message a run was
    handed beside its settings (Google ADK's `{"new_message": {"role": "user", "parts": [...]}, ...}`)."""
    value = parse_json(value)
    level = [value] if isinstance(value, Mapping) else []
    for _ in range(_GROUP_DEPTH):
        groups = [g for mapping in level for g in map(parse_json, mapping.values()) if isinstance(g, Mapping)]
        for key in QUESTION_KEYS:
            for group in groups:
                text = group.get(key)
                if isinstance(text, str) and text.strip():
                    return text
        asked = [g for g in groups if _looks_like_message(g) and _role(g) in USER_ROLES]
        if len(asked) == 1:
            return _message_text(asked[0])
        level = groups
    return None


def answer_text(value: Any) -> str | None:
    """The answer in `value` (text, or an answer-like field of a call's output)."""
    return text_of(value, ANSWER_KEYS)


def keyword_question(kwargs: Mapping[str, Any]) -> str | None:
    """A function's question-like keyword argument that holds text."""
    for key in QUESTION_KEYS:
        value = kwargs.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def call_arguments(call: Mapping[str, Any]) -> tuple[list[Any], Mapping[str, Any]]:
    """(args, kwargs) of a function call recorded as `{"args": [...], "kwargs": {...}}` (either may be
    absent: then empty)."""
    args, kwargs = call.get("args"), call.get("kwargs")
    return (args if isinstance(args, list) else []), (kwargs if isinstance(kwargs, Mapping) else {})


def user_text(messages: Any) -> str | None:
    """The last user message's text."""
    return last_message_text(messages, USER_ROLES)


def assistant_text(messages: Any) -> str | None:
    """The last assistant message's text."""
    return last_message_text(messages, ASSISTANT_ROLES)


def last_message_text(messages: Any, roles: Sequence[str]) -> str | None:
    """Text of the last message with one of `roles`, from chat messages in OpenAI, OTel GenAI (`parts`),
    LangChain (`type`, `kwargs.content`) shape."""
    messages = parse_json(messages)
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and _role(message) in roles:
            text = _message_text(message)
            if text:
                return text
    return None


class Prompt(NamedTuple):
    """What a model call was given as text, where an app may put its documents under a label: its
    instructions (the system messages, joined) and its last user message. None: not recorded. `history`:
    the earlier (question, answer) pairs the messages resent before the last user message, oldest first
    (`qa_pairs` of `turns`, the messages as (role, text) in order; None: no pair to read)."""

    instructions: str | None
    user: str | None
    # Read only when asked: every interaction's prompt is read for its documents and question, its pairs
    # only with consume's infer_conversations (`_reader.read_history`).
    turns: Callable[[], Iterable[tuple[str, str | None]]] | None = None

    @property
    def history(self) -> tuple[tuple[str, str], ...]:
        return qa_pairs(self.turns()) if self.turns is not None else ()


def qa_pairs(turns: Iterable[tuple[str, str | None]]) -> tuple[tuple[str, str], ...]:
    """The (question, answer) pairs of a conversation's messages, given as (role, text) in order: each user
    message with text and the last assistant text after it, kept once the next user message with text
    comes (so the question being answered now is never one). Tool messages and texts of other roles are
    passed over: only what the people asked and what the model answered name a turn."""
    pairs: list[tuple[str, str]] = []
    question: str | None = None
    answer: str | None = None
    for role, text in turns:
        if not text or not text.strip():
            continue
        if role in USER_ROLES:
            if question is not None and answer is not None:
                pairs.append((question, answer))
            question, answer = text, None
        elif role in ASSISTANT_ROLES and question is not None:
            answer = text
    return tuple(pairs)


def message_prompt(messages: Any, instructions: Any = None) -> Prompt | None:
    """The prompt of chat messages (`last_message_text`'s shapes, or a request's `messages`), with
    instructions recorded beside them (OTel GenAI's `gen_ai.system_instructions`: text, or a JSON list of
    text parts); None without either."""
    messages = parse_json(messages)
    if isinstance(messages, Mapping):  # a request's body: its messages beside the model and settings
        messages = parse_json(messages.get("messages"))
    listed = messages if isinstance(messages, list) else []
    system = [_message_text(m) for m in listed if isinstance(m, Mapping) and _role(m) in SYSTEM_ROLES]
    instructions = parse_json(instructions)
    if isinstance(instructions, list):
        instructions = _message_text({"parts": instructions})
    if isinstance(instructions, str):
        system.insert(0, instructions)
    if not listed and not system:
        return None
    if len(listed) < 3:  # a question, its answer and the next question at least: most prompts hold none
        return Prompt(_joined(system), user_text(listed))
    return Prompt(
        _joined(system),
        user_text(listed),
        lambda: ((_role(m), _message_text(m)) for m in listed if isinstance(m, Mapping)),
    )


def indexed_prompt(roles: Sequence[Any], content: Any) -> Prompt | None:
    """The prompt of flattened messages (`indexed` roles; `content(index)` reads one message's text)."""
    if not roles:
        return None
    named = [str(role).lower() for role in roles]
    system = [content(index) for index, role in enumerate(named) if role in SYSTEM_ROLES]
    asked = (content(index) for index in reversed(range(len(named))) if named[index] in USER_ROLES)
    user = next((text for text in asked if text), None)
    if not any(role in ASSISTANT_ROLES for role in named):
        return Prompt(_joined(system), user)  # no answer resent: no pair to read
    return Prompt(_joined(system), user, lambda: ((role, _text(content(i))) for i, role in enumerate(named)))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _joined(texts: Sequence[Any]) -> str | None:
    joined = "\n\n".join(text for text in texts if isinstance(text, str) and text.strip())
    return joined or None


def documents_of(value: Any, depth: int = 0) -> list[str] | None:
    """Document texts from a retriever's output: a list of strings or of document objects, possibly under
    a `documents`-like key. None when the value is not recognisably a list of documents."""
    if depth > _MAX_DEPTH:
        return None
    value = parse_json(value)
    if isinstance(value, Mapping):
        for key in _DOC_LIST_KEYS:
            if key in value:
                return documents_of(value[key], depth + 1)
        if (kwargs := value.get("kwargs")) is not None:  # a LangChain-serialised object
            return documents_of(kwargs, depth + 1)
        return None
    if not isinstance(value, list):
        return None
    texts = []
    for item in value:
        text = _document_text(item)
        if text is None:
            return None
        texts.append(text)
    return texts


def indexed(attributes: Mapping[str, Any], prefix: str, suffix: str = "") -> list[Any]:
    """Values of flattened list attributes `prefix.0.suffix`, `prefix.1.suffix`, ... (without a suffix:
    `prefix.0`, `prefix.1`, ...) up to the first gap."""
    get = attributes.get
    keys = _INDEXED_KEYS.get((prefix, suffix), ())
    values = []
    for key in keys:  # the keys asked before, the gap that ended the longest list included
        value = get(key)
        if value is None:
            return values
        values.append(value)
    tail = f".{suffix}" if suffix else ""
    index = len(keys)
    while (value := get(f"{prefix}.{index}{tail}")) is not None:
        values.append(value)
        index += 1
    if index < _KEYS_PER_LIST and (keys or len(_INDEXED_KEYS) < _KEPT_LISTS):
        # Replaced whole, never appended to: a reader in another thread sees the old keys or the new.
        _INDEXED_KEYS[prefix, suffix] = tuple(intern(f"{prefix}.{i}{tail}") for i in range(index + 1))
    return values


# The keys `indexed` built, per (prefix, suffix): a key kept keeps its hash, interned as the decoder interns
# attribute keys it matches them by identity, and every trace of a convention asks the same few lists.
# Bounded: so many lists (some prefixes hold an index) and so many keys a list, past which keys are built
# each time.
_INDEXED_KEYS: dict[tuple[str, str], tuple[str, ...]] = {}
_KEPT_LISTS = 256
_KEYS_PER_LIST = 64


def _document_text(item: Any) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        for key in _DOC_TEXT_KEYS:
            if isinstance(item.get(key), str):
                return item[key]
        for nested in ("document", "node", "kwargs"):  # OpenInference, LlamaIndex NodeWithScore, LangChain
            if isinstance(item.get(nested), Mapping):
                return _document_text(item[nested])
    return None


def _looks_like_message(value: Mapping[str, Any]) -> bool:
    return ("role" in value or "type" in value) and any(k in value for k in ("content", "parts", "kwargs"))


def _role(message: Mapping[str, Any]) -> str:
    role = message.get("role") or message.get("type") or ""
    return str(role).lower()


def _message_text(message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    if content is None and isinstance(message.get("kwargs"), Mapping):
        content = message["kwargs"].get("content")
    if isinstance(content, str):
        return content if content.strip() else None
    parts = content if isinstance(content, list) else message.get("parts")
    if isinstance(parts, list):
        texts = [
            str(part.get("content") or part.get("text") or "")
            for part in parts
            if isinstance(part, Mapping) and part.get("type", "text") in _TEXT_PARTS
        ]
        joined = "".join(texts)
        return joined if joined.strip() else None
    return None
