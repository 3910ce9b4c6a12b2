"""Messages written elsewhere than the span attributes read as those attributes by the OTel GenAI reader, for
any producer: the latest conventions' `gen_ai.client.inference.operation.details` span events, and Pydantic
AI's first span format (`InstrumentationSettings(version=1)`: GenAI events in a chat span's `events`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import trace_builder as tb
from recorded import FIXTURES, Recording, extracted, recordings, spans_of

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import DecodedSpan, ExtractSkip, Interaction, SpanEvent

SOURCES = ("strands", "pydantic_ai_v1", "otel_genai", "openai_v2")
RECORDED = {r.id: r for r in recordings() if r.source in SOURCES}
OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
INPUT, OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"
STRANDS_MARKERS = ("gen_ai.provider.name", "gen_ai.system")


def _as_another_producer(spans: list[DecodedSpan]) -> list[DecodedSpan]:
    """Strands' spans as a producer tracescore has no reader of its own for would write them."""
    return [
        dataclasses.replace(
            s,
            attributes={**s.attributes, **{k: "acme-agents" for k in STRANDS_MARKERS if k in s.attributes}},
            scope_name="acme.agents",
        )
        for s in spans
    ]


def _one(spans: list[DecodedSpan]) -> Interaction:
    found = extracted(spans)
    [interaction] = found.interactions
    assert found.skips == []
    return interaction


@pytest.mark.parametrize("scenario", ["faithful", "unfaithful"])
def test_operation_details_events_of_any_producer_read_as_the_attributes_they_carry(scenario: str) -> None:
    # Strands writes them with gen_ai_latest_experimental alone; here no Strands reader claims its spans.
    on_spans = RECORDED[f"strands/{scenario}"]
    expected = _one(_as_another_producer(spans_of(on_spans)))
    spans = _as_another_producer(spans_of(RECORDED[f"strands/events_{scenario}"]))
    assert not any(INPUT in s.attributes or OUTPUT in s.attributes for s in spans)  # only in events
    interaction = _one(spans)
    assert interaction.convention == expected.convention == "genai"
    assert interaction.span.name == "invoke_agent aurora_support"
    assert interaction.record.query == expected.record.query == on_spans.question
    assert interaction.record.answer == expected.record.answer
    assert interaction.record.contexts == expected.record.contexts


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _details(**attributes: Any) -> SpanEvent:
    return SpanEvent(OPERATION_DETAILS, attributes)


