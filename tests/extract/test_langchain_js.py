"""LangChain.js under OpenInference's LangChain instrumentation
(`@arizeai/openinference-instrumentation-langchain`), recorded from a real Node app through the OTLP exporter
and the real Collector (fixtures/langchain_js, fixtures/langchain_js_conversation): a retrieval chain, a
LangGraph ReAct agent whose model calls a search tool, and a chat on that agent whose session and user are
OpenInference's context, each read with its question, documents, answer, route, run and (a chat) session and
user."""

from __future__ import annotations

from recorded import read_as_run, read_chat_turn, recordings, spans_of

from tracescore.extract import Skip, extract
from tracescore.model import ExtractSkip, Trace

RECORDED = {r.id: r for r in recordings() if r.source in ("langchain_js", "langchain_js_conversation")}


def test_a_retrieval_chain_is_read_with_the_retrievers_documents_under_the_chains_name() -> None:
    interaction = read_as_run(RECORDED["langchain_js/rag_unfaithful"], "openinference", "answerQuestion")
    assert interaction.route == "answerQuestion"
    assert {s.kind for s in interaction.context_sources} == {"retriever"}
    run = interaction.run
    assert run is not None and (run.retrievals, run.steps, run.tool_calls) == (1, 1, ())
    assert (run.prompt_tokens, run.completion_tokens) == (42, 9)


def test_an_agents_tool_result_is_the_tool_messages_content_not_its_serialised_envelope() -> None:
    """LangChain.js serialises the ToolMessage a tool returns (`{"output": {"lc": 1, "id": [...,
    "ToolMessage"], "kwargs": {"content": ...}}}`, with no `type` in its kwargs): the document is the text the
    model was given."""
    recording = RECORDED["langchain_js/agent_faithful"]
    interaction = read_as_run(recording, "openinference", "supportAgent")
    assert interaction.route == "supportAgent"
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    assert run is not None and run.steps == 2
    [call] = run.tool_calls
    assert (call.name, call.result, call.ok) == ("search_docs", recording.documents[0], True)
    assert run.tools_offered == ("search_docs: Search the Aurora product documentation.",)
    assert (run.prompt_tokens, run.completion_tokens) == (84, 18)


def test_a_chat_turn_keeps_its_context_session_and_user_and_the_earlier_turns_tool_messages() -> None:
    interaction, conversation = read_chat_turn(RECORDED["langchain_js_conversation/resent_faithful_turn3"])
    assert (interaction.convention, interaction.route) == ("openinference", "supportChat")
    assert (interaction.session_id, interaction.user_id) == (
        conversation["session_id"],
        conversation["user_id"],
    )
    by_kind = {
        text: source.kind
        for text, source in zip(interaction.record.contexts, interaction.context_sources, strict=True)
    }
    assert [by_kind[text] for text in conversation["retrieved"]] == ["tool"]
    resent = [text for item in conversation["resent"] for text in item["documents"]]
    assert [by_kind[text] for text in resent] == ["earlier_turn", "earlier_turn"]


def test_a_greeting_answered_without_a_lookup_is_skipped_with_nothing_to_judge_against() -> None:
    recording = RECORDED["langchain_js_conversation/greeting_turn1"]
    [skip] = extract(Trace(recording.trace_id, tuple(spans_of(recording)))).skips
    assert isinstance(skip, Skip) and (skip.reason, skip.convention) == (
        ExtractSkip.EMPTY_CONTEXT,
        "openinference",
    )
