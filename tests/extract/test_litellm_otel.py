"""LiteLLM's own OpenTelemetry callback (`litellm.callbacks = ["otel"]`), recorded from litellm itself
(fixtures/litellm_otel, scenarios/litellm_otel.py): its `litellm_request` spans carry OTel GenAI messages
and are read by the GenAI convention. Documents under a label in the prompt are read from it; a tool's
result arrives as a `tool` message whose result is its text parts (not a `tool_call_response` part), read
as the tool's documents, the call that asked for the tool joined to the one that answered."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.model import ContextSourceKind

LITELLM = {r.scenario: r for r in recordings() if r.source == "litellm_otel"}
LABELLED = [r for name, r in LITELLM.items() if name.startswith(("user_", "system_"))]
TOOLS = [r for name, r in LITELLM.items() if name.startswith("tools_")]
REQUEST_SPAN = "litellm_request"


@pytest.mark.parametrize("recording", LABELLED, ids=lambda r: r.id)
def test_a_litellm_completion_with_documents_under_a_label_is_read_from_its_prompt(
    recording: Recording,
) -> None:
    [interaction] = extracted(spans_of(recording)).interactions
    record = interaction.record
    assert (interaction.convention, interaction.span.name) == ("genai", REQUEST_SPAN)
    assert (record.query, record.answer) == (recording.question, recording.answer)
    assert record.contexts == ("\n\n".join(recording.documents),)
    in_user_message = recording.scenario.startswith("user")
    kind = ContextSourceKind.PROMPT if in_user_message else ContextSourceKind.INSTRUCTIONS
    assert [source.kind for source in interaction.context_sources] == [kind]


def test_documents_pasted_into_a_litellm_prompt_with_no_label_are_an_explained_skip() -> None:
    found = extracted(spans_of(LITELLM["unlabelled"]))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == "empty_context"
    assert "docs/integrations/index.md#documents-in-the-prompt" in skip.detail


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
    requests = {span.span_id for span in spans if span.name == REQUEST_SPAN}
    assert len(requests) == 2
    assert requests <= interaction.span_ids
    assert record.run is not None
    assert (record.run.steps, record.run.tool_calls_total) == (2, 1)
