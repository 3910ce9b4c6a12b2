"""Microsoft Agent Framework's own OTel GenAI spans, recorded from the real library (fixtures/agent_framework,
agent_framework_conversation): the agent invocation read with each document its tool returned, a tool loop
with every search's result, a skip naming Agent Framework's own setting when sensitive data is off (its
default), and each chat turn in the session and user the app's span per turn carries; on its Responses API
client with the history kept by the service (agent_framework_responses), the response id it writes as
`gen_ai.conversation.id`, new every turn, never read as the conversation."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_chat_turn, recordings, spans_of

from tracescore.model import ExtractSkip

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
