"""Messages a GenAI producer writes elsewhere than the span attributes the GenAI reader (`_genai`) reads, read
as those attributes, so that every format reads alike:

- `gen_ai.client.inference.operation.details` span events, the latest GenAI conventions' opt-in event: each
  carries the very attributes the span would (`gen_ai.input.messages`, `gen_ai.output.messages`,
  `gen_ai.system_instructions`); several on one span are applied in order, a later one replacing an earlier
  value. (The OpenTelemetry Python GenAI instrumentations write this event as a log record, not on the span:
  only a producer that puts it on the span, such as Strands Agents, is read here.)
- Pydantic AI's first span format (`InstrumentationSettings(version=1)`, Pydantic AI 1.x): a chat span's
  messages as a JSON list of the GenAI conventions' v1.36 events in its `events` attribute (`gen_ai.system.
  message`, `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message`, then `gen_ai.choice`
  with the model's reply), their bodies in OpenAI's message shape (`content`, `tool_calls`, a tool message's
  `id`). They become the latest conventions' messages and parts, as version 2 writes them. (The agent span's
  `all_messages_events` is the run's messages again, as version 2's `pydantic_ai.all_messages`: not read.)
- The same v1.36 events as OTel log records, each tied to its chat span (Pydantic AI's version 1 with
  `event_mode='logs'`; Semantic Kernel, whose log lines carry the message as JSON text and `event.name`
  among their attributes): the consumer adds them to their span's events (`tracescore.consume`), the
  record's attributes as the event's and its body, the message, under `log.record.body`. They are read as
  the `events` attribute above, the body's keys beside the attributes as Pydantic AI lists them there.
- LiteLLM's log events (`LITELLM_OTEL_INTEGRATION_ENABLE_EVENTS=true`), alike: a `gen_ai.content.prompt` per
  message, its role in its body (read as the v1.36 event of that role), and a `gen_ai.content.completion` per
  choice (read as `gen_ai.choice`). With content capture `true` its span carries no message and no
  `gen_ai.operation.name`: a span whose log records are a model call's messages is read as a `chat` span.

What a span carries itself is kept over what its events say. A trace with neither is returned as it is.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tracescore import semconv
from tracescore.extract._read import parse_json
from tracescore.model import DecodedSpan, Trace

if TYPE_CHECKING:
    from tracescore.extract._genai import GenAI

__all__ = ["event_messages", "operation_details", "rebuilt"]


def rebuilt(trace: Trace, attributes_of: Callable[[DecodedSpan], Mapping[str, Any]]) -> Trace:
    """`trace` with each span's `attributes_of(span)` added under its own attributes (what the span carries
    itself wins); `trace` itself when no span has any."""
    spans: list[DecodedSpan] | None = None
    for index, span in enumerate(trace.spans):
        added = attributes_of(span)
        if added:
            if spans is None:
                spans = list(trace.spans)
            spans[index] = dataclasses.replace(span, attributes={**added, **span.attributes})
    if spans is None:
        return trace
    return Trace(trace.trace_id, tuple(spans), trace.incomplete, trace.offsets)


def operation_details(genai: GenAI, span: DecodedSpan) -> dict[str, Any]:
    """The attributes the span's `gen_ai.client.inference.operation.details` events carry, in order."""
    attributes: dict[str, Any] = {}
    for event in span.events:
        if event.name == genai.OPERATION_DETAILS:
            attributes.update(event.attributes)
    return attributes


def event_messages(genai: GenAI, span: DecodedSpan) -> dict[str, Any]:
    """The message attributes the span's events stand for: its operation-details events', else Pydantic AI's
    version 1 `events`, else the v1.36 events its log records added (none for a span with none of them:
    checked first, as this runs on every span). A span with no GenAI operation whose log records are a model
    call's messages gets the operation too (`chat`): they say what it is."""
    if span.events:
        attributes = operation_details(genai, span)
        if attributes:
            return attributes
    recorded = span.attributes.get(genai.EVENTS_ATTRIBUTE)
    if recorded is None and not span.events:
        return {}
    if genai.kind(span):
        events = parse_json(recorded) if recorded is not None else _logged_v1_events(genai, span)
        return _v1_messages(genai, events)
    messages = _v1_messages(genai, _logged_v1_events(genai, span))
    return {genai.OPERATION_NAME: genai.LLM_CALL, **messages} if messages else {}


