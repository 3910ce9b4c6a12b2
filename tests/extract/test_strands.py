"""Strands Agents' spans, recorded from the real library (fixtures/strands, strands_conversation): the agent
call read with its tool's documents one by one; the messages as span events (Strands' default, and with
gen_ai_latest_experimental alone) read as they are on the spans, and a skip that names the setting when they
are on neither or redacted; each chat turn in its session, with the earlier turns' tool results the agent
resent."""

from __future__ import annotations

import dataclasses
import json

import pytest
from recorded import Recording, extracted, read_as_run, read_chat_turn, recordings, replaced, spans_of

from tracescore.extract import GenAIRecognizer
from tracescore.model import ExtractSkip, Interaction, Trace

RECORDED = {r.id: r for r in recordings() if r.source in ("strands", "strands_conversation")}
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]
CONTENT_ON_SPANS = "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental,gen_ai_span_attributes_only"
TOOL_RESULT, OUTPUT_MESSAGES = "gen_ai.tool.call.result", "gen_ai.output.messages"


@pytest.mark.parametrize("scenario", ["faithful", "stream_unfaithful"])
def test_the_agent_call_is_read_with_each_document_its_tool_returned(scenario: str) -> None:
    recording = RECORDED[f"strands/{scenario}"]
    # Strands' content blocks hold the tool's list of texts as JSON: one document each, not one JSON text.
    interaction = read_as_run(recording, "strands", "invoke_agent aurora_support")
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    assert run is not None and run.steps == 2 and [c.name for c in run.tool_calls] == ["search_docs"]
    assert recording.question in str(run.tool_calls[0].arguments)
    assert run.prompt_tokens is not None and run.completion_tokens is not None


def test_a_tool_that_returned_one_text_is_one_document() -> None:
    spans = replaced(
        spans_of(RECORDED["strands/faithful"]), TOOL_RESULT, json.dumps([{"text": "Battery: 14 hours."}])
    )
    [interaction] = extracted(spans).interactions
    assert interaction.record.contexts == ("Battery: 14 hours.",)


def test_the_answer_is_the_agents_text_without_the_newline_strands_ends_it_with() -> None:
    recording = RECORDED["strands/unfaithful"]
    spans = spans_of(recording)
    [agent] = [s for s in spans if s.name == "invoke_agent aurora_support"]
    assert f"{recording.answer}\\n" in agent.attributes[OUTPUT_MESSAGES]  # str(AgentResult), as recorded
    [interaction] = extracted(spans).interactions
    assert interaction.record.answer == recording.answer


@pytest.mark.parametrize(
    "scenario", ["legacy_faithful", "legacy_unfaithful", "events_faithful", "events_unfaithful"]
)
def test_messages_written_as_span_events_read_as_the_same_run_with_them_on_the_spans(scenario: str) -> None:
    # The same app and model replies, the messages written where OTEL_SEMCONV_STABILITY_OPT_IN puts them:
    # Strands' default (one event per message) and gen_ai_latest_experimental alone (operation details).
    on_spans = RECORDED[f"strands/{scenario.split('_', 1)[1]}"]
    [expected] = extracted(spans_of(on_spans)).interactions
    found = extracted(spans_of(RECORDED[f"strands/{scenario}"]))
    [interaction] = found.interactions
    assert found.skips == [] and interaction.convention == "strands"
    assert interaction.record.query == expected.record.query == on_spans.question
    assert interaction.record.contexts == expected.record.contexts == tuple(on_spans.documents)
    assert interaction.record.answer == expected.record.answer == on_spans.answer
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run, expected_run = interaction.run, expected.run
    assert run is not None and expected_run is not None
    assert run.steps == expected_run.steps == 2
    assert [(c.name, c.arguments, c.result, c.ok) for c in run.tool_calls] == [
        (c.name, c.arguments, c.result, c.ok) for c in expected_run.tool_calls
    ]


