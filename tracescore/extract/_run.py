"""An agent's run as every convention's interaction is read: `agent_run` turns the tool spans and LLM calls a
convention found into the `Run` view (tool calls with name, arguments, result and whether they failed; steps;
tokens), reading every convention's attributes from one table built from the adapters' `RUN_*` keys, so no
convention reads runs its own way.

A tool call failed when its span's status is ERROR, it recorded an error (`exception.message`, `error.type`,
Langfuse's level ERROR), or its result reports one: a LlamaIndex ToolOutput's `is_error`, an MCP result's
`isError`, a LangChain ToolMessage's `status: "error"`, `{"error": ...}`, or text that starts like an error
("Error: ...", a traceback), which is how LangGraph's ToolNode hands a failure to the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._context import Contexts, ToolCall
from tracescore.extract._convention import first_value
from tracescore.extract._conventions import RUN_KEY_ORDER
from tracescore.extract._read import indexed, parse_json
from tracescore.extract._tools import tool_result_texts
from tracescore.model import (
    MAX_RUN_TEXT_CHARS,
    MAX_RUN_TOOL_CALLS,
    ContextSourceKind,
    DecodedSpan,
    Run,
    RunToolCall,
    start_order,
)

__all__ = ["agent_run"]


# How each convention records a tool call and an LLM call's usage, from its adapter; the first key present on
# a span wins (the open conventions' first, see `_conventions`).
_TOOL_NAME = tuple(key for c in RUN_KEY_ORDER for key in c.RUN_TOOL_NAME)
_TOOL_ARGUMENTS = tuple(key for c in RUN_KEY_ORDER for key in c.RUN_TOOL_ARGUMENTS)
_TOOL_RESULT = tuple(key for c in RUN_KEY_ORDER for key in c.RUN_TOOL_RESULT)
_PROMPT_TOKENS = tuple(key for c in RUN_KEY_ORDER for key in c.RUN_PROMPT_TOKENS)
_COMPLETION_TOKENS = tuple(key for c in RUN_KEY_ORDER for key in c.RUN_COMPLETION_TOKENS)
# Usage in a JSON attribute (Langfuse's usage details, MLflow's token usage, a Haystack reply's meta).
_USAGE_JSON = {key: fields for c in RUN_KEY_ORDER for key, fields in c.RUN_USAGE_JSON.items()}
# Sources read as retrieved documents (a tool's result is a tool call's, counted with the calls).
_DOCUMENT_KINDS = frozenset(
    {
        ContextSourceKind.RETRIEVER,
        ContextSourceKind.RERANKER,
        ContextSourceKind.SPAN,
        ContextSourceKind.INPUT,
        ContextSourceKind.INSTRUCTIONS,
        ContextSourceKind.PROMPT,
    }
)
# What a model call that answered records (an LLM span without any of these only prepared a call).
_MODEL_OUTPUT = frozenset(
    (*(key for c in RUN_KEY_ORDER for key in c.RUN_MODEL_OUTPUT), *_PROMPT_TOKENS, *_USAGE_JSON)
)
_TOOL_DEFINITIONS = {key: path for c in RUN_KEY_ORDER for key, path in c.RUN_TOOL_DEFINITIONS.items()}
_INDEXED_TOOL_DEFINITIONS = tuple(keys for c in RUN_KEY_ORDER for keys in c.RUN_INDEXED_TOOL_DEFINITIONS)
_FIELDED_TOOL_DEFINITIONS = tuple(keys for c in RUN_KEY_ORDER for keys in c.RUN_FIELDED_TOOL_DEFINITIONS)
_ERROR_LEVELS = tuple(c.RUN_ERROR_LEVEL for c in RUN_KEY_ORDER if c.RUN_ERROR_LEVEL is not None)
# OpenTelemetry's own error attributes, whatever the convention.
_ERROR_KEYS = ("exception.message", "error.message", semconv.ERROR_TYPE, "exception.type")
# A result that reports a failure: "Error: ..." (LangGraph's ToolNode), a traceback, a tool exception.
_ERROR_TEXT = re.compile(
    r"\s*(?:error\b|exception\b|traceback \(most recent call last\)|\w*(?:exception|error):)", re.I
)
_OFFERED_CHARS = 300
_ERROR_FIELDS = frozenset({"error", "message", "code", "status", "type", "details"})


def agent_run(tools: Sequence[DecodedSpan], llms: Sequence[DecodedSpan], contexts: Contexts) -> Run | None:
    """What the agent did, read the same way for every convention: each tool span's call (name, arguments,
    result, whether it failed), without tool spans the tool messages this turn passed to the model (named,
    with arguments, by the calls they answer, where the messages say: `_history`), the LLM calls' steps and
    tokens, and the retrievals whose documents are in `contexts`. None when the interaction shows neither a
    tool nor an LLM call (a decorated function, a chain without model spans).
    Bounded: the first `MAX_RUN_TOOL_CALLS` calls are kept, the rest counted."""
    if (
        not tools
        and not llms
        and (
            not contexts.has_tool_results
            or all(s.kind != ContextSourceKind.TOOL_MESSAGE for s in contexts.sources)
        )
    ):
        return None  # the unsampled path reads every interaction: a plain RAG span pays nothing here
    ordered = sorted(tools, key=start_order)
    read_as = _read_results(contexts)
    calls = [_tool_call(tool, read_as.get(tool.span_id)) for tool in ordered[:MAX_RUN_TOOL_CALLS]]
    total, failed = len(ordered), sum(not c.ok for c in calls)
    failed += sum(
        _failure(tool, first_value(tool, _TOOL_RESULT)) is not None for tool in ordered[len(calls) :]
    )
    messages = _tool_messages(contexts)
    if not tools:
        calls = [_message_call(call, text) for call, text in messages[:MAX_RUN_TOOL_CALLS]]
        failed = sum(not c.ok for c in calls)
        failed += sum(_error_result(text) is not None for _, text in messages[len(calls) :])  # past the cap
        total = len(messages)
    elif len(messages) == total and all(c.result is None for c in calls):
        # Tool spans that name the call only (autogen-core): the results are the messages the model was
        # given, one per call, in the same order, with the arguments of the calls they answer.
        calls = [
            _with_result(c, answered, text) for c, (answered, text) in zip(calls, messages, strict=False)
        ]
        failed = sum(not c.ok for c in calls)
    if not total and not llms:
        return None
    # A model call wrapped in another (LiteLLM's span around the OpenAI client's) is one step, counted once.
    wrappers = {llm.span_id for llm in llms}
    llms = [llm for llm in llms if llm.parent_span_id not in wrappers]
    answered = [llm for llm in llms if not _MODEL_OUTPUT.isdisjoint(llm.attributes)]
    prompt, completion = _tokens(llms)
    sources = contexts.sources
    read = {s.span_id for s in sources if s.kind in _DOCUMENT_KINDS}
    return Run(
        tool_calls=tuple(calls),
        tool_calls_total=total,
        failed_tool_calls=failed,
        steps=len(answered or llms),
        prompt_tokens=prompt,
        completion_tokens=completion,
        retrievals=len(read),
        earlier_turn_documents=sum(1 for s in sources if s.turns_back),
        tools_offered=_offered(llms),
    )


def _offered(llms: Sequence[DecodedSpan]) -> tuple[str, ...]:
    """The tools the model was offered, `name: description`, once each, as the last model call that lists
    them was (a run's calls are offered the same tools): OpenInference `llm.tools`, OTel GenAI
    `gen_ai.tool.definitions`, the AI SDK's `ai.prompt.tools`, MLflow's `mlflow.chat.tools`, the `tools` of
    a Haystack chat generator's input (`_tool_definitions`: each format's); without any, OpenLLMetry's
    flattened `llm.request.functions.N.name` / `.description` (which LiteLLM's OTel callback writes too)."""
    offered: dict[str, str] = {}
    for llm in reversed(llms):
        attrs = llm.attributes
        definitions: list[Any] = []
        for prefix, suffix in _INDEXED_TOOL_DEFINITIONS:
            definitions += indexed(attrs, prefix, suffix)
        for key, path in _TOOL_DEFINITIONS.items():
            if (listed := attrs.get(key)) is not None:
                definitions += _listed(listed, path)
        for prefix, name, description in () if definitions else _FIELDED_TOOL_DEFINITIONS:
            definitions += [
                {"name": tool, "description": attrs.get(f"{prefix}.{index}.{description}")}
                for index, tool in enumerate(indexed(attrs, prefix, name))
            ]
        if not definitions:
            continue
        for tool in _tool_definitions(definitions):
            if len(offered) >= MAX_RUN_TOOL_CALLS:
                break
            description = " ".join(str(tool.get("description") or "").split())
            offered.setdefault(tool["name"], f"{tool['name']}: {description}"[:_OFFERED_CHARS])
        break
    return tuple(offered.values())


def _tool_definitions(definitions: list[Any]) -> list[Mapping[str, Any]]:
    """Each named tool definition: one with its `name`, or one wrapped as a format has it: OpenAI's
    `{"type": "function", "function": {...}}` (OpenInference, GenAI, MLflow), a Haystack serialised `Tool`
    `{"type": "haystack.tools.tool.Tool", "data": {...}}`, whose `Toolset` lists its tools in `data.tools`
    (bounded: `MAX_RUN_TOOL_CALLS` read)."""
    found: list[Mapping[str, Any]] = []
    pending = list(reversed(definitions))
    while pending and len(found) < MAX_RUN_TOOL_CALLS:
        tool = parse_json(pending.pop())
        if not isinstance(tool, Mapping):
            continue
        if not isinstance(tool.get("name"), str):
            tool = tool.get("function", tool.get("data"))
            if not isinstance(tool, Mapping):
                continue
        if isinstance(tool.get("name"), str):
            found.append(tool)
        elif isinstance(tools := tool.get("tools"), list):
            pending += reversed(tools[:MAX_RUN_TOOL_CALLS])
    return found


def _listed(value: Any, path: tuple[str | int, ...]) -> list[Any]:
    """The list at `path` in an attribute's JSON (a path's first key not in the text: not parsed)."""
    if path and isinstance(value, str) and f'"{path[0]}"' not in value:
        return []  # a model call's whole input, without the key: not parsed for nothing
    value = _at(parse_json(value), path)
    return list(value) if isinstance(value, list | tuple) else []


def _at(value: Any, path: tuple[str | int, ...]) -> Any:
    """The value at `path` (keys and list indices) in parsed JSON; None when it is not there."""
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and len(value) > step else None
        else:
            value = value.get(step) if isinstance(value, Mapping) else None
    return value


def _read_results(contexts: Contexts) -> dict[str, list[str]]:
    """Tool span id -> the documents its result was read as (read once, for the contexts)."""
    read: dict[str, list[str]] = {}
    for _, text, call in contexts.tool_results():
        read.setdefault(call.span.span_id, []).append(text)
    return read


def _tool_call(span: DecodedSpan, texts: list[str] | None) -> RunToolCall:
    """One tool span's call; `texts` its result as the contexts read it, if they did."""
    name = first_value(span, _TOOL_NAME)
    arguments, result = first_value(span, _TOOL_ARGUMENTS), first_value(span, _TOOL_RESULT)
    error = _failure(span, result)
    # The result as the model was given it: a ToolMessage's or ToolOutput's content, documents one a line.
    if texts is None:
        texts = tool_result_texts(result)[0] if result is not None else []
    result_text = "\n\n".join(texts) if texts else _text(result)
    return _run_call(str(name) if name else span.name, arguments, result_text, error, span.span_id)


def _run_call(name: str, arguments: Any, result: str | None, error: str | None, span_id: str) -> RunToolCall:
    """A call of the run, its arguments as text (JSON text as recorded, an object as JSON: tool spans and
    messages record either) and clipped like its result."""
    arguments_text = _text(arguments)
    return RunToolCall(
        name=name,
        arguments=_clip(arguments_text),
        result=_clip(result),
        ok=error is None,
        error=error,
        clipped=any(t is not None and len(t) > MAX_RUN_TEXT_CHARS for t in (arguments_text, result)),
        span_id=span_id,
    )


def _tool_messages(contexts: Contexts) -> list[tuple[ToolCall, str]]:
    """This turn's tool messages (not earlier turns'), one per message: its documents joined."""
    kinds = [source.kind for source in contexts.sources]
    joined: dict[int, tuple[ToolCall, list[str]]] = {}
    for at, text, call in contexts.tool_results():
        if kinds[at] == ContextSourceKind.TOOL_MESSAGE:
            joined.setdefault(id(call), (call, []))[1].append(text)
    return [(call, "\n\n".join(texts)) for call, texts in joined.values()]


def _with_result(call: RunToolCall, answered: ToolCall, text: str) -> RunToolCall:
    """A tool span's call with the result its tool message gave the model, and the arguments of the call
    the message answers where the span recorded none (of the same tool: never another's)."""
    error = call.error or _error_result(text)
    given = _text(answered.arguments) if call.arguments is None and answered.name == call.name else None
    arguments = call.arguments if given is None else _clip(given)
    clipped = call.clipped or any(t is not None and len(t) > MAX_RUN_TEXT_CHARS for t in (text, given))
    return call.model_copy(
        update={
            "result": _clip(text),
            "arguments": arguments,
            "ok": error is None,
            "error": error,
            "clipped": clipped,
        }
    )


def _message_call(call: ToolCall, text: str) -> RunToolCall:
    """A tool message's call: named, with the arguments of the call it answers, where the messages say."""
    name = call.name or "(tool message)"
    return _run_call(name, call.arguments, text, _error_result(text), call.span.span_id)


def _failure(span: DecodedSpan, result: Any) -> str | None:
    """Why the call counts as failed: its span's status, an error attribute, or a result reporting one."""
    if span.status_code == 2:
        return f"span status ERROR{': ' + span.status_message if span.status_message else ''}"
    for level, message in _ERROR_LEVELS:
        if span.attributes.get(level) == "ERROR":
            return f"observation level ERROR: {span.attributes.get(message, '')}"
    error = first_value(span, _ERROR_KEYS)
    if error:
        return f"error recorded: {str(error)[:200]}"
    return _error_result(result)


def _error_result(result: Any) -> str | None:
    parsed = parse_json(result)
    if isinstance(parsed, Mapping) and isinstance(parsed.get("output"), Mapping):
        parsed = parsed["output"]  # a run's {"output": ...}
    if isinstance(parsed, Mapping):
        message = parsed.get("data") if isinstance(parsed.get("data"), Mapping) else parsed.get("kwargs")
        message = message if isinstance(message, Mapping) else parsed
        # A LlamaIndex ToolOutput, an MCP tool result, a LangChain ToolMessage.
        flag = next((k for k in ("is_error", "isError") if parsed.get(k) is True), None)
        if flag is not None or message.get("status") == "error":
            reported = f"{flag}: true" if flag else "status: error"
            return f"the result reports an error ({reported}): {_clip_words(_content(message))}"
        if parsed.get("error") and set(parsed) <= _ERROR_FIELDS:
            return f"the result is an error: {str(parsed['error'])[:200]}"
        return None
    if isinstance(parsed, str) and _ERROR_TEXT.match(parsed[:200]):
        return f"the result reads as an error: {_clip_words(parsed)}"
    return None


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content", message.get("blocks", ""))
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _clip_words(text: str, limit: int = 200) -> str:
    return " ".join(text[:limit].split())


def _tokens(llms: Sequence[DecodedSpan]) -> tuple[int | None, int | None]:
    prompt: int | None = None
    completion: int | None = None
    for llm in llms:
        found = (_first_number(llm, _PROMPT_TOKENS), _first_number(llm, _COMPLETION_TOKENS))
        if found == (None, None):
            found = _usage_json(llm)
        if found[0] is not None:
            prompt = (prompt or 0) + found[0]
        if found[1] is not None:
            completion = (completion or 0) + found[1]
    return prompt, completion


def _usage_json(span: DecodedSpan) -> tuple[int | None, int | None]:
    for key, fields in _USAGE_JSON.items():
        usage = _at(parse_json(span.attributes.get(key)), fields.path)
        if isinstance(usage, Mapping):
            return _number_in(usage, fields.inputs), _number_in(usage, fields.outputs)
    return None, None


def _number_in(values: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((int(values[k]) for k in keys if isinstance(values.get(k), int | float)), None)


def _first_number(span: DecodedSpan, keys: tuple[str, ...]) -> int | None:
    value = first_value(span, keys)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, default=str)


def _clip(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_RUN_TEXT_CHARS else text[:MAX_RUN_TEXT_CHARS]
