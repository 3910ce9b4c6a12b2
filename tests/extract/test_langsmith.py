"""LangSmith's OpenTelemetry export (LANGSMITH_OTEL_ENABLED, LANGSMITH_OTEL_ONLY), recorded from langsmith
itself (fixtures/langsmith, scenarios/langsmith_otel.py): each run of a LangChain/LangGraph app is a span with
`langsmith.span.kind`, its inputs and outputs as JSON in `gen_ai.prompt` / `gen_ai.completion`. Its chat model
spans carry `gen_ai.operation.name=chat` without GenAI messages: read by its own keys, never skipped as GenAI
spans whose content capture was off."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.model import ContextSourceKind, ExtractSkip

LANGSMITH = [r for r in recordings() if r.source == "langsmith"]
RAG = [r for r in LANGSMITH if r.scenario.startswith(("rag_", "stream_rag_"))]
AGENT = [r for r in LANGSMITH if r.scenario.startswith("agent_")]
THREAD = [r for r in LANGSMITH if r.scenario == "turn1" or r.scenario.startswith("followup_")]


@pytest.mark.parametrize("recording", RAG, ids=lambda r: r.id)
def test_a_langsmith_rag_chain_is_judged_against_its_retrievers_documents(recording: Recording) -> None:
    [interaction] = extracted(spans_of(recording)).interactions
    record = interaction.record
    assert interaction.convention == "langsmith"
    assert (record.query, record.answer) == (recording.question, recording.answer)
    # The retriever run's Documents, one each, not the prompt's `Context:` text they were joined into.
    assert record.contexts == recording.documents
    assert {source.kind for source in interaction.context_sources} == {ContextSourceKind.RETRIEVER}
    # The chain's run name (config={"run_name": ...}) is its route.
    assert interaction.route == recording.interaction_span == "aurora_support"


@pytest.mark.parametrize("recording", AGENT, ids=lambda r: r.id)
def test_a_langgraph_agent_under_langsmith_is_judged_against_its_tool_result(recording: Recording) -> None:
    spans = spans_of(recording)
    [interaction] = extracted(spans).interactions
    record = interaction.record
    assert (record.query, record.answer) == (recording.question, recording.answer)
    assert record.contexts == recording.documents
    assert {source.kind for source in interaction.context_sources} == {ContextSourceKind.TOOL}
    # Both model calls (the one that asked for search_docs, the one that answered) and the tool are its run.
    run = record.run
    assert run is not None
    assert (run.steps, [call.name for call in run.tool_calls]) == (2, ["search_docs"])
    assert run.tools_offered == ("search_docs: Search the Aurora product documentation.",)
    assert (run.prompt_tokens, run.completion_tokens) == (84, 18)
    assert interaction.span.name == recording.interaction_span


@pytest.mark.parametrize("recording", THREAD, ids=lambda r: r.id)
def test_a_langgraph_thread_is_the_conversation_and_the_metadata_user_its_user(recording: Recording) -> None:
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.record.query == recording.question
    assert interaction.record.answer == recording.answer
    # configurable.thread_id, copied into the run's metadata; user_id from the run's metadata.
    thread = "thread-followup_faithful" if recording.scenario == "turn1" else f"thread-{recording.scenario}"
    assert (interaction.session_id, interaction.user_id) == (thread, "user-ada")


@pytest.mark.parametrize("recording", [r for r in THREAD if r.scenario != "turn1"], ids=lambda r: r.id)
def test_a_follow_up_without_a_tool_call_is_judged_against_turn_1s_result(recording: Recording) -> None:
    # The checkpointer resent turn 1's ToolMessage in the model call's LangChain-serialised messages.
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.record.contexts == recording.documents
    assert {source.kind for source in interaction.context_sources} == {ContextSourceKind.EARLIER_TURN}


@pytest.mark.parametrize(
    "recording", [r for r in LANGSMITH if r.scenario.startswith("hidden_")], ids=lambda r: r.id
)
def test_runs_whose_outputs_langsmith_hid_are_skipped_naming_the_setting(recording: Recording) -> None:
    # Client(hide_inputs=True, hide_outputs=True): every span's gen_ai.prompt / gen_ai.completion is `{}`.
    found = extracted(spans_of(recording))
    assert found.interactions == []
    [skip] = found.skips
    assert (skip.reason, skip.convention) == (ExtractSkip.CONTENT_NOT_CAPTURED, "langsmith")
    assert "LANGSMITH_HIDE_OUTPUTS" in skip.detail