def _chat_with_events(*events: SpanEvent, **own: Any) -> list[DecodedSpan]:
    """An OpenAI instrumentation's chat span (content capture EVENT_ONLY) beside the app's retrieval."""
    root = tb.span("rag", {"gen_ai.operation.name": "invoke_workflow"})
    retrieval = tb.span(
        "retrieval docs",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": json.dumps([{"content": "X2: 14 h."}]),
        },
        parent=root.span_id,
        start=1,
    )
    chat = tb.span(
        "chat gpt-4o-mini",
        {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", **own},
        parent=root.span_id,
        scope="opentelemetry.instrumentation.openai_v2",
        start=2,
    )
    return [root, retrieval, dataclasses.replace(chat, events=events)]


def test_a_chat_whose_messages_are_operation_details_events_is_read_from_them() -> None:
    spans = _chat_with_events(
        _details(**{INPUT: _messages("user", "How long does the X2 last?")}),
        _details(**{OUTPUT: _messages("assistant", "A first draft.")}),
        _details(**{OUTPUT: _messages("assistant", "14 hours.")}),  # a later event replaces an earlier value
    )
    interaction = _one(spans)
    assert interaction.convention == "genai"
    assert (interaction.record.query, interaction.record.answer) == (
        "How long does the X2 last?",
        "14 hours.",
    )
    assert interaction.record.contexts == ("X2: 14 h.",)


def test_what_the_span_carries_itself_wins_over_its_events() -> None:
    spans = _chat_with_events(
        _details(
            **{INPUT: _messages("user", "Asked in the event?"), OUTPUT: _messages("assistant", "Event.")}
        ),
        **{OUTPUT: _messages("assistant", "Written on the span.")},
    )
    interaction = _one(spans)
    assert (interaction.record.query, interaction.record.answer) == (
        "Asked in the event?",
        "Written on the span.",
    )


def test_other_span_events_are_not_read_as_messages() -> None:
    spans = _chat_with_events(SpanEvent("exception", {INPUT: _messages("user", "Not a message.")}))
    assert extract(tb.trace(*spans)).interactions == []


def _logged(name: str, body: dict[str, Any]) -> SpanEvent:
    """A log record's event as the consumer adds it to its span: its body under `log.record.body`."""
    return SpanEvent(name, {"event_name": name, "log.record.body": body})


@pytest.mark.parametrize(
    ("events", "read"),
    [
        (
            (
                _logged("gen_ai.content.prompt", {"role": "user", "content": "How long does the X2 last?"}),
                _logged("gen_ai.content.completion", {"index": 0, "message": {"content": "14 hours."}}),
            ),
            True,
        ),
        ((_logged("gen_ai.evaluation.result", {"score": 1}),), False),
        ((SpanEvent("gen_ai.choice", {"message": {"content": "14 hours."}}),), False),  # not a log record's
    ],
)
def test_a_span_with_no_operation_is_a_chat_when_its_log_records_are_a_model_calls_messages(
    events: tuple[SpanEvent, ...], read: bool
) -> None:
    """LiteLLM with its log events on and content capture `true` writes no gen_ai.operation.name on the call's
    span: its logged messages say it is a model call, and nothing else does."""
    root = tb.span("rag", {"gen_ai.operation.name": "invoke_workflow"})
    retrieval = tb.span(
        "retrieval docs",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": json.dumps([{"content": "X2: 14 h."}]),
        },
        parent=root.span_id,
        start=1,
    )
    call = tb.span(
        "litellm_request", {"gen_ai.system": "openai"}, parent=root.span_id, scope="litellm", start=2
    )
    found = extract(tb.trace(root, retrieval, dataclasses.replace(call, events=events)))
    if read:
        [interaction] = found.interactions
        assert (interaction.record.query, interaction.record.answer) == (
            "How long does the X2 last?",
            "14 hours.",
        )
    else:
        assert found.interactions == []


@pytest.mark.parametrize("scenario", ["faithful", "unfaithful"])
def test_pydantic_ai_version_1_reads_as_its_default_format(scenario: str) -> None:
    # The same app and model replies on Pydantic AI 1.x, traced in its default format and with version=1.
    v1 = RECORDED[f"pydantic_ai_v1/v1_{scenario}"]
    assert not any(INPUT in s.attributes for s in spans_of(v1))  # only in `events`
    _assert_read_as_the_default_format(v1, spans_of(v1), scenario)


