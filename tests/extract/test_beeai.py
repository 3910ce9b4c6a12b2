"""BeeAI's spans under OpenInference's BeeAI instrumentation, recorded from the real library (fixtures/beeai,
beeai_conversation): the RequirementAgent's run read with each document its tool returned (a returned list
recorded with `str()`, a Python repr) and the answer it gave through its final_answer tool, plain and with the
model's replies streamed; a tool loop with every search's result; and each chat turn in the session and user
the app set with OpenInference's `using_attributes`, with the earlier turns' tool results its memory resent
(a tool message whose one text part is the list's repr, read as the list's documents)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_resent_turn, recordings, spans_of

from tracescore.model import ExtractSkip

RECORDED = {r.id: r for r in recordings() if r.source in ("beeai", "beeai_conversation")}
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]
AGENT = "aurora_support"


@pytest.mark.parametrize("scenario", ["rag_faithful", "rag_stream_unfaithful"])
def test_the_agent_run_is_read_with_each_document_its_tool_returned(scenario: str) -> None:
    recording = RECORDED[f"beeai/{scenario}"]
    [tool] = [s for s in spans_of(recording) if s.name == "search_docs"]
    assert "['" in str(tool.attributes["output.value"])  # the list's repr, as BeeAI's tool output wrote it
    interaction = read_as_run(recording, "openinference", AGENT)
    assert {s.kind for s in interaction.context_sources} == {"tool"}
    run = interaction.run
    # The answer reaches BeeAI's final_answer tool as its argument: read as the answer, never a document.
    assert run is not None and [c.name for c in run.tool_calls] == ["search_docs", "final_answer"]
    assert recording.question in str(run.tool_calls[0].arguments)


def test_a_tool_loop_is_read_with_every_searchs_result_and_its_arguments() -> None:
    recording = RECORDED["beeai/loop_unfaithful"]
    interaction = read_as_run(recording, "openinference", AGENT)
    run = interaction.run
    assert run is not None and run.steps == 3
    searches = [c for c in run.tool_calls if c.name == "search_docs"]
    assert ["Aurora X2 battery" in str(c.arguments) for c in searches] == [True, True]
    assert "battery life in hours" in str(searches[1].arguments)


def test_a_run_the_app_gave_no_session_has_none() -> None:
    [interaction] = extracted(spans_of(RECORDED["beeai/rag_faithful"])).interactions
    assert (interaction.session_id, interaction.user_id) == (None, None)


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_chat_turn_is_read_in_its_session_with_what_beeais_memory_resent(recording: Recording) -> None:
    read_resent_turn(recording)


def test_a_greeting_answered_without_a_search_is_skipped_with_nothing_to_judge() -> None:
    found = extracted(spans_of(RECORDED["beeai_conversation/greeting_turn1"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.EMPTY_CONTEXT and AGENT in skip.detail
