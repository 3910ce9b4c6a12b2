"""Strands Agents' messages written as span events, read as the span attributes Strands writes with
OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,gen_ai_span_attributes_only: the same messages in
the shape the Strands reader (`_strands`) reads.

Strands writes each span's messages one of three ways, chosen by that setting, and the span events of the
other two carry what the first writes as attributes:
- `gen_ai_latest_experimental` alone: `gen_ai.client.inference.operation.details` events, each with the very
  attributes the span would carry, read as the GenAI reader reads them from any producer (`_genai_events`).
- unset, its default (the GenAI conventions' v1.36 events): one event per message, `gen_ai.{user,assistant,
  system}.message` and `gen_ai.tool.message` (a message carrying tool results) with the message's content
  blocks, and `gen_ai.choice` with the output: a model call's content blocks, an agent's or a multi-agent
  run's text, a tool's result (its arguments were its `gen_ai.tool.message`), an event loop cycle's tool
  results (`tool.result`). They become the latest conventions' messages, content blocks mapped to parts as
  Strands maps them.
- Its memory spans write `memory.query` / `memory.results` / `memory.content` events in both modes, each with
  the `content` the span would carry.
An attribute the span carries itself is kept over its events'. Only Strands' spans with events are rebuilt
(a trace without any is returned as it is), and a span whose events were cut (`DecodedSpan.events_dropped`)
is named by `lost_events`, so the reading says what it could not see.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from tracescore.extract._genai_events import operation_details, rebuilt
from tracescore.extract._read import parse_json
from tracescore.model import MAX_SPAN_EVENT_BYTES, MAX_SPAN_EVENTS, DecodedSpan, Trace

if TYPE_CHECKING:
    from tracescore.extract._strands import Strands

__all__ = ["lost_events", "with_event_content"]


def with_event_content(strands: Strands, trace: Trace) -> Trace:
    """`trace` with its Strands spans' event-written messages as their attributes (itself when none has
    any)."""
    return rebuilt(trace, partial(_event_attributes, strands))


def lost_events(strands: Strands, spans: Iterable[DecodedSpan]) -> str | None:
    """What the spans' cut events cost the reading, when some were cut where Strands wrote messages (None:
    none was): a span that holds message events, or no messages at all. One whose messages are its own
    attributes lost other events (an exception's, say), not what is read."""
    cut = [
        span
        for span in spans
        if span.events_dropped
        and (
            any(event.name in strands.CONTENT_EVENTS for event in span.events)
            or not any(key in span.attributes for key in strands.MESSAGE_KEYS)
        )
    ]
    if not cut:
        return None
    named = ", ".join(f"{span.name!r} {span.span_id} lost {span.events_dropped}" for span in cut[:5])
    more = f" and {len(cut) - 5} more spans" if len(cut) > 5 else ""
    return (
        f"span events past the limits were not read ({named}{more}; tracescore keeps a span's last "
        f"{MAX_SPAN_EVENTS} events within {MAX_SPAN_EVENT_BYTES // (1024 * 1024)} MiB, the producer's SDK "
        "may drop more): messages written in them are missing"
    )


def _event_attributes(strands: Strands, span: DecodedSpan) -> dict[str, Any]:
    """The attributes the span's events stand for (none for a span of another producer)."""
    kind = strands.kind(span) if span.events else ""
    if not kind:
        return {}
    attributes = operation_details(strands, span)
    inputs: list[Any] = []
    for event in span.events:
        name, carried = event.name, event.attributes
        if name in strands.MEMORY_EVENTS:
            attributes.update(carried)
        elif name in strands.MESSAGE_ROLES:
            content = carried.get(strands.EVENT_CONTENT)
            if kind == strands.EXECUTE_TOOL:  # a tool span's one message: the call's arguments
                _put(attributes, strands.TOOL_ARGUMENTS[0], content)
            else:
                inputs.append(_message(strands, strands.MESSAGE_ROLES[name], content))
        elif name == strands.SYSTEM_MESSAGE:
            _put(attributes, strands.SYSTEM_INSTRUCTIONS, _parts(strands, carried.get(strands.EVENT_CONTENT)))
        elif name == strands.CHOICE:
            _choice(strands, kind, span, carried, attributes)
    if inputs:
        _put(attributes, strands.INPUT_MESSAGES, _serialised(strands, inputs))
    return attributes


def _choice(
    strands: Strands, kind: str, span: DecodedSpan, carried: Mapping[str, Any], attributes: dict[str, Any]
) -> None:
    """A `gen_ai.choice` event: what the span's operation returned."""
    output = carried.get(strands.EVENT_MESSAGE)
    if kind == strands.EXECUTE_TOOL:
        # As the latest conventions record it: a failed call's content is no result (its status says why).
        if span.attributes.get(strands.TOOL_STATUS) != strands.TOOL_FAILED:
            _put(attributes, strands.TOOL_RESULT[0], output)
    elif strands.EVENT_TOOL_RESULT in carried:  # an event loop cycle: the tool results fed back to the model
        message = _message(strands, strands.USER, carried[strands.EVENT_TOOL_RESULT])
        _put(attributes, strands.INPUT_MESSAGES, _serialised(strands, [message]))
    elif output is not None:
        # An agent's or a multi-agent run's answer is text; a model call's, content blocks.
        message = _message(strands, strands.ASSISTANT, output, text=kind in strands.TEXT_ANSWER_KINDS)
        if isinstance(message, dict) and (finish := carried.get(strands.FINISH_REASON)) is not None:
            message[strands.FINISH_REASON] = finish
        _put(attributes, strands.OUTPUT_MESSAGES, _serialised(strands, [message]))


def _message(strands: Strands, role: str, content: Any, text: bool = False) -> dict[str, Any] | str | None:
    """One message in the latest conventions' shape: its content blocks as parts, or its `text` (a
    multi-agent run's task is text or blocks); Strands' redaction marker as it is."""
    if content is None or content == strands.REDACTED:
        return content
    parts = None if text else _parts(strands, content)
    if parts is None:
        parts = [{strands.PART_TYPE: strands.TEXT_PART, strands.PART_CONTENT: content}]
    return {strands.ROLE: role, strands.PARTS: parts}


def _serialised(strands: Strands, messages: list[Any]) -> str | None:
    """Messages as the span attribute holds them (JSON); redacted when any was, as Strands writes them."""
    if strands.REDACTED in messages:
        return strands.REDACTED
    kept = [message for message in messages if message is not None]
    return json.dumps(kept) if kept else None


def _parts(strands: Strands, content: Any) -> list[dict[str, Any]] | None:
    """Content blocks (Bedrock's Converse shape, JSON) as GenAI parts: text, a tool call, a tool's result,
    any other block by its key. None when `content` is not a list of blocks."""
    blocks = parse_json(content)
    if not isinstance(blocks, list) or not all(isinstance(block, Mapping) for block in blocks):
        return None
    return [_part(strands, key, value) for block in blocks for key, value in block.items()]


def _part(strands: Strands, key: str, value: Any) -> dict[str, Any]:
    if key == strands.TEXT_BLOCK:
        return {strands.PART_TYPE: strands.TEXT_PART, strands.PART_CONTENT: value}
    if key == strands.TOOL_USE_BLOCK and isinstance(value, Mapping):
        return {
            strands.PART_TYPE: strands.TOOL_CALL_PART,
            strands.PART_NAME: value.get(strands.BLOCK_NAME),
            strands.PART_ID: value.get(strands.BLOCK_TOOL_USE_ID),
            strands.PART_ARGUMENTS: value.get(strands.BLOCK_INPUT),
        }
    if key == strands.TOOL_RESULT_BLOCK and isinstance(value, Mapping):
        return {
            strands.PART_TYPE: strands.TOOL_RESPONSE_PART,
            strands.PART_ID: value.get(strands.BLOCK_TOOL_USE_ID),
            strands.PART_RESPONSE: value.get(strands.BLOCK_CONTENT),
        }
    return {strands.PART_TYPE: key, strands.PART_CONTENT: value}


def _put(attributes: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        attributes[key] = (
            value if isinstance(value, str) or not isinstance(value, list) else json.dumps(value)
        )
