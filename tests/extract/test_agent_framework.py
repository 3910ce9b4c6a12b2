"""Microsoft Agent Framework's own OTel GenAI spans, recorded from the real library (fixtures/agent_framework,
agent_framework_conversation): the agent invocation read with each document its tool returned, a tool loop
with every search's result, a skip naming Agent Framework's own setting when sensitive data is off (its
default), and each chat turn in the session and user the app's span per turn carries; on its Responses API
client with the history kept by the service (agent_framework_responses), the response id it writes as
`gen_ai.conversation.id`, new every turn, never read as the conversation."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_chat_turn, recordings, spans_of

from tracescore.extract import find
from tracescore.model import ExtractSkip, Interaction, Trace, response_chain_id

SOURCES = ("agent_framework", "agent_framework_conversation", "agent_framework_responses")
RECORDED = {r.id: r for r in recordings() if r.source in SOURCES}
TURNS = [
    r
    for r in RECORDED.values()
    if r.source == "agent_framework_conversation" and r.conversation and r.expected[0] == "interaction"
]
SERVICE_CHATS = ("service_faithful", "service_invented", "service_restated")
AGENT = "invoke_agent aurora_support"


@pytest.mark.parametrize("scenario", ["rag_faithful", "rag_stream_unfaithful", "loop_faithful"])
def test_the_agent_invocation_is_read_with_each_document_its_tool_returned(scenario: str) -> None:
    recording = RECORDED[f"agent_framework/{scenario}"]
    interaction = read_as_run(recording, "genai", AGENT)
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    searches = 2 if scenario.startswith("loop") else 1
    assert run is not None and [c.name for c in run.tool_calls] == ["search_docs"] * searches


@pytest.mark.parametrize("scenario", ["no_content_rag_faithful", "no_content_rag_unfaithful"])
def test_sensitive_data_off_is_skipped_naming_agent_frameworks_own_setting(scenario: str) -> None:
    found = extracted(spans_of(RECORDED[f"agent_framework/{scenario}"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert "enable_sensitive_data=True" in skip.detail and "ENABLE_SENSITIVE_DATA=true" in skip.detail
    # The OpenTelemetry GenAI util's setting does nothing for Agent Framework: never the advice here.
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" not in skip.detail


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_chat_turn_is_read_in_the_session_and_user_of_the_apps_span(recording: Recording) -> None:
    interaction, conversation = read_chat_turn(recording)
    # Agent Framework writes no id for a session the app keeps: they are on the app's span around the run.
    [agent] = [s for s in spans_of(recording) if s.name == AGENT]
    assert "gen_ai.conversation.id" not in agent.attributes
    assert interaction.span.name == AGENT
    assert (interaction.session_id, interaction.user_id) == (
        conversation["session_id"],
        conversation["user_id"],
    )
    resent = [text for item in conversation["resent"] for text in item["documents"]]
    assert sorted(interaction.record.contexts) == sorted([*conversation["retrieved"], *resent])


def _responses_chat(chat: str) -> list[Recording]:
    return [RECORDED[f"agent_framework_responses/{chat}_turn{turn}"] for turn in (1, 2, 3)]


def _conversation_ids(recording: Recording) -> set[str]:
    return {
        str(s.attributes["gen_ai.conversation.id"])
        for s in spans_of(recording)
        if "gen_ai.conversation.id" in s.attributes
    }


@pytest.mark.parametrize("chat", SERVICE_CHATS)
def test_a_session_the_service_keeps_is_one_conversation_by_the_apps_session_id(chat: str) -> None:
    """Agent Framework writes the session's last response id as `gen_ai.conversation.id`, new every turn, on
    the agent span itself: read before the app's `session.id` above it, it split one chat into three."""
    turns = _responses_chat(f"app_{chat}")
    per_turn = [_conversation_ids(r) for r in turns]
    assert all(ids and all(i.startswith("resp_") for i in ids) for ids in per_turn)
    assert not per_turn[0] & per_turn[1] and not per_turn[1] & per_turn[2]
    for recording in turns:
        interaction, conversation = read_chat_turn(recording)
        assert interaction.span.name == AGENT
        assert (interaction.session_id, interaction.user_id) == (
            conversation["session_id"],
            conversation["user_id"],
        )
        assert sorted(interaction.record.contexts) == sorted(conversation["retrieved"])


@pytest.mark.parametrize("chat", SERVICE_CHATS)
def test_a_response_id_is_no_conversation_so_each_turn_is_read_on_its_own(chat: str) -> None:
    """Without an id of the app's, each turn is read alone (the same as a producer that writes no session),
    never as a conversation of one turn named by a response."""
    for recording in _responses_chat(chat):
        interaction, conversation = read_chat_turn(recording)
        assert _conversation_ids(recording)
        assert (interaction.session_id, interaction.user_id) == (None, None)
        assert sorted(interaction.record.contexts) == sorted(conversation["retrieved"])


def _inferred(recording: Recording) -> Interaction:
    """The turn's interaction read as `tracescore consume` reads it with `infer_conversations`."""
    spans = spans_of(recording)
    [found] = find(Trace(spans[0].trace_id, tuple(spans))).found
    found.infer_conversation()
    return found.interaction()


@pytest.mark.parametrize("chat", SERVICE_CHATS)
def test_a_follow_up_names_the_response_that_answered_the_turn_before_it(chat: str) -> None:
    """With `infer_conversations`, each turn's own response id is the answering model call's
    `gen_ai.response.id`, and a follow-up's previous one the agent span's `gen_ai.conversation.id` (the
    session's last response as the run started; a model call's names the call before it in the same turn):
    each follow-up names exactly its predecessor's answer, turn 1 none. The turn's records name no
    conversation (tracescore conversations joins the chain); its documents go with the chain its answer would
    open."""
    turns = [_inferred(r) for r in _responses_chat(chat)]
    assert all(t.response_id and t.response_id.startswith("resp_") for t in turns)
    assert [t.previous_response_id for t in turns] == [None, turns[0].response_id, turns[1].response_id]
    assert all(t.session_id is None and t.conversation_source is None for t in turns)
    service = turns[0].span.service_name
    assert [t.opens_conversation for t in turns[1:]] == [
        response_chain_id(service, t.response_id) for t in turns[1:]
    ]


def test_no_other_recorded_source_names_a_previous_response() -> None:
    """Only the Responses API chat whose service keeps the history names a previous response: a turn of any
    other recorded source read with `infer_conversations` is no follow-up of a chain."""
    named = {
        r.id
        for r in recordings()
        if r.expected[0] == "interaction" and not r.messages
        for spans in [spans_of(r)]
        for found in find(Trace(spans[0].trace_id, tuple(spans))).found
        if (found.infer_conversation(), found.interaction().previous_response_id)[1] is not None
    }
    expected = {f"agent_framework_responses/{c}_turn{n}" for c in SERVICE_CHATS for n in (2, 3)}
    assert named == expected
