"""LiteLLM's own OpenTelemetry callback (`litellm.callbacks = ["otel"]`), recorded from litellm itself
(fixtures/litellm_otel, scenarios/litellm_otel.py): its `litellm_request` spans carry OTel GenAI messages
and are read by the GenAI convention (documents under a label in the prompt: test_prompt_documents.py). A
tool's result arrives as a `tool` message whose result is its text parts (not a `tool_call_response` part),
read as the tool's documents, the call that asked for the tool joined to the one that answered; the run
names the call by the assistant's `tool_calls` and lists the tools offered (`llm.request.functions.N.*`).
With OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental (fixtures/litellm_otel_latest) each call is a
`chat <model>` span with the same messages, read alike."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.model import ContextSourceKind

SOURCES = ("litellm_otel", "litellm_otel_latest")
TOOLS = [r for r in recordings() if r.source in SOURCES and r.scenario.startswith("tools_")]


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


@pytest.mark.parametrize("recording", TOOLS, ids=lambda r: r.id)
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
