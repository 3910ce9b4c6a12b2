"""decode_message keeps each span's events (where some producers write its messages), bounded and counted."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_decode import otlp_json

from tracescore.consume import decode_message
from tracescore.export import encode_trace_messages
from tracescore.model import MAX_SPAN_EVENT_BYTES, MAX_SPAN_EVENTS, SpanEvent

MESSAGE = '[{"text": "The Aurora X2 battery lasts 14 hours."}]'


def _request(*spans: Span) -> bytes:
    request = ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=list(spans))])]
    )
    return request.SerializeToString()


def _span(number: int, events: list[Span.Event], dropped: int = 0) -> Span:
    return Span(
        trace_id=bytes.fromhex("ab" * 16),
        span_id=number.to_bytes(8, "big"),
        name="chat",
        events=events,
        dropped_events_count=dropped,
    )


def _event(name: str, text: str = "", time: int = 0) -> Span.Event:
    attributes = [KeyValue(key="message", value=AnyValue(string_value=text))] if text else []
    return Span.Event(name=name, attributes=attributes, time_unix_nano=time)


def test_a_spans_events_are_decoded_with_name_attributes_and_time_from_protobuf_and_json() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("strands.telemetry.tracer").start_as_current_span("chat") as span:
        span.add_event("gen_ai.user.message", {"content": MESSAGE}, timestamp=1_000)
        span.add_event("gen_ai.choice", {"message": MESSAGE, "index": 0, "tags": ["a", "b"]}, timestamp=2_000)
    finished = list(exporter.get_finished_spans())
    [(_, proto)] = encode_trace_messages(finished)

    [decoded] = decode_message(proto)

    assert decoded.events == (
        SpanEvent("gen_ai.user.message", {"content": MESSAGE}, 1_000),
        SpanEvent("gen_ai.choice", {"message": MESSAGE, "index": 0, "tags": ["a", "b"]}, 2_000),
    )
    assert decoded.events_dropped == 0
    assert decode_message(otlp_json(finished)) == [decoded]


def test_a_span_without_events_carries_none() -> None:
    [decoded] = decode_message(_request(_span(1, [])))
    assert decoded.events == () and decoded.events_dropped == 0


def test_event_names_and_keys_are_shared_between_spans_as_attribute_keys_are() -> None:
    first, second = decode_message(
        _request(_span(1, [_event("gen_ai.choice", "a")]), _span(2, [_event("gen_ai.choice", "b")]))
    )
    assert first.events[0].name is second.events[0].name
    [first_key], [second_key] = first.events[0].attributes, second.events[0].attributes
    assert first_key is second_key


def test_a_span_keeps_its_last_events_up_to_the_cap_and_counts_the_others_with_its_producers() -> None:
    events = [_event(f"step.{number}", time=number) for number in range(MAX_SPAN_EVENTS + 50)]
    [decoded] = decode_message(_request(_span(1, events, dropped=5)))
    # The last ones: a model call's output and a conversation's latest messages come last.
    assert [e.name for e in decoded.events] == [f"step.{n}" for n in range(50, MAX_SPAN_EVENTS + 50)]
    assert decoded.events_dropped == 50 + 5


def test_events_past_the_size_bound_are_dropped_whole_and_counted_never_cut() -> None:
    big = "x" * (MAX_SPAN_EVENT_BYTES // 2)
    events = [
        _event("gen_ai.user.message", big),
        _event("gen_ai.assistant.message", big),
        _event("gen_ai.choice", "done"),
    ]
    [decoded] = decode_message(_request(_span(1, events)))
    assert [e.name for e in decoded.events] == ["gen_ai.assistant.message", "gen_ai.choice"]
    assert decoded.events[0].attributes["message"] == big
    assert decoded.events_dropped == 1

    # One event bigger than the bound alone: the span is decoded without it.
    [alone] = decode_message(_request(_span(2, [_event("gen_ai.choice", "y" * (MAX_SPAN_EVENT_BYTES + 1))])))
    assert alone.events == () and alone.events_dropped == 1
