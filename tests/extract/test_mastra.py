"""Mastra's spans, recorded from a real Node app through its OtelExporter and the real Collector
(fixtures/mastra): the agent call read with the question it was called with (its model calls record no
input), its tool's documents and its answer, in its memory's thread and resource."""

from __future__ import annotations

import json

import pytest
from recorded import extracted, recordings, replaced, spans_of

from tracescore.extract import GenAIRecognizer
from tracescore.model import Interaction, Trace

RECORDED = {r.id: r for r in recordings() if r.source == "mastra"}
AGENT_INPUT = "mastra.agent_run.input"


@pytest.mark.parametrize("scenario", ["generate_faithful", "stream_unfaithful"])
def test_the_agent_call_is_read_with_its_question_documents_and_answer(scenario: str) -> None:
    recording = RECORDED[f"mastra/{scenario}"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.convention == "mastra" and interaction.span.name == "invoke_agent aurora_support"
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert interaction.question_missing is None
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    assert run is not None and run.steps == 2 and [c.name for c in run.tool_calls] == ["search_docs"]


def test_an_agent_called_with_messages_asks_its_last_user_message() -> None:
    recording = RECORDED["mastra/generate_faithful"]
    messages = [
        {"role": "user", "content": "Hi!"},
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": recording.question},
    ]
    spans = replaced(spans_of(recording), AGENT_INPUT, json.dumps(messages))
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question


def test_the_conversation_is_the_memorys_thread_and_its_user_the_resource() -> None:
    [interaction] = extracted(spans_of(RECORDED["mastra/stream_faithful"])).interactions
    assert (interaction.session_id, interaction.user_id) == ("thread-stream_faithful", "user-42")


def test_the_agent_is_scored_once_as_mastra_not_again_as_otel_genai() -> None:
    spans = spans_of(RECORDED["mastra/generate_unfaithful"])
    assert [i.convention for i in extracted(spans).interactions] == ["mastra"]
    # Alone, the GenAI reader finds no question: Mastra's model calls record no input messages.
    [generic] = GenAIRecognizer().recognize(Trace(spans[0].trace_id, tuple(spans)))
    assert isinstance(generic, Interaction) and generic.record.query is None
