"""LiteLLM's own OpenTelemetry callback (`litellm.callbacks = ["otel"]`), recorded from litellm itself
(fixtures/litellm_otel, scenarios/litellm_otel.py): its `litellm_request` spans carry OTel GenAI messages
and are read by the GenAI convention (documents under a label in the prompt: test_prompt_documents.py). A
tool's result arrives as a `tool` message whose result is its text parts (not a `tool_call_response` part),
read as the tool's documents, the call that asked for the tool joined to the one that answered; the run
names the call by the assistant's `tool_calls` and lists the tools offered (`llm.request.functions.N.*`).
With OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (fixtures/litellm_otel_latest) each call is a
`chat <model>` span with the same messages, read alike. With its log events on and content capture `true`
(fixtures/litellm_otel_events) the messages are only in log records (`gen_ai.content.prompt` /
`.completion`, named in an `event_name` attribute): read with them, alike; on the latest conventions
(fixtures/litellm_otel_latest_events) in one `gen_ai.client.inference.operation.details` record a call."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.consume import decode_message
from tracescore.model import ContextSourceKind

# Each source with its log events on (content capture `true`), the source recording the same calls with the
# messages on the spans, and the events each call's span gets from its log records.
WITH_EVENTS = {
    "litellm_otel_events": ("litellm_otel", {"gen_ai.content.prompt", "gen_ai.content.completion"}),
    "litellm_otel_latest_events": ("litellm_otel_latest", {"gen_ai.client.inference.operation.details"}),
}
SOURCES = ("litellm_otel", "litellm_otel_latest", *WITH_EVENTS)
TOOLS = [r for r in recordings() if r.source in SOURCES and r.scenario.startswith("tools_")]
# With its log events, LiteLLM records no tools offered (they are span attributes it leaves out then).
OFFERED = [r for r in TOOLS if r.source not in WITH_EVENTS]
EVENTS = [r for r in recordings() if r.source in WITH_EVENTS]
ON_SPANS = {r.id: r for r in recordings() if r.source in {source for source, _ in WITH_EVENTS.values()}}
MESSAGES = ("gen_ai.input.messages", "gen_ai.output.messages")


@pytest.mark.parametrize("recording", TOOLS, ids=lambda r: r.id)
def test_a_litellm_tool_loop_is_judged_against_the_tool_messages_text_parts(recording: Recording) -> None:
    spans = spans_of(recording)
    [interaction] = extracted(spans).interactions
    record = interaction.record
    assert (record.query, record.answer) == (recording.question, recording.answer)
    # One document per item of the tool's JSON result, from the answering call's `tool` message.
    assert record.contexts == tuple(recording.documents)
    assert {source.kind for source in interaction.context_sources} == {ContextSourceKind.TOOL_MESSAGE}
    # The call that asked for search_docs and the call that answered are one interaction.
    requests = {span.span_id for span in spans if span.name == recording.interaction_span}
    assert len(requests) == 2
    assert requests <= interaction.span_ids
    assert record.run is not None
    assert (record.run.steps, record.run.tool_calls_total) == (2, 1)


@pytest.mark.parametrize("recording", OFFERED, ids=lambda r: r.id)
def test_a_litellm_run_lists_the_tools_offered_under_openllmetrys_flattened_keys(
    recording: Recording,
) -> None:
    # LiteLLM writes the offered tools as `llm.request.functions.N.name` / `.description`, not as
    # `gen_ai.tool.definitions`: the run still says what the model could call.
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.record.run is not None
    assert interaction.record.run.tools_offered == ("search_docs: Search the Aurora product documentation.",)


@pytest.mark.parametrize("recording", TOOLS, ids=lambda r: r.id)
def test_a_litellm_tool_message_is_named_by_the_assistants_call_it_answers(recording: Recording) -> None:
    # The `tool` message carries no name, only `tool_call_id`: the assistant's `tool_calls` name it.
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.record.run is not None
    assert [call.name for call in interaction.record.run.tool_calls] == ["search_docs"]


@pytest.mark.parametrize("recording", EVENTS, ids=lambda r: r.id)
def test_litellm_log_events_are_read_where_its_span_carries_no_message(recording: Recording) -> None:
    """LITELLM_OTEL_INTEGRATION_ENABLE_EVENTS=true with content capture `true`: no message (nor
    gen_ai.operation.name) on the calls' spans, so the trace alone reads nothing; with its log records (their
    event name in an `event_name` attribute) each call is the chat span its events say, read as the same
    calls recorded with the messages on the spans (fixtures/litellm_otel, litellm_otel_latest)."""
    on_spans, names = WITH_EVENTS[recording.source]
    alone = decode_message(recording.payload)
    assert not any(key in span.attributes for span in alone for key in ("gen_ai.operation.name", *MESSAGES))
    assert extracted(alone).interactions == []

    spans = spans_of(recording)
    calls = [span for span in spans if span.scope_name == "litellm"]
    assert calls and all({event.name for event in span.events} == names for span in calls)
    found = extracted(spans)
    written = extracted(decode_message(ON_SPANS[f"{on_spans}/{recording.scenario}"].payload))
    assert [s.reason for s in found.skips] == [s.reason for s in written.skips]
    assert len(found.interactions) == len(written.interactions) == (recording.expected[0] == "interaction")
    for interaction, expected in zip(found.interactions, written.interactions, strict=True):
        record = interaction.record
        assert (record.query, record.answer) == (recording.question, recording.answer)
        assert (record.query, record.answer, record.contexts) == (
            expected.record.query,
            expected.record.answer,
            expected.record.contexts,
        )
        kinds = [source.kind for source in interaction.context_sources]
        assert kinds == [source.kind for source in expected.context_sources]
