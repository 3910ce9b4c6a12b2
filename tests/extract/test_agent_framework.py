"""Microsoft Agent Framework's own OTel GenAI spans, recorded from the real library (fixtures/agent_framework,
agent_framework_conversation): the agent invocation read with each document its tool returned, a tool loop
with every search's result, a skip naming Agent Framework's own setting when sensitive data is off (its
default), and each chat turn in the session and user the app's span per turn carries."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_chat_turn, recordings, spans_of

RECORDED = {r.id: r for r in recordings() if r.source in ("agent_framework", "agent_framework_conversation")}
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]
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
    assert found.interactions == [] and skip.reason == "content_not_captured"
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