@pytest.mark.parametrize("scenario", ["faithful", "unfaithful"])
def test_pydantic_ai_version_1_log_records_read_with_their_chat_spans_as_its_default_format(
    scenario: str,
) -> None:
    """Version 1 with event_mode='logs': the same events as log records, each with its chat span's trace and
    span id, the message in its body. The trace alone has no message on a chat span (the question is
    missing); read with its log records (as the consumer reads them from the spans topic), as the default
    format."""
    recording = RECORDED[f"pydantic_ai_v1/v1_logs_{scenario}"]
    alone = decode_message(recording.payload)
    chats = [s for s in alone if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chats and not any(INPUT in s.attributes or "events" in s.attributes or s.events for s in chats)
    [interaction] = extracted(alone).interactions
    assert interaction.record.query is None and interaction.question_missing is not None

    spans = spans_of(recording)
    for chat in (s for s in spans if s.span_id in {c.span_id for c in chats}):
        assert [e.name for e in chat.events][:2] == ["gen_ai.system.message", "gen_ai.user.message"]
        assert chat.events[-1].name == "gen_ai.choice"
    _assert_read_as_the_default_format(recording, spans, scenario)


def _assert_read_as_the_default_format(v1: Recording, spans: list[DecodedSpan], scenario: str) -> None:
    default = RECORDED[f"pydantic_ai_v1/{scenario}"]
    expected, interaction = _one(spans_of(default)), _one(spans)
    assert interaction.convention == expected.convention == "genai"
    assert interaction.record.query == expected.record.query == v1.question
    assert interaction.record.answer == expected.record.answer == v1.answer
    assert interaction.record.contexts == expected.record.contexts == tuple(v1.documents)
    assert interaction.question_missing is None
    run, expected_run = interaction.run, expected.run
    assert run is not None and expected_run is not None and run.steps == expected_run.steps == 2
    assert [(c.name, c.arguments, c.result) for c in run.tool_calls] == [
        (c.name, c.arguments, c.result) for c in expected_run.tool_calls
    ]


def _v1(recording: Recording, events: Any) -> list[DecodedSpan]:
    """The recording with each chat span's `events` replaced."""
    return [
        dataclasses.replace(s, attributes={**s.attributes, "events": events})
        if "events" in s.attributes
        else s
        for s in spans_of(recording)
    ]


@pytest.mark.parametrize(
    "events",
    [
        "not json",
        json.dumps({"a": 1}),
        json.dumps([1, 2]),
        json.dumps([{"x": 1}]),
        # Names and roles of no event's type (unhashable: never looked up as one).
        json.dumps([{"event.name": ["gen_ai.choice"]}, {"event.name": "gen_ai.content.prompt", "role": {}}]),
    ],
)
def test_an_events_attribute_of_another_shape_is_not_read_as_messages(events: str) -> None:
    found = extracted(_v1(RECORDED["pydantic_ai_v1/v1_faithful"], events))
    [interaction] = found.interactions
    assert interaction.record.query is None and interaction.question_missing is not None


@pytest.mark.parametrize("scenario", ["event_only_faithful", "event_only_unfaithful"])
def test_the_opentelemetry_genai_util_writes_its_operation_details_event_as_a_log_record_read_with_its_span(
    scenario: str,
) -> None:
    """What opentelemetry-util-genai (which the OTel GenAI instrumentations build on) records with content
    capture EVENT_ONLY: the event went to the logger provider (the manifest counts it), the trace holds no
    span event and no text, so the trace alone is skipped as content not captured, naming the setting that
    keeps it on the spans; read with its log records (as the consumer reads them from the spans topic), the
    chat span carries the event and the interaction is read from it."""
    recording = RECORDED[f"otel_genai/{scenario}"]
    manifest = json.loads((FIXTURES / "otel_genai" / "manifest.json").read_text())
    assert f"{OPERATION_DETAILS} x1" in manifest["scenarios"][f"{scenario}.binpb"]["notes"]
    alone = decode_message(recording.payload)
    assert all(s.events == () for s in alone)
    content = ("gen_ai.input", "gen_ai.output", "gen_ai.retrieval.doc")
    assert not any(key.startswith(content) for s in alone for key in s.attributes)
    found = extracted(alone)
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY or SPAN_AND_EVENT" in skip.detail

    spans = spans_of(recording)
    [chat] = [s for s in spans if s.events]
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert [e.name for e in chat.events] == [OPERATION_DETAILS]
    [interaction] = extracted(spans).interactions
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)


@pytest.mark.parametrize("scenario", ["tools_faithful", "tools_unfaithful", "system_faithful"])
def test_openai_v2_on_its_v1_30_conventions_writes_v1_events_as_log_records_read_with_their_chat_span(
    scenario: str,
) -> None:
    """opentelemetry-instrumentation-openai-v2 on its default conventions, content capture `true`: each
    message a v1.30 GenAI event sent as a log record (its `event_name`, the message in the body), none on the
    chat spans. The trace alone is skipped as content not captured, the skip naming that setting's log
    records; read with its log records, the chat spans carry the events and the interaction is read."""
    recording = RECORDED[f"openai_v2/{scenario}"]
    alone = decode_message(recording.payload)
    assert not any(s.events or INPUT in s.attributes or OUTPUT in s.attributes for s in alone)
    found = extracted(alone)
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert "=true on their default v1.30 conventions (opentelemetry-instrumentation-openai-v2)" in skip.detail

    spans = spans_of(recording)
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chats and all(c.events[-1].name == "gen_ai.choice" for c in chats)
    [interaction] = extracted(spans).interactions
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert "\n\n".join(interaction.record.contexts) == "\n\n".join(recording.documents)
