"""decode_message: Kafka bytes (OTLP protobuf or OTLP JSON) -> spans."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore.consume import NotOtlp, decode_message
from tracescore.export import encode_trace_messages
from tracescore.extract import extract
from tracescore.model import DecodedSpan, Interaction, RagRecord, Trace


@pytest.fixture(scope="module")
def _global_exporter() -> InMemorySpanExporter:
    # `@tracescore.rag` traces through the global provider, which can be set only once per process.
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "decode-tests"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    return exporter


@pytest.fixture
def decorated_spans(_global_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    _global_exporter.clear()
    yield _global_exporter
    _global_exporter.clear()


def local_spans(service: str = "rag-api") -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def round_trip(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[DecodedSpan]:
    return [d for _, value in encode_trace_messages(spans) for d in decode_message(value)]


# --- decode_message ---------------------------------------------------------------------------------


def test_decode_round_trip_of_a_decorated_call(decorated_spans: InMemorySpanExporter) -> None:
    @tracescore.rag(route="/ask")
    def answer(query: str, contexts: list[str]) -> str:
        return "Paris."

    answer("Capital of France?", ["Paris is the capital of France.", "France is in Europe."])
    [original] = decorated_spans.get_finished_spans()
    [span] = round_trip([original])

    assert span.trace_id == format(original.context.trace_id, "032x")
    assert span.span_id == format(original.context.span_id, "016x")
    assert span.name == "answer"
    assert span.scope_name == "tracescore"
    assert span.service_name == trace.get_tracer_provider().resource.attributes[SERVICE_NAME]
    assert span.end_time_unix_nano == original.end_time
    assert span.attributes == dict(original.attributes)

    (result,) = extract(Trace(span.trace_id, (span,))).interactions
    assert isinstance(result, Interaction)
    assert result.span is span
    assert result.route == "/ask"
    assert result.record == RagRecord(
        id=f"{span.trace_id}:{span.span_id}",
        query="Capital of France?",
        contexts=("Paris is the capital of France.", "France is in Europe."),
        answer="Paris.",
    )


def test_decode_keeps_attribute_types_and_arrays() -> None:
    provider, exporter = local_spans(service="typed-service")
    with provider.get_tracer("lib").start_as_current_span("typed") as span:
        span.set_attribute("s", "text")
        span.set_attribute("i", 7)
        span.set_attribute("f", 0.5)
        span.set_attribute("b", True)
        span.set_attribute("tags", ["a", "b"])
        span.set_attribute("ints", [1, 2, 3])
    [decoded_span] = round_trip(exporter.get_finished_spans())

    assert decoded_span.service_name == "typed-service"
    assert decoded_span.scope_name == "lib"
    assert decoded_span.attributes == {
        "s": "text",
        "i": 7,
        "f": 0.5,
        "b": True,
        "tags": ["a", "b"],
        "ints": [1, 2, 3],
    }
    assert len(decoded_span.trace_id) == 32
    assert len(decoded_span.span_id) == 16
    assert decoded_span.trace_id == decoded_span.trace_id.lower()


def test_decode_returns_every_span_of_the_message() -> None:
    provider, exporter = local_spans()
    tracer = provider.get_tracer("lib")
    with tracer.start_as_current_span("parent"), tracer.start_as_current_span("child"):
        pass
    [(_, value)] = encode_trace_messages(exporter.get_finished_spans())
    spans = decode_message(value)
    assert sorted(s.name for s in spans) == ["child", "parent"]
    assert len({s.trace_id for s in spans}) == 1


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"", id="empty"),
        pytest.param(None, id="none"),
        pytest.param(b"\x00", id="nul"),
        pytest.param(json.dumps({"resourceSpans": []}).encode(), id="json"),
        pytest.param(b"\x8f\x13garbage\xff\xfe not protobuf", id="garbage"),
        pytest.param(b"hello world", id="text"),
    ],
)
def test_non_otlp_messages_raise_not_otlp(value: bytes | None) -> None:
    with pytest.raises(NotOtlp) as excinfo:
        decode_message(value)
    assert isinstance(excinfo.value, ValueError)
    message = str(excinfo.value)
    assert message
    assert any(word in message for word in ("empty", "OTLP")), message


# --- OTLP JSON (the Collector's otlp_json encoding) --------------------------------------------------


def otlp_json(spans: list[ReadableSpan]) -> bytes:
    """OTLP JSON as the Collector writes it: protobuf's JSON mapping, but trace and span ids in hex."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    document = MessageToDict(encode_spans(spans))
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(document).encode()


def test_otlp_json_decodes_to_the_same_spans_as_protobuf() -> None:
    provider, exporter = local_spans(service="json-service")
    tracer = provider.get_tracer("lib")
    with tracer.start_as_current_span("parent") as parent:
        parent.set_attribute("input.value", "q")
        with tracer.start_as_current_span("child") as child:
            child.set_attribute("tags", ["a", "b"])
    finished = list(exporter.get_finished_spans())
    [(_, proto)] = encode_trace_messages(finished)

    from_json = decode_message(otlp_json(finished))

    assert from_json == decode_message(proto)
    by_name = {s.name: s for s in from_json}
    assert by_name["child"].parent_span_id == by_name["parent"].span_id
    assert by_name["parent"].parent_span_id is None
    assert by_name["parent"].trace_id == format(parent.get_span_context().trace_id, "032x")


