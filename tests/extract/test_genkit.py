"""Genkit's own spans (`genkit:*`), recorded from a real Node app through the OTLP exporter Genkit's telemetry
was given and the real Collector (fixtures/genkit, fixtures/genkit_conversation): a flow that retrieves and
generates, a flow whose model calls a tool, and a chat on Genkit's agent API, each read with its question,
documents, answer, route and (a chat) session."""

from __future__ import annotations

import json

from recorded import extracted, read_as_run, read_chat_turn, recordings, replaced, spans_of

from tracescore.extract import Skip, extract
from tracescore.model import Trace

RECORDED = {r.id: r for r in recordings() if r.source in ("genkit", "genkit_conversation")}
INPUT = "genkit:input"


def test_a_flow_that_retrieves_is_read_with_the_retrievers_documents_under_the_flows_name() -> None:
    interaction = read_as_run(RECORDED["genkit/rag_faithful"], "genkit", "answerQuestion")
    assert interaction.route == "answerQuestion"
    assert {s.kind for s in interaction.context_sources} == {"retriever"}
    run = interaction.run
    assert run is not None and (run.retrievals, run.steps, run.tool_calls) == (1, 1, ())
    assert (run.prompt_tokens, run.completion_tokens) == (42, 9)


def test_a_flow_whose_model_calls_a_tool_is_read_with_the_tools_result_and_the_run() -> None:
    recording = RECORDED["genkit/tool_unfaithful"]
    interaction = read_as_run(recording, "genkit", "supportAgent")
    assert interaction.route == "supportAgent"
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    assert run is not None and run.steps == 2
    [call] = run.tool_calls
    assert (call.name, json.loads(call.arguments or "")) == ("searchDocs", {"query": recording.question})
    assert run.tools_offered == ("searchDocs: Search the Aurora product documentation.",)


def test_without_the_flows_input_the_question_is_the_user_message_without_the_docs_genkit_added() -> None:
    recording = RECORDED["genkit/rag_unfaithful"]
    [flow] = [s for s in spans_of(recording) if s.parent_span_id is None]
    spans = [s if s is not flow else replaced([s], INPUT, "{}")[0] for s in spans_of(recording)]
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question


def test_a_chat_turn_is_read_in_the_agents_session_with_the_earlier_turns_results_it_was_resent() -> None:
    interaction, conversation = read_chat_turn(RECORDED["genkit_conversation/resent_faithful_turn3"])
    assert (interaction.convention, interaction.route) == ("genkit", "supportChat")
    assert (interaction.session_id, interaction.user_id) == (conversation["session_id"], None)
    earlier = [s for s in interaction.context_sources if s.kind == "earlier_turn"]
    resent = {conversation["turn"] - item["turn"] for item in conversation["resent"]}
    assert resent == {1, 2} and {s.turns_back for s in earlier} == resent


def test_a_greeting_answered_without_a_lookup_is_skipped_with_nothing_to_judge_against() -> None:
    recording = RECORDED["genkit_conversation/greeting_turn1"]
    spans = spans_of(recording)
    [skip] = extract(Trace(recording.trace_id, tuple(spans))).skips
    assert isinstance(skip, Skip) and (skip.reason, skip.convention) == ("empty_context", "genkit")


def test_without_a_retriever_span_the_documents_are_those_the_model_was_handed() -> None:
    """`ai.generate({docs})` with documents the app found itself (no `ai.retrieve`): the model action's
    input `docs`."""
    recording = RECORDED["genkit/rag_faithful"]
    spans = [s for s in spans_of(recording) if s.attributes.get("genkit:metadata:subtype") != "retriever"]
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"input"}


def test_a_generate_call_outside_any_flow_is_the_interaction() -> None:
    """`ai.generate` called on its own: its `generate` span, read from the model action below it (the question
    without the documents Genkit appended to the user message)."""
    recording = RECORDED["genkit/rag_unfaithful"]
    spans = [s for s in spans_of(recording) if s.attributes.get("genkit:metadata:subtype") != "flow"]
    [interaction] = extracted(spans).interactions
    assert interaction.span.name == "generate" and interaction.convention == "genkit"
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
