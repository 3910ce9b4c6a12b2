"""Sessions and turns: the conversation id on the record, each turn judged against its own documents, and
the record saying where each judged document came from."""

from __future__ import annotations

import json

import pytest
from recorded import Recording, recordings
from test_agents import ANSWER, DOC, DOC2, KIND, QUESTION, _agent, _oi_llm
from trace_builder import span, trace

from tracescore import semconv
from tracescore.consume import decode_message
from tracescore.emit import evaluation_record
from tracescore.extract import extract
from tracescore.model import ExtractSkip, MetricResult, Trace


def test_session_id_is_on_the_interaction_and_a_turn_uses_its_own_documents() -> None:
    request = span("POST /chat", {semconv.SESSION_ID: "s-42", semconv.USER_ID: "u-7"})
    agent, tool = _agent(lambda p: span("search", {KIND: "TOOL", "output.value": DOC2}, parent=p, start=1))
    agent = span(
        agent.name,
        dict(agent.attributes),
        sid=agent.span_id,
        parent=request.span_id,
        start=agent.start_time_unix_nano,
    )
    [rag] = extract(trace(request, agent, tool)).interactions
    assert rag.session_id == "s-42" and rag.record.contexts == (DOC2,)
    assert rag.user_id == "u-7", "the user the request span names"
    genai = span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c-7"})
    chat = span(
        "chat m",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
        },
        parent=genai.span_id,
        start=2,
    )
    # The tool ran before the chat that wrote the answer (one started after it would carry no evidence).
    tool2 = span("execute_tool s", {"gen_ai.tool.call.result": DOC}, parent=genai.span_id, start=1)
    [rag2] = extract(trace(genai, chat, tool2)).interactions
    assert rag2.session_id == "c-7" and rag2.user_id is None


def test_the_record_lists_where_each_judged_document_came_from() -> None:
    request = span("POST /chat", {semconv.SESSION_ID: "s-42"})
    agent = span(
        "agent", {KIND: "AGENT", "input.value": QUESTION, "output.value": ANSWER}, parent=request.span_id
    )
    retriever = span(
        "r", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=agent.span_id, start=1
    )
    tool = span("battery_hours", {KIND: "TOOL", "output.value": "14"}, parent=agent.span_id, start=2)
    [rag] = extract(trace(request, agent, retriever, tool)).interactions
    result = MetricResult(metric="faithfulness", score=1.0, judge="offline", details={"claims": 1})
    record = evaluation_record(rag, result, None)
    assert record.session_id == "s-42"
    assert record.details["claims"] == 1
    assert record.details["context_sources"] == [
        {"span_id": retriever.span_id, "kind": "retriever"},
        {"span_id": tool.span_id, "kind": "tool"},
    ]
    [note] = record.details["context_notes"]
    assert tool.span_id in note


def test_a_second_turn_is_judged_against_its_own_documents_never_the_first_answer() -> None:
    """RunnableWithMessageHistory / LangGraph memory: turn 2's input carries turn 1's question and answer."""
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": ANSWER}]
    turn2 = span(
        "RunnableWithMessageHistory",
        {
            KIND: "CHAIN",
            semconv.SESSION_ID: "s-1",
            "input.value": json.dumps({"input": "And how long does it take to charge?", "history": history}),
            "output.value": "Two hours.",
        },
    )
    retriever = span(
        "r",
        {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC2},
        parent=turn2.span_id,
        start=1,
    )
    llm = _oi_llm(
        turn2.span_id,
        2,
        messages=[
            ("user", QUESTION),
            ("assistant", ANSWER),
            ("user", "And how long does it take to charge?"),
        ],
        out="Two hours.",
    )
    [rag] = extract(trace(turn2, retriever, llm)).interactions
    assert rag.record.query == "And how long does it take to charge?"
    assert rag.record.contexts == (DOC2,) and ANSWER not in rag.record.contexts
    assert rag.session_id == "s-1"


# The apps recorded in fixtures/ tag their turns with a user: the Langfuse SDKs (`propagate_attributes` /
# `update_current_trace(user_id=...)`, Python and JS) write `user.id`, the Vercel AI SDK app passes
# `experimental_telemetry.metadata.userId` (fixtures/scenarios/langfuse_sdk.py, vercel_ai/app.mjs).
TAGGED = [
    r
    for r in recordings()
    if r.expected[0] == "interaction"
    and (r.scenario.startswith("session_") or r.source in ("langfuse_js", "vercel_ai"))
]


def _tagged_user(recording: Recording) -> str:
    if recording.scenario.startswith("session_"):  # session_s1_turn2: user-s1
        return "user-" + recording.scenario.split("_")[1]
    return "user-42"


