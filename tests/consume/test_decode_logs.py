"""decode_message reads a logs message (the Collector's logs pipeline writing to the spans topic): its GenAI
events as their span's events, the other records counted, bytes that are neither still dead letters."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import INVALID_SPAN, set_span_in_context

from tracescore import semconv
from tracescore.consume import NotOtlp, decode_message
from tracescore.consume._decode import LogEvent, LogEvents
from tracescore.export import encode_trace_messages
from tracescore.model import SpanEvent

DETAILS = "gen_ai.client.inference.operation.details"
OUTPUT = '[{"role": "assistant", "parts": [{"type": "text", "content": "14 hours."}]}]'


def _emitted(emit: Callable[[object, object], None]) -> tuple[bytes, list[object]]:
    """What the real SDK exports for the records `emit(logger, span_context)` writes inside one span:
    (the ExportLogsServiceRequest bytes, the finished spans)."""
    tracer_provider = TracerProvider(resource=Resource.create({"service.name": "app"}))
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(resource=tracer_provider.resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    logger = logger_provider.get_logger("opentelemetry.util.genai.handler")
    spans = InMemorySpanExporter()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    with tracer_provider.get_tracer("app").start_as_current_span("chat") as span:
        emit(logger, set_span_in_context(span))
    return encode_logs(logs.get_finished_logs()).SerializeToString(), list(spans.get_finished_spans())


def _details(logger: object, context: object) -> None:
    logger.emit(  # type: ignore[attr-defined]
        event_name=DETAILS,
        timestamp=5_000,
        context=context,
        attributes={semconv.GEN_AI_OUTPUT_MESSAGES: OUTPUT, "gen_ai.usage.input_tokens": 61},
    )


def test_a_genai_event_log_record_is_read_as_an_event_of_its_span() -> None:
    message, [span] = _emitted(_details)

    events = decode_message(message)

    assert isinstance(events, LogEvents)
    [read] = events
    assert read.trace_id == format(span.context.trace_id, "032x")
    assert read.span_id == format(span.context.span_id, "016x")
    assert read.event == SpanEvent(
        DETAILS, {semconv.GEN_AI_OUTPUT_MESSAGES: OUTPUT, "gen_ai.usage.input_tokens": 61}, 5_000
    )
    assert read.size > len(OUTPUT)
    assert (events.without_trace, events.not_events) == (0, 0)


def test_the_body_is_kept_under_one_key_a_kvlist_as_a_dict_and_the_older_event_name_attribute_names_it() -> (
    None
):
    def emit(logger: object, context: object) -> None:
        logger.emit(  # type: ignore[attr-defined]
            context=context,
            observed_timestamp=7_000,  # no event time: the time it was observed
            attributes={semconv.EVENT_NAME: "gen_ai.choice"},
            body={"index": 0, "message": {"content": "14 hours."}, "tags": ["a", "b"]},
        )

    message, _ = _emitted(emit)

    [read] = decode_message(message)

    assert read.event == SpanEvent(
        "gen_ai.choice",
        {
            semconv.EVENT_NAME: "gen_ai.choice",
            semconv.LOG_RECORD_BODY: {"index": 0, "message": {"content": "14 hours."}, "tags": ["a", "b"]},
        },
        7_000,
    )


def test_a_record_without_the_field_is_named_by_the_first_event_name_attribute_it_has() -> None:
    """LiteLLM names its events in an `event_name` attribute: read, as `event.name` is; where a record has
    both, `event.name` names it, and an `event_name` that is no GenAI event is counted, not read."""

    def emit(logger: object, context: object) -> None:
        for timestamp, attributes in enumerate(
            (
                {"event_name": "gen_ai.content.prompt", "gen_ai.system": "openai"},
                {"event_name": "gen_ai.user.message", semconv.EVENT_NAME: "gen_ai.choice"},
                {semconv.EVENT_NAME: "app.started", "event_name": "gen_ai.choice"},
                {"event_name": "app.started"},
            ),
            start=1,
        ):
            logger.emit(context=context, timestamp=timestamp, attributes=attributes)  # type: ignore[attr-defined]

    message, _ = _emitted(emit)

    events = decode_message(message)

    assert [e.event.name for e in events] == ["gen_ai.content.prompt", "gen_ai.choice"]
    assert events[0].event.attributes == {"event_name": "gen_ai.content.prompt", "gen_ai.system": "openai"}
    assert (events.without_trace, events.not_events) == (0, 2)


def test_records_without_a_trace_or_not_a_genai_event_are_counted_not_read() -> None:
    def emit(logger: object, context: object) -> None:
        no_span = set_span_in_context(INVALID_SPAN)
        logger.emit(event_name=DETAILS, timestamp=1, context=no_span)  # type: ignore[attr-defined]
        logger.emit(context=context, timestamp=2, body="GET /search 200")  # type: ignore[attr-defined]
        logger.emit(context=context, timestamp=3, event_name="browser.page_view")  # type: ignore[attr-defined]
        _details(logger, context)

    message, _ = _emitted(emit)

    events = decode_message(message)

    assert [e.event.name for e in events] == [DETAILS]
    assert (events.without_trace, events.not_events) == (1, 2)


def test_a_logs_message_of_nothing_to_read_is_read_not_dead_lettered() -> None:
    message, _ = _emitted(lambda logger, context: logger.emit(context=context, timestamp=1, body="GET / 200"))  # type: ignore[attr-defined]

    events = decode_message(message)

    assert isinstance(events, LogEvents)
    assert (list(events), events.not_events) == ([], 1)


def _otlp_json(message: bytes) -> bytes:
    """OTLP JSON as the Collector writes it: protobuf's JSON mapping, ids in hex."""
    request = ExportLogsServiceRequest()
    request.ParseFromString(message)
    document = MessageToDict(request)
    for resource_logs in document["resourceLogs"]:
        for scope_logs in resource_logs["scopeLogs"]:
            for record in scope_logs["logRecords"]:
                for key in ("traceId", "spanId"):
                    if key in record:
                        record[key] = base64.b64decode(record[key]).hex()
    return json.dumps(document).encode()


def test_otlp_json_logs_read_as_protobuf_does() -> None:
    message, _ = _emitted(_details)

    assert decode_message(_otlp_json(message)) == decode_message(message)


def test_spans_are_still_read_as_spans() -> None:
    _, spans = _emitted(_details)
    [(_, traces)] = encode_trace_messages(spans)

    [span] = decode_message(traces)

    assert not isinstance(decode_message(traces), LogEvents)
    assert span.name == "chat"


@pytest.mark.parametrize(
    "value",
    [
        # Records with no time at all: what garbage parses as, never what an SDK writes.
        pytest.param(
            ExportLogsServiceRequest(
                resource_logs=[ResourceLogs(scope_logs=[ScopeLogs(log_records=[LogRecord()])])]
            ).SerializeToString(),
            id="timeless-record",
        ),
        pytest.param(b"\n\x04\x12\x02\x12\x00", id="empty-nested"),
        pytest.param(json.dumps({"resourceLogs": []}).encode(), id="json-no-records"),
        pytest.param(b'{"resourceLogs": "nope"}', id="json-wrong-shape"),
    ],
)
def test_messages_with_no_log_record_are_still_not_otlp(value: bytes) -> None:
    with pytest.raises(NotOtlp):
        decode_message(value)


def test_log_event_is_what_the_assembler_buffers() -> None:
    # The unit the pipeline hands the assembler: its span's ids, the event, its encoded size.
    assert LogEvent._fields == ("trace_id", "span_id", "event", "size")
