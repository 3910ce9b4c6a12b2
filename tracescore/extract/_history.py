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
(`_tools.tool_result_texts`).

A result is named (`TurnResult.tool`) where the message list names its tool: a tool-result part by its own
name (Pydantic AI's `tool_call_response` `name`, the AI SDK's `toolName`, Gemini's `function_response`
`name`, Haystack's `origin.tool_name`), else by the call it answers, matched by id among the calls the
messages before it made: a GenAI `tool_call_response` part's `id` answers a `tool_call` part's `id`, an
Anthropic `tool_result` block's `tool_use_id` a `tool_use` block's `id`, an AI SDK `tool-result`'s
`toolCallId` a `tool-call`'s, a Gemini `function_response`'s `id` (ADK sets one) a `function_call`'s; without
an id (Gemini's API gives none), a `function_response` answers the first `function_call` of its tool not
answered yet this turn (the n-th response of a tool answers its n-th call). A tool-role message's result is
named by its own `name`, else by the
assistant's OpenAI-style `tool_calls` entry whose `id` is its `tool_call_id`. Flattened messages the same
way: a tool message's `tool_call_id` (OpenInference's `message.tool_call_id`, OpenLLMetry's at the
message's own prefix) answers an earlier message's flattened `tool_calls.M` entry (OpenInference's
`tool_call.id` / `tool_call.function.name`, OpenLLMetry's `id` / `name`). Matched by id, never by order:
parallel calls are answered in any order. A result whose id no message before it made keeps the id
(`TurnResult.answers`): the reader looks it up among the calls earlier model calls output
(`answered_earlier`; OpenLIT passes the model's tool calls only as the output of the call that made them).

The call a result answers also gives its arguments as recorded (`TurnResult.arguments`: JSON text or an
object, as the call's `arguments`, `input` or `args` held them; a Haystack result's own `origin`), so a run's
tool calls read from messages are compared by tool and arguments as tool spans' are (`repeated_tool_calls`).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from tracescore.extract._read import USER_ROLES, indexed, parse_json

__all__ = [
    "Gemini",
    "MadeCall",
    "MessageResults",
    "TurnResult",
    "answered_earlier",
    "genai_tool_calls",
    "genai_tool_messages",
    "genai_tool_results",
    "indexed_tool_messages",
    "indexed_tool_results",
]

# `tool-response`: smolagents' memory (its ToolCallingAgent's observations, resent with `reset=False`).
_TOOL_ROLES = ("tool", "function", "ipython", "tool-response")
# A result of this many words or more that the calling message already holds word for word was handed back.
_MIN_ECHOED_WORDS = 4


class Gemini:
    """Gemini's tool parts, by their one key: `{"function_call": {"id", "name", "args"}}` and
    `{"function_response": {"id", "name", "response"}}`, paired by id, else by tool and order (`_Calls`).
    A convention whose parts pair the same way (Genkit's `toolRequest` / `toolResponse`) is read so."""

    CALL, RESPONSE = "function_call", "function_response"
    ID, NAME, ARGUMENTS, RESULT = "id", "name", "args", "response"


# Content parts that carry a tool's result, told apart by their `type` (OTel GenAI `tool_call_response`,
# Anthropic `tool_result`, the Vercel AI SDK's `tool-result`) or by their one key (Haystack's ChatMessage
# `tool_call_result`, Gemini's `function_response`); each with the fields its result may sit in.
_TOOL_PART_TYPES = frozenset({"tool_call_response", "tool_result", "function_response", "tool-result"})
_TYPED_RESULT_FIELDS = ("response", "result", "content", "output")
_TOOL_PART_KEYS = {
    "tool_call_result": "result",
    Gemini.RESPONSE: Gemini.RESULT,
    "functionResponse": "response",
}
# OpenAI-style calls of a message, `{"id", "function": {"name", "arguments"}}` (flattened alike), and the
# field of a tool-role message that holds the id of the call it answers.
_TOOL_CALLS, _FUNCTION, _ID, _NAME, _ARGUMENTS = "tool_calls", "function", "id", "name", "arguments"
_ANSWERS = "tool_call_id"
# How a part names its tool itself: a typed part's own field, a keyed part's field of its inner mapping.
_PART_NAMES = (_NAME, "toolName")
# Haystack's ToolCallResult: the ToolCall it answers, with its tool's name and arguments.
_ORIGIN, _ORIGIN_NAME = "origin", "tool_name"


class _CallFields(NamedTuple):
    """Where a tool call records its id, its tool's name and its arguments (the first present)."""

    id: str
    name: str
    arguments: tuple[str, ...]


# Tool calls in content parts, by type; and the field of a typed result part that holds the id of the call it
# answers.
_CALL_PARTS = {
    "tool_call": _CallFields(_ID, _NAME, (_ARGUMENTS,)),
    "tool_use": _CallFields(_ID, _NAME, ("input",)),
    "tool-call": _CallFields("toolCallId", "toolName", ("input", "args")),  # AI SDK 5, before 5
}
_ANSWERED_ID = {"tool_call_response": _ID, "tool_result": "tool_use_id", "tool-result": "toolCallId"}
# Gemini's calls, by their one key: `{"function_call": {"name", "args"}}` (an `id` only where ADK set one).
_KEYED_CALLS = {key: _CallFields(_ID, _NAME, (Gemini.ARGUMENTS,)) for key in (Gemini.CALL, "functionCall")}
# A flattened message's calls, `<message>.tool_calls.M.<field>`: OpenInference's, OpenLLMetry's.
_FLAT_CALLS = (
    _CallFields("tool_call.id", "tool_call.function.name", ("tool_call.function.arguments",)),
    _CallFields(_ID, _NAME, (_ARGUMENTS,)),
)


class TurnResult(NamedTuple):
    """One tool result in an LLM call's input messages."""

    value: Any  # the result as recorded
    back: int  # how many turns back it was given: 0 for this turn's
    tool: str | None = None  # the tool it is the result of, where the message list names it
    arguments: Any = None  # the arguments of the call it answers, as recorded (None: not recorded)
    answers: str | None = None  # the id of the call it answers, as recorded (None: not recorded)


class MadeCall(NamedTuple):
    """A tool call the model made, as far as the messages tell: its tool's name, its arguments and its id
    (for a result: those of the call it answers)."""

    name: str | None = None
    arguments: Any = None
    id: str | None = None


_UNKNOWN = MadeCall()

# Reads the results of one tool-role message of flattened attributes, given the message's prefix
# (`llm.input_messages.3`): a convention records a tool message's result under its own keys. Also given the
# message that made the calls, whose texts (none: an empty list) tell a result handed back (`_echoed`).
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
    called, turns = _Calls(), set(users)
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        if index in turns:
            called.waiting.clear()  # a new turn: Gemini's results answer this turn's calls
        called.add(_called(message))
        found = _message_results(message, called)
        if found:
            back = len(users) - bisect.bisect_right(users, index)  # user messages after this one
            results.extend(TurnResult(value, back, *call) for value, call in found)
    return results


def genai_tool_calls(messages: Any) -> dict[str, MadeCall]:
    """The tool calls a message list makes, by id (a model call's output messages: `answered_earlier`)."""
    messages = parse_json(messages)
    called = _Calls()
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, Mapping):
            called.add(_called(message))
    return called.by_id


def answered_earlier(
    results: list[TurnResult], earlier: Iterable[Mapping[str, MadeCall]]
) -> list[TurnResult]:
    """`results` with those whose call the messages left out (no arguments, an id the input never made)
    named by the call with that id among `earlier` (the calls earlier model calls made, in order: the last
    with the id wins): OpenLIT passes the model's tool calls only as the output of the call that made them,
    never in the next call's input. A result's own name is kept."""
    made: dict[str, MadeCall] = {}
    for calls in earlier:
        made.update(calls)
    found = []
    for result in results:
        call = made.get(result.answers) if result.arguments is None and result.answers is not None else None
        if call is not None:
            result = result._replace(tool=result.tool or call.name, arguments=call.arguments)
        found.append(result)
    return found


class _Calls:
    """The tool calls the messages made so far: by id, and Gemini's, which carry none, by tool name in the
    order made, not answered yet this turn (the n-th result of a tool answers its n-th call)."""

    def __init__(self) -> None:
        self.by_id: dict[str, MadeCall] = {}
        self.waiting: dict[str, list[MadeCall]] = {}

    def add(self, calls: list[MadeCall]) -> None:
        for call in calls:
            if call.id is not None:
                self.by_id[call.id] = call
            elif call.name is not None:
                self.waiting.setdefault(call.name, []).append(call)

    def next_of(self, name: str | None) -> MadeCall:
        """The first call of tool `name` not answered yet, now answered."""
        waiting = self.waiting.get(name) if name is not None else None
        return waiting.pop(0) if waiting else _UNKNOWN


def _called(message: Mapping[str, Any]) -> list[MadeCall]:
    """The tool calls a message makes: OpenAI-style `tool_calls` (`{"id", "function": {"name",
    "arguments"}}`), tool-call parts (`_CALL_PARTS`: GenAI `tool_call`, Anthropic `tool_use`, the AI SDK's
    `tool-call`; by id) and Gemini's `function_call` parts (`_KEYED_CALLS`, by id only where ADK set one)."""
    made: list[MadeCall] = []
    calls = message.get(_TOOL_CALLS)
    for call in calls if isinstance(calls, list) else ():
        function = call.get(_FUNCTION) if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            _add_call(made, call.get(_ID), function.get(_NAME), function.get(_ARGUMENTS))
    for part in _parts(message):
        if not isinstance(part, Mapping):
            continue
        if (fields := _CALL_PARTS.get(_kind(part))) is not None:
            _add_call(made, *_call_of(part, fields))
        for key, fields in _KEYED_CALLS.items():
            if isinstance(inner := part.get(key), Mapping):
                call_id, name, arguments = _call_of(inner, fields)
                _add_call(made, call_id if isinstance(call_id, str) else _WAITING, name, arguments)
    return made


_NO_CALL = (None, None, None)  # a flattened list's gap
_WAITING = ""  # a Gemini call without an id: answered by order (`_Calls`)


def _flat_called(attributes: Mapping[str, Any], calls: str) -> dict[str, MadeCall]:
    """The tool calls of one flattened message, by id (`calls`: its `tool_calls` prefix), in either layout
    (`_FLAT_CALLS`), up to the first gap."""
    made: list[MadeCall] = []
    for fields in _FLAT_CALLS:
        for index in itertools.count():
            call = _call_of(attributes, fields, f"{calls}.{index}.")
            if call == _NO_CALL:
                break
            _add_call(made, *call)
    return {call.id: call for call in made if call.id}


def _call_of(values: Mapping[str, Any], fields: _CallFields, at: str = "") -> tuple[Any, Any, Any]:
    """(id, name, arguments) of the call `values` record under `at` (a part: its own fields)."""
    arguments = (values.get(at + key) for key in fields.arguments)
    found = next((value for value in arguments if value is not None), None)
    return values.get(at + fields.id), values.get(at + fields.name), found


def _add_call(made: list[MadeCall], call_id: Any, name: Any, arguments: Any) -> None:
    """A call with an id and a name (`_WAITING`: a Gemini call, which has no id)."""
    if isinstance(call_id, str) and isinstance(name, str) and name:
        made.append(MadeCall(name, arguments, call_id or None))


def _answering(name: Any, called: Mapping[str, MadeCall], call_id: Any) -> MadeCall:
    """A result's tool: the call with the id it answers, named by the result's own `name` where it has one
    (its arguments are the call's); the id is the result's, answered or not (`answered_earlier`)."""
    answers = call_id if isinstance(call_id, str) and call_id else None
    call = called.get(answers, _UNKNOWN) if answers is not None else _UNKNOWN
    return call._replace(name=_named(name) or call.name, id=answers)


def _message_tool(message: Mapping[str, Any], called: _Calls) -> MadeCall:
    """A tool-role message's tool: its own `name`, else the call it answers (`tool_call_id`: LiteLLM's and
    OpenAI's tool messages carry no name)."""
    if _role(message) not in _TOOL_ROLES:
        return _UNKNOWN
    return _answering(message.get(_NAME), called.by_id, message.get(_ANSWERS))


def _part_tool(part: Mapping[str, Any], called: _Calls) -> MadeCall:
    """A tool-result part's tool: the name it carries, else the call its id answers (`_ANSWERED_ID`); a
    keyed part's, its inner mapping's name or the call it names as its `origin` (Haystack), its arguments
    the call its `id` answers, else (Gemini's `function_response`, no id) the first call of its tool not
    answered yet this turn."""
    kind = _kind(part)
    if kind in _TOOL_PART_TYPES:
        own = next(filter(None, (_named(part.get(key)) for key in _PART_NAMES)), None)
        return _answering(own, called.by_id, part.get(_ANSWERED_ID.get(kind, "")))
    inner = next(part[key] for key in _TOOL_PART_KEYS if key in part)  # a tool part: one of them is there
    if not isinstance(inner, Mapping):
        return _UNKNOWN
    origin = inner.get(_ORIGIN)
    if isinstance(origin, Mapping):
        return MadeCall(_named(inner.get(_NAME)) or _named(origin.get(_ORIGIN_NAME)), origin.get(_ARGUMENTS))
    name = _named(inner.get(_NAME))
    if isinstance(inner.get(_ID), str) and inner[_ID]:
        return _answering(name, called.by_id, inner[_ID])
    return called.next_of(name)._replace(name=name)


def _named(name: Any) -> str | None:
    return name if isinstance(name, str) and name else None


def genai_tool_messages(messages: Any) -> list[Any]:
    """This turn's tool results in a message list (after the last user message with text), so a
    conversation's earlier turns are never read as this turn's documents."""
    return [result.value for result in genai_tool_results(messages) if result.back == 0]


def indexed_tool_results(
    attributes: Mapping[str, Any], prefix: str, role: str, results: MessageResults
) -> list[TurnResult]:
    """Every tool-role message of flattened message attributes (`llm.input_messages.N.message.role` /
    OpenLLMetry's `gen_ai.prompt.N.role`), with its turn; `results` reads one message's results. Each is
    named as in a message list, by the message's fields beside its `role` (OpenInference's `message.*`):
    its own `name`, else the earlier message's flattened call whose id is its `tool_call_id`."""
    roles = [str(r).lower() for r in indexed(attributes, prefix, role)]
    if not any(name in _TOOL_ROLES for name in roles):
        return []  # most model calls: no calls read
    users = [index for index, name in enumerate(roles) if name in USER_ROLES]
    fields = role.rpartition(".")[0]  # `message` for `message.role`, none for `role`
    beside = f".{fields}." if fields else "."
    found: list[TurnResult] = []
    called: dict[str, MadeCall] = {}
    caller, calling = -1, ""  # the last message that was not a tool result (it made the calls), its text
    for index, name in enumerate(roles):
        message = f"{prefix}.{index}{beside}"
        if name not in _TOOL_ROLES:
            called.update(_flat_called(attributes, message + _TOOL_CALLS))
            caller = index
            continue
        if caller == index - 1:  # the first result of its calls: read the caller's text once
            calling = _spaced(results(attributes, f"{prefix}.{caller}")) if caller >= 0 else ""
        back = len(users) - bisect.bisect_right(users, index)
        call = _answering(attributes.get(message + _NAME), called, attributes.get(message + _ANSWERS))
        found.extend(
            TurnResult(value, back, *call)
            for value in results(attributes, f"{prefix}.{index}")
            if value is not None and not _echoed(value, calling)
        )
    return found


def _spaced(value: Any) -> str:
    """A message's texts (a result, or a list of them) as one string, single-spaced."""
    texts = value if isinstance(value, list) else [value]
    return " ".join(
        _spaced(text) if isinstance(text, list) else " ".join(str(text).split())
        for text in texts
        if text is not None
    )


def _echoed(value: Any, calling: str) -> bool:
    """A result the message that made the call already holds word for word (smolagents' `final_answer`
    observation repeats the answer its call was handed, `Calling tools: [...]`): the model's own words handed
    back, never evidence (an earlier answer may itself be a hallucination)."""
    text = _spaced(value)
    return len(text.split()) >= _MIN_ECHOED_WORDS and text in calling


def indexed_tool_messages(
    attributes: Mapping[str, Any], prefix: str, role: str, results: MessageResults
) -> list[Any]:
    """This turn's tool-role messages of flattened message attributes (after the last user message)."""
    found = indexed_tool_results(attributes, prefix, role, results)
    return [result.value for result in found if result.back == 0]


def _message_results(message: Mapping[str, Any], called: _Calls) -> list[tuple[Any, MadeCall]]:
    """The tool results one message carries, each with the call it answers where the messages tell: its
    tool-result parts (`parts`, or `content` as a list of parts; a part's own tool, else the message's),
    else, for a tool-role message, its content. A message with GenAI `parts` and none of them a tool result
    carries none."""
    tool = _message_tool(message, called)  # unknown for a message that is not tool-role
    tool_role = _role(message) in _TOOL_ROLES
    tool_parts = [part for part in _parts(message) if _is_tool_part(part)]
    if tool_parts:
        found: list[tuple[Any, MadeCall]] = []
        for part in tool_parts:
            if (value := _part_result(part)) is not None:
                own = _part_tool(part, called)
                found.append((value, own if own.name else tool._replace(id=own.id or tool.id)))
        return found
    parts = message.get("parts")
    if isinstance(parts, list):
        # LiteLLM's OTel callback writes a tool message's result as its text parts.
        return [(part["content"], tool) for part in parts if _is_text_part(part)] if tool_role else []
    if tool_role:
        content = message.get("content")
        return [] if content is None else [(content, tool)]
    return []


def _parts(message: Mapping[str, Any]) -> list[Any]:
    """A message's content parts: GenAI `parts`, else `content` as a list of parts."""
    parts = message.get("parts")
    listed = parts if isinstance(parts, list) else message.get("content")
    return listed if isinstance(listed, list) else []


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and part.get("type") == "text" and part.get("content") is not None


def _is_tool_part(part: Any) -> bool:
    if not isinstance(part, Mapping):
        return False
    return _kind(part) in _TOOL_PART_TYPES or any(key in part for key in _TOOL_PART_KEYS)


def _part_result(part: Mapping[str, Any]) -> Any:
    """The result a tool-result part carries (None for a failed AI SDK tool's `error-*` output: not
    evidence). The AI SDK wraps it as `{"type": "text" | "json", "value": ...}` (`result` before v5)."""
    if _kind(part) in _TOOL_PART_TYPES:
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


def _kind(part: Mapping[str, Any]) -> str | None:
    """A part's `type`, None when it is not text (a list there would not hash: bad input never raises)."""
    kind = part.get("type")
    return kind if isinstance(kind, str) else None


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
