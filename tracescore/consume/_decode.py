"""Kafka message bytes -> decoded spans. Pure functions, no I/O.

Two encodings are read, detected per message: OTLP protobuf (the Collector's `otlp_proto`, our exporter) and
OTLP JSON (the Collector's `otlp_json`). A protobuf ExportTraceServiceRequest starts with field 1's tag
(0x0A); OTLP JSON starts with `{`, so the first non-blank byte tells them apart (0x0A is a blank: a protobuf
request whose first resource takes 123 bytes starts b"\n{", and is read as protobuf once it is not JSON).

A span's events are kept (some producers write its messages as events), bounded: its last `MAX_SPAN_EVENTS`
within `MAX_SPAN_EVENT_BYTES` of encoded events; the older ones are counted on the span (`events_dropped`),
for whoever reads its events to say what is missing.

A message may also be an ExportLogsServiceRequest (the Collector's logs pipeline writing to the same topic):
some producers write an LLM call's messages as OTel log records ("events", tied to their span by trace and
span id) rather than on the span. Its GenAI events are returned as `LogEvent`s, which the assembler adds to
their span's events; a record's event name is its `event_name` field, else the first of the attributes
`semconv.EVENT_NAME_ATTRIBUTES` lists (producers that predate the field, or name it their own way). It is
told apart without a cost to spans: it is only tried once the message failed to read as spans, which a logs
request always does (LogRecord's field 1 is a fixed64 time, Span's the length-delimited trace id, so no
record reads as a span with an id); OTLP JSON names it (`resourceLogs`).
"""

from __future__ import annotations

import base64
import json
import re
from sys import intern
from typing import Any, NamedTuple, TypeVar

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tracescore import semconv
from tracescore.model import MAX_SPAN_EVENT_BYTES, MAX_SPAN_EVENTS, DecodedSpan, SpanEvent

__all__ = ["LogEvent", "LogEvents", "NotOtlp", "decode_message"]

# OTLP JSON: `{` after blanks. Matched in place: a protobuf message starts with b"\n", a blank to
# bytes.lstrip(), which would copy every message whole to read one byte.
_JSON_START = re.compile(rb"\s*\{")
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


# Attribute keys already interned, each to its interned copy. Bounded: a stream repeats a few dozen names, so
# past `_MAX_KEYS` (keys built per request, or garbage) it starts again; a long key is interned, never kept.
_KEYS: dict[str, str] = {}
_MAX_KEYS = 4096
_MAX_KEY_CHARS = 256


class NotOtlp(ValueError):
    """The message is not an OTLP ExportTraceServiceRequest (protobuf or JSON) with spans, nor an
    ExportLogsServiceRequest with log records."""


class LogEvent(NamedTuple):
    """A log record that is a GenAI event, as the span event it stands for, with the span it belongs to and
    its encoded size (which counts toward a span's `MAX_SPAN_EVENT_BYTES`, as a span event's does)."""

    trace_id: str
    span_id: str
    event: SpanEvent
    size: int


class LogEvents(list[LogEvent]):
    """What a logs message gave: its GenAI events, and how many of its records were skipped (explained in
    the assembly counts): without a trace and span id, or not a GenAI event."""

    without_trace: int = 0
    not_events: int = 0


