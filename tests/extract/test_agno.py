"""Agno's spans under OpenInference's Agno instrumentation, recorded from the real library (fixtures/agno,
agno_conversation): the agent run read with each document its tool returned (the instrumentor records a
returned list with `str()`, a Python repr), a tool loop with every search's result, and each chat turn in the
session and user the app passed to `Agent.run`, with the earlier turns' tool results Agno's history resent."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_resent_turn, recordings, spans_of

from tracescore.model import ExtractSkip

RECORDED = {r.id: r for r in recordings() if r.source in ("agno", "agno_conversation")}
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]
AGENT_RUN = "aurora_support.run"


@pytest.mark.parametrize("scenario", ["rag_faithful", "rag_stream_unfaithful"])
def test_the_agent_run_is_read_with_each_document_its_tool_returned(scenario: str) -> None:
    recording = RECORDED[f"agno/{scenario}"]
    [tool] = [s for s in spans_of(recording) if s.name == "search_docs"]
    assert str(tool.attributes["output.value"]).startswith("['")  # the list's repr, as Agno's tracer wrote it
    interaction = read_as_run(recording, "openinference", AGENT_RUN)
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    assert run is not None and [c.name for c in run.tool_calls] == ["search_docs"]
    assert recording.question in str(run.tool_calls[0].arguments)


def test_a_tool_loop_is_read_with_every_searchs_result_and_its_arguments() -> None:
    recording = RECORDED["agno/loop_unfaithful"]
    interaction = read_as_run(recording, "openinference", AGENT_RUN)
    run = interaction.run
    assert run is not None and run.steps == 3
    assert [str(c.arguments) for c in run.tool_calls] == [
        '{"query": "Aurora X2 battery"}',
        '{"query": "Aurora X2 battery life in hours"}',
    ]


def test_a_run_the_app_gave_no_session_keeps_the_one_agno_made_and_no_user() -> None:
    # Agno gives every run a session (a new UUID when the app passes none) and writes it as session.id.
    [interaction] = extracted(spans_of(RECORDED["agno/rag_faithful"])).interactions
    assert interaction.session_id is not None and interaction.user_id is None


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_chat_turn_is_read_in_its_session_with_what_agnos_history_resent(recording: Recording) -> None:
    read_resent_turn(recording)


def test_a_greeting_answered_without_a_search_is_skipped_with_nothing_to_judge() -> None:
    found = extracted(spans_of(RECORDED["agno_conversation/greeting_turn1"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.EMPTY_CONTEXT and AGENT_RUN in skip.detail