def _logged_v1_events(genai: GenAI, span: DecodedSpan) -> list[dict[str, Any]]:
    """The span's events that came from log records with a message body (`semconv.LOG_RECORD_BODY`: a map,
    or its JSON text, as Semantic Kernel's log lines carry it), as Pydantic AI lists them in an `events`
    attribute: the record's attributes and the body's keys, and the event's name. An event a producer put on
    the span itself has no such body and is not among them."""
    listed = []
    for event in span.events:
        body = parse_json(event.attributes.get(semconv.LOG_RECORD_BODY))
        if isinstance(body, Mapping):
            attributes = {k: v for k, v in event.attributes.items() if k != semconv.LOG_RECORD_BODY}
            listed.append({**attributes, **body, genai.EVENT_NAME: event.name})
    return listed


def _v1_messages(genai: GenAI, events: Any) -> dict[str, Any]:
    """The GenAI conventions' v1.36 events (as Pydantic AI lists them) as the latest conventions'
    attributes."""
    if not isinstance(events, list):
        return {}
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    system: list[dict[str, Any]] = []
    for event in events:
        if not isinstance(event, Mapping):
            return {}  # not a list of events: some other `events` attribute
        name = event.get(genai.EVENT_NAME)
        if name == genai.PROMPT_EVENT:  # a message of any role, named by its role
            role = event.get(genai.ROLE)
            name = genai.ROLE_EVENTS.get(role) if isinstance(role, str) else None
        if not isinstance(name, str):  # looked up below: a list or a map would raise
            continue
        if name == genai.SYSTEM_MESSAGE:
            system.extend(_parts(genai, event.get(genai.EVENT_CONTENT)))
        elif name in genai.MESSAGE_EVENTS:
            inputs.append(_message(genai, genai.MESSAGE_EVENTS[name], event))
        elif name in genai.CHOICE_EVENTS and isinstance(body := event.get(genai.EVENT_MESSAGE), Mapping):
            output = _message(genai, genai.ASSISTANT, body)
            if (finish := event.get(genai.FINISH_REASON)) is not None:
                output[genai.FINISH_REASON] = finish
            outputs.append(output)
    keyed = {genai.INPUT_MESSAGES: inputs, genai.OUTPUT_MESSAGES: outputs, genai.SYSTEM_INSTRUCTIONS: system}
    return {key: json.dumps(value) for key, value in keyed.items() if value}


def _message(genai: GenAI, role: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """One message body (OpenAI's shape) as a message with parts: its content, its tool calls, or for a
    tool message the result it carries."""
    content = body.get(genai.EVENT_CONTENT)
    if role == genai.TOOL:
        call_id = next((i for key in genai.EVENT_TOOL_CALL_IDS if (i := body.get(key)) is not None), None)
        part = {genai.PART_TYPE: genai.TOOL_RESPONSE_PART, genai.PART_ID: call_id}
        return {genai.ROLE: role, genai.PARTS: [{**part, genai.PART_RESPONSE: content}]}
    parts = _parts(genai, content)
    for call in body.get(genai.EVENT_TOOL_CALLS) or ():
        function = call.get(genai.EVENT_FUNCTION) if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(
                {
                    genai.PART_TYPE: genai.TOOL_CALL_PART,
                    genai.PART_ID: call.get(genai.PART_ID),
                    genai.PART_NAME: function.get(genai.PART_NAME),
                    genai.PART_ARGUMENTS: parse_json(function.get(genai.PART_ARGUMENTS)),
                }
            )
    return {genai.ROLE: role, genai.PARTS: parts}


def _parts(genai: GenAI, content: Any) -> list[dict[str, Any]]:
    """A message's content as parts: text, or each item of a multimodal list (a text, or a part as given)."""
    if content is None:
        return []
    items = content if isinstance(content, list) else [content]
    return [
        {genai.PART_TYPE: genai.TEXT_PART, genai.PART_CONTENT: item} if isinstance(item, str) else item
        for item in items
    ]