def decode_message(value: bytes | None) -> list[DecodedSpan] | LogEvents:
    """The spans of a traces message, or the GenAI events of a logs message (a `LogEvents`)."""
    if not value:
        raise NotOtlp("empty message")
    try:
        request = _parse(value, ExportTraceServiceRequest, _SPANS_PATH)
    except NotOtlp as exc:
        return _logs_or_raise(value, exc)
    spans = []
    keys = _KEYS
    for resource_spans in request.resource_spans:
        service = _service_name(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                # Strings are nearly every attribute: a non-empty string_value is one (a oneof holds one
                # field), read without the oneof lookup; anything else, "" included, takes the general path.
                # Keys are interned: the spans of a stream repeat a few dozen names, so buffered spans share
                # one copy of each, and a reader asking with an interned key (`extract`'s list keys) matches
                # by identity, not by comparing the copy decoded seconds ago, no longer in the CPU's caches.
                # A loop here, not a function with a comprehension: two Python calls a span fewer. The
                # interned copy is looked up in a small dict of the keys seen (`_KEYS`), not in the
                # interpreter's table of every interned string: the same copy, from memory the CPU caches
                # (a subscript, not `.get`: no method call, and a miss is only a key's first sight).
                attributes: dict[str, Any] = {}
                for kv in span.attributes:
                    try:
                        key = keys[kv.key]
                    except KeyError:
                        key = _interned(kv.key)
                    attributes[key] = kv.value.string_value or _value(kv.value)
                decoded = DecodedSpan(
                    span.trace_id.hex(),
                    span.span_id.hex(),
                    span.name,
                    service,
                    scope,
                    attributes,
                    span.end_time_unix_nano,
                    span.parent_span_id.hex() or None,
                    span.start_time_unix_nano,
                    span.kind,
                )
                status = span.status  # always sent by the OTel SDK (UNSET): HasField would not spare it
                if status.code:  # most spans leave it unset
                    decoded.status_code, decoded.status_message = status.code, status.message
                if span.events:  # most spans carry none: they pay this test only
                    decoded.events, decoded.events_dropped = _events(span)
                if len(decoded.trace_id) != 32 or len(decoded.span_id) != 16:
                    invalid = (
                        f"a span has an invalid trace id {decoded.trace_id!r} or span id {decoded.span_id!r}"
                    )
                    return _logs_or_raise(value, NotOtlp(invalid))
                spans.append(decoded)
    # Arbitrary bytes sometimes parse as an empty protobuf message; an OTLP export always carries spans.
    if not spans:
        return _logs_or_raise(value, NotOtlp("no OTLP spans in the message (wrong topic or encoding?)"))
    return spans


def _logs_or_raise(value: bytes, not_spans: NotOtlp) -> LogEvents:
    """A message that did not read as spans: its GenAI events if it is a logs request, else `not_spans`.
    Only such messages pay for this second reading."""
    events = _decode_logs(value)
    if events is None:
        raise not_spans
    return events


def _decode_logs(value: bytes) -> LogEvents | None:
    """The GenAI events of an ExportLogsServiceRequest, None when `value` is not one. A record counts as one
    when it has a time: SDKs always set one (the observed time), and bytes that are neither request nor
    trace would otherwise parse as a few empty records, not as the dead letter they are."""
    request = _parse_logs(value)
    if request is None:
        return None
    events = LogEvents()
    records = 0
    prefix = semconv.GEN_AI_EVENT_PREFIX
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                time = record.time_unix_nano or record.observed_time_unix_nano
                if not time:
                    continue
                records += 1
                trace_id, span_id = record.trace_id, record.span_id
                if len(trace_id) != 16 or len(span_id) != 8:
                    events.without_trace += 1  # no trace to join (or an invalid id)
                    continue
                # The name before the attributes: a record that is not a GenAI event costs no more.
                name = record.event_name or _event_name_attribute(record.attributes)
                if not name.startswith(prefix):
                    events.not_events += 1
                    continue
                attributes: dict[str, Any] = {}
                for kv in record.attributes:
                    attributes[intern(kv.key)] = kv.value.string_value or _value(kv.value)
                body = _value(record.body)  # None when it has none (SDKs send an empty one)
                if body is not None:
                    attributes[semconv.LOG_RECORD_BODY] = body
                event = SpanEvent(intern(name), attributes, time)
                events.append(LogEvent(trace_id.hex(), span_id.hex(), event, record.ByteSize()))
    return events if records else None


def _event_name_attribute(key_values: Any) -> str:
    """The event name a record without the field carries among its attributes: the first of
    `semconv.EVENT_NAME_ATTRIBUTES` it has ("" without any)."""
    keys = semconv.EVENT_NAME_ATTRIBUTES
    found = {kv.key: kv.value.string_value for kv in key_values if kv.key in keys}
    return next((found[key] for key in keys if key in found), "")


def _parse_logs(value: bytes) -> ExportLogsServiceRequest | None:
    try:
        return _parse(value, ExportLogsServiceRequest, _LOGS_PATH)
    except NotOtlp:
        return None


def _interned(key: str) -> str:
    """`key`'s interned copy, remembered in `_KEYS` within its bounds."""
    key = intern(key)
    if len(key) <= _MAX_KEY_CHARS:
        if len(_KEYS) >= _MAX_KEYS:
            _KEYS.clear()
        _KEYS[key] = key
    return key


def _events(span: Any) -> tuple[tuple[SpanEvent, ...], int]:
    """The span's last events within the bounds, oldest first, and how many it lost (past the bounds, or
    dropped by its producer). Names and keys interned: a producer writes the same few on every span."""
    events = span.events
    kept: list[SpanEvent] = []
    budget = MAX_SPAN_EVENT_BYTES
    for event in reversed(events):
        if len(kept) == MAX_SPAN_EVENTS:
            break
        budget -= event.ByteSize()
        if budget < 0:
            break
        attributes: dict[str, Any] = {}
        for kv in event.attributes:
            attributes[intern(kv.key)] = kv.value.string_value or _value(kv.value)
        kept.append(SpanEvent(intern(event.name), attributes, event.time_unix_nano))
    kept.reverse()
    return tuple(kept), len(events) - len(kept) + span.dropped_events_count


# Where OTLP JSON keeps its spans and its log records: each level's key, camelCase and snake_case.
_SPANS_PATH = (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans",))
_LOGS_PATH = (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records"))


# What a message is read as: a traces request (the decoder's first try) or a logs request (`_decode_logs`).
_Request = TypeVar("_Request", ExportTraceServiceRequest, ExportLogsServiceRequest)


def _parse(value: bytes, request_type: type[_Request], path: tuple[tuple[str, ...], ...]) -> _Request:
    """`value` as a `request_type`, OTLP protobuf or OTLP JSON (`path`: where its JSON keeps the items
    whose hex ids protobuf's JSON mapping reads as base64)."""
    if not _JSON_START.match(value):
        return _parse_protobuf(value, request_type)
    try:
        return _parse_json(value, request_type, path)
    except NotOtlp as not_json:
        # Protobuf starts so too when its first resource's spans take 123 bytes (field 1's tag is b"\n", a
        # blank, and the length b"{"): such a message is read as the protobuf it is.
        if value[:1] == b"\n":
            try:
                return _parse_protobuf(value, request_type)
            except NotOtlp:
                pass
        raise not_json


def _parse_protobuf(value: bytes, request_type: type[_Request]) -> _Request:
    request = request_type()
    try:
        request.ParseFromString(value)
    except DecodeError as exc:
        raise NotOtlp(f"not OTLP protobuf: {exc}") from exc
    return request


def _parse_json(value: bytes, request_type: type[_Request], path: tuple[tuple[str, ...], ...]) -> _Request:
    try:
        document = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise NotOtlp(f"not OTLP JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise NotOtlp("not OTLP JSON: the top level is not an object")
    try:
        _hex_ids_to_base64(document, path)
        return json_format.ParseDict(document, request_type(), ignore_unknown_fields=True)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise NotOtlp(f"not OTLP JSON: {exc}") from exc


def _hex_ids_to_base64(document: dict[str, Any], path: tuple[tuple[str, ...], ...]) -> None:
    # OTLP JSON writes trace and span ids as hex; protobuf's JSON mapping expects base64 for bytes fields.
    resources, scopes, items = path
    for resource in _list(document, *resources):
        for scope in _list(resource, *scopes):
            for span in _list(scope, *items):
                for holder in (span, *_list(span, "links")):
                    for key in _ID_FIELDS:
                        if isinstance(holder, dict) and isinstance(holder.get(key), str):
                            holder[key] = _hex_to_base64(holder[key])


def _list(holder: Any, *keys: str) -> list[Any]:
    if not isinstance(holder, dict):
        return []
    for key in keys:
        if isinstance(holder.get(key), list):
            return holder[key]
    return []


def _hex_to_base64(hex_id: str) -> str:
    try:
        return base64.b64encode(bytes.fromhex(hex_id)).decode()
    except ValueError as exc:
        raise ValueError(f"id {hex_id[:40]!r} is not hex") from exc


def _service_name(key_values: Any) -> str:
    # The only resource attribute a span keeps: the rest is never read, so it is not converted. Searched
    # from the end: SDKs merge it in after their defaults (telemetry.sdk.*), so it is usually last.
    for kv in reversed(key_values):
        if kv.key == "service.name":
            return str(_value(kv.value))
    return "unknown_service"


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None