def test_a_run_whose_span_events_were_dropped_on_the_way_is_skipped_naming_the_setting() -> None:
    # A Collector processor or exporter that drops span events leaves no messages to read.
    spans = [dataclasses.replace(s, events=()) for s in spans_of(RECORDED["strands/legacy_faithful"])]
    found = extracted(spans)
    [skip] = found.skips
    assert (
        found.interactions == []
        and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
        and skip.convention == "strands"
    )
    assert CONTENT_ON_SPANS in skip.detail and "span events" in skip.detail


def test_a_run_whose_spans_lost_events_past_the_limits_is_scored_and_says_so() -> None:
    spans = [
        dataclasses.replace(s, events_dropped=7) if s.name == "chat" else s
        for s in spans_of(RECORDED["strands/legacy_faithful"])
    ]
    found = extracted(spans)
    [interaction] = found.interactions
    [skip] = found.skips
    assert skip.scored and skip.reason == ExtractSkip.SPAN_EVENTS_DROPPED and skip.span is not None
    assert skip.span.span_id == interaction.span.span_id
    assert "'chat'" in skip.detail and "lost 7" in skip.detail and "128 events" in skip.detail


def test_events_lost_where_the_messages_are_attributes_cost_nothing_and_are_not_said() -> None:
    # Attribute mode: a chat span that lost other events (an exception's, say) lost no message.
    spans = [
        dataclasses.replace(s, events_dropped=7) if s.name == "chat" else s
        for s in spans_of(RECORDED["strands/faithful"])
    ]
    found = extracted(spans)
    assert len(found.interactions) == 1 and found.skips == []


def test_the_attributes_a_span_carries_win_over_its_events() -> None:
    spans = spans_of(RECORDED["strands/legacy_faithful"])
    [agent] = [s for s in spans if s.name == "invoke_agent aurora_support"]
    answer = json.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "Written on the span."}]}]
    )
    spans = [
        dataclasses.replace(s, attributes={**s.attributes, OUTPUT_MESSAGES: answer}) if s is agent else s
        for s in spans
    ]
    [interaction] = extracted(spans).interactions
    assert interaction.record.answer == "Written on the span."


@pytest.mark.parametrize("scenario", ["redacted_faithful", "redacted_legacy_faithful"])
def test_redacted_texts_are_skipped_naming_the_keys_to_leave_unredacted(scenario: str) -> None:
    # On the spans, or in Strands' default span events: `[REDACTED]` either way.
    found = extracted(spans_of(RECORDED[f"strands/{scenario}"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert "gen_ai_unredacted_attributes=" in skip.detail
    assert all(key in skip.detail for key in ("gen_ai.input.messages", OUTPUT_MESSAGES, TOOL_RESULT))


def test_a_redacted_tool_result_is_never_a_document_the_models_input_still_holds_it() -> None:
    recording = RECORDED["strands/faithful"]
    [interaction] = extracted(replaced(spans_of(recording), TOOL_RESULT, "[REDACTED]")).interactions
    # Redaction left the model's input messages (gen_ai_unredacted_attributes=gen_ai.input.messages).
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"tool_message"}


def test_the_agent_is_scored_once_as_strands_not_again_as_otel_genai() -> None:
    spans = spans_of(RECORDED["strands/faithful"])
    assert [i.convention for i in extracted(spans).interactions] == ["strands"]
    # Alone, the GenAI reader takes the content blocks for one document: what the Strands reader is for.
    [generic] = GenAIRecognizer().recognize(Trace(spans[0].trace_id, tuple(spans)))
    assert isinstance(generic, Interaction) and len(generic.record.contexts) == 1


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_chat_turn_is_read_in_its_session_with_what_the_agent_resent(recording: Recording) -> None:
    interaction, conversation = read_chat_turn(recording)
    own = [s for s in interaction.context_sources if s.kind == "tool"]
    earlier = [s for s in interaction.context_sources if s.kind == "earlier_turn"]
    assert len(own) == len(conversation["retrieved"])
    resent = [text for item in conversation["resent"] for text in item["documents"]]
    assert len(earlier) == len(resent)  # each earlier result's texts one by one (history "resent")
    assert sorted(interaction.record.contexts) == sorted([*conversation["retrieved"], *resent])