def test_every_user_tagging_library_is_recorded() -> None:
    assert {r.source for r in TAGGED} == {"langfuse", "langfuse_v3", "langfuse_js", "vercel_ai"}


@pytest.mark.parametrize("recording", TAGGED, ids=lambda r: r.id)
def test_a_recorded_turn_keeps_the_user_who_asked_on_its_record(recording: Recording) -> None:
    spans = decode_message(recording.payload)
    [rag] = extract(Trace(recording.trace_id, tuple(spans))).interactions
    assert rag.user_id == _tagged_user(recording)
    result = MetricResult(metric="faithfulness", score=1.0, judge="offline")
    assert evaluation_record(rag, result, None).user_id == rag.user_id


# Every recorded chat of the conversation scenarios (scenarios/_multiturn.py), on every producer: each turn
# keeps the session and user its app set, so the conversations service groups that chat's turns, no other's.
CHAT_TURNS = [r for r in recordings() if r.expected[0] == "interaction" and r.conversation]
# Spring AI's observations (1.1, 2.0) name the chat memory's conversation, never a user (its app sets none);
# Genkit's agent records its session's id, and has no user to record.
NO_USER = {"spring_ai_conversation", "spring_ai2_conversation", "genkit_conversation"}
# Chats nothing names: Agent Framework's Responses API chats whose app sets no ids (the response id on its
# spans is no session), and Semantic Kernel's thread as its docs run it (its spans name no conversation).
NO_SESSION = ("agent_framework_responses/service_", "semantic_kernel_conversation/unnamed_")
# Chats whose app names only the user (OpenInference's `using_user`, `using_attributes`): the conversation is
# inferred from the history (LangChain's trim_messages window, LlamaIndex's ChatMemoryBuffer token limit).
USER_ONLY = ("langchain_window_conversation/", "llamaindex_window_conversation/")


@pytest.mark.parametrize("recording", CHAT_TURNS, ids=lambda r: r.id)
def test_a_recorded_chat_turn_keeps_the_session_and_user_its_app_set(recording: Recording) -> None:
    [rag] = extract(Trace(recording.trace_id, tuple(decode_message(recording.payload)))).interactions
    assert recording.conversation is not None
    if recording.id.startswith(NO_SESSION):
        assert (rag.session_id, rag.user_id) == (None, None)
        return
    user = None if recording.source in NO_USER else recording.conversation["user_id"]
    session = None if recording.id.startswith(USER_ONLY) else recording.conversation["session_id"]
    assert (rag.session_id, rag.user_id) == (session, user)


def test_an_id_a_redacting_exporter_replaced_is_no_session() -> None:
    """Logfire's default scrubbing replaces every attribute named like `session` with one placeholder: read
    as the session, it would make every user's chats of a service one conversation (and ground one user's
    answer in another's documents). The placeholder is passed over, for the next key or span naming one."""
    scrubbed = {
        semconv.SESSION_ID: "[Scrubbed due to 'session']",
        semconv.USER_ID: "u-7",
        semconv.LOGFIRE_SCRUBBED: json.dumps(
            [{"path": ["attributes", "session.id"], "matched_substring": "session"}]
        ),
    }
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "content": ANSWER}]),
    }
    tool = {"gen_ai.tool.call.result": DOC}
    turn = span("support_turn", scrubbed)
    read = extract(
        trace(
            turn,
            span("execute_tool s", tool, parent=turn.span_id, start=1),
            span("chat m", chat, parent=turn.span_id, start=2),
        )
    )
    [rag] = read.interactions
    assert (rag.session_id, rag.user_id) == (None, "u-7")
    # Said: scored as a one-turn interaction, its session id scrubbed (counted by the consumer, not a skip).
    [said] = read.skips
    assert (said.reason, said.scored, said.span) == (ExtractSkip.SESSION_ID_SCRUBBED, True, rag.span)
    assert "keep-the-session-id-through-scrubbing" in said.detail
    # A request span above it that names the conversation still does, and nothing is said.
    request = span("POST /chat", {semconv.GEN_AI_CONVERSATION_ID: "c-7"})
    turn = span("support_turn", scrubbed, parent=request.span_id, start=1)
    read = extract(
        trace(
            request,
            turn,
            span("execute_tool s", tool, parent=turn.span_id, start=2),
            span("chat m", chat, parent=turn.span_id, start=3),
        )
    )
    [rag] = read.interactions
    assert (rag.session_id, rag.user_id) == ("c-7", "u-7") and read.skips == []