def test_otlp_json_with_leading_whitespace_is_detected() -> None:
    provider, exporter = local_spans()
    with provider.get_tracer("lib").start_as_current_span("only"):
        pass
    [span] = decode_message(b"\n  " + otlp_json(list(exporter.get_finished_spans())))
    assert span.name == "only"


@pytest.mark.parametrize(
    ("value", "cause"),
    [
        pytest.param(b"{not json", "not OTLP JSON: Expecting property name", id="broken-json"),
        pytest.param(b"{}", "no OTLP spans in the message", id="empty-object"),
        pytest.param(
            b'{"resourceSpans": "nope"}',
            "not OTLP JSON: Failed to parse resourceSpans field",
            id="wrong-shape",
        ),
        pytest.param(
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz","spanId":"00","name":"x"}]}]}]}',
            "id 'zz' is not hex",
            id="non-hex-id",
        ),
        pytest.param(
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0af7","spanId":"b7ad","name":"x"}]}]}]}',
            "invalid trace id '0af7' or span id 'b7ad'",
            id="short-ids",
        ),
        pytest.param(b"{" * 5000 + b"}" * 5000, "not OTLP JSON: Expecting property name", id="deeply-nested"),
        pytest.param(
            b'{"a": "\xff\xfe"}', "not OTLP JSON: 'utf-8' codec can't decode byte 0xff", id="not-utf8"
        ),
    ],
)
def test_bad_otlp_json_raises_not_otlp_with_the_cause(value: bytes, cause: str) -> None:
    with pytest.raises(NotOtlp) as excinfo:
        decode_message(value)
    assert cause in str(excinfo.value)


def test_parent_ids_and_start_times_are_decoded() -> None:
    provider, exporter = local_spans()
    tracer = provider.get_tracer("lib")
    with tracer.start_as_current_span("root"), tracer.start_as_current_span("leaf"):
        pass
    spans = {s.name: s for s in round_trip(exporter.get_finished_spans())}
    assert spans["leaf"].parent_span_id == spans["root"].span_id
    assert spans["root"].parent_span_id is None
    assert 0 < spans["root"].start_time_unix_nano <= spans["leaf"].start_time_unix_nano


def test_a_failed_spans_status_is_decoded_from_protobuf_and_json() -> None:
    """A tool call that raised: its span's status ERROR and message reach the run's tool call."""
    from opentelemetry.trace import Status, StatusCode

    provider, exporter = local_spans()
    tracer = provider.get_tracer("lib")
    with tracer.start_as_current_span("agent"), tracer.start_as_current_span("search_docs") as tool:
        tool.set_status(Status(StatusCode.ERROR, "search backend timed out"))
    finished = list(exporter.get_finished_spans())
    [(_, proto)] = encode_trace_messages(finished)
    for decoded in (decode_message(proto), decode_message(otlp_json(finished))):
        by_name = {s.name: s for s in decoded}
        assert (by_name["search_docs"].status_code, by_name["search_docs"].status_message) == (
            2,
            "search backend timed out",
        )
        assert (by_name["agent"].status_code, by_name["agent"].status_message) == (0, "")


def test_protobuf_that_starts_like_json_is_decoded() -> None:
    """A request whose first resource's spans take 123 bytes starts b"\\n{" (field 1's tag, its length): a
    blank and a brace, as OTLP JSON may start. It is read as the protobuf it is, not dead-lettered."""
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes(range(16)), bytes(range(8))
    span.name = "x" * (123 - 2 - request.resource_spans[0].ByteSize())  # 2: the name's tag and length
    value = request.SerializeToString()
    assert value[:2] == b"\n{"
    [decoded] = decode_message(value)
    assert decoded.name == span.name
    assert decoded.trace_id == bytes(range(16)).hex()


def test_attribute_keys_are_interned_and_the_keys_remembered_stay_bounded() -> None:
    """Keys come out interned (buffered spans share one copy, readers asking with interned keys match by
    identity), looked up in a dict of the keys seen: a stream of ever new keys (built per request, or garbage)
    or long keys must not grow the consumer's memory, and a key is read the same after that dict restarts."""
    from tracescore.consume import _decode

    long_key = "k" * (_decode._MAX_KEY_CHARS + 1)
    keys = [f"attr.{i}" for i in range(_decode._MAX_KEYS + 100)] + [long_key, "attr.0"]
    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id = bytes(range(16)), bytes(range(8))
    for n, key in enumerate(keys):
        kv = span.attributes.add()
        kv.key, kv.value.string_value = key, f"v{n}"
    value = request.SerializeToString()

    for _ in range(2):
        [decoded] = decode_message(value)
        assert (
            decoded.attributes["attr.0"] == f"v{len(keys) - 1}"
            and decoded.attributes[long_key] == f"v{len(keys) - 2}"
        )
        assert len(decoded.attributes) == len(keys) - 1
        for key in decoded.attributes:
            assert key is sys.intern("".join(key)), "a decoded key is the interned copy"
        assert len(_decode._KEYS) <= _decode._MAX_KEYS
        assert long_key not in _decode._KEYS
