"""smolagents' chat under openinference-instrumentation-smolagents, recorded from the real library
(fixtures/smolagents_conversation): one ToolCallingAgent per conversation run with `reset=False`, its memory
resending the earlier runs to the model as `tool-call` / `tool-response` messages whose text is the ReAct
observation (`Observation:\\n['...', '...']`). Each turn is read in the session and user the app set with
OpenInference's `using_session` / `using_user`, with the earlier turns' search results as documents (the
observation's list, one document each), never an earlier answer: the `final_answer` observation repeats the
answer its call (the `tool-call` message before it) was handed."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_resent_turn, recordings, spans_of

from tracescore.model import ExtractSkip

RECORDED = {r.id: r for r in recordings() if r.source == "smolagents_conversation"}
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_chat_turn_is_read_in_its_session_with_what_its_memory_resent(recording: Recording) -> None:
    read_resent_turn(recording)


def test_a_restated_follow_up_is_never_grounded_in_the_earlier_answer_it_repeats() -> None:
    """Turn 1 answered 7 euros against a price list saying 9; turn 3 repeats it. The memory resends turn 1's
    answer as the final_answer tool's observation: read as a document, it would support the restatement."""
    recording = RECORDED["smolagents_conversation/resent_restated_turn3"]
    [llm, *_] = [s for s in reversed(spans_of(recording)) if s.name == "OpenAIModel.generate"]
    resent = " ".join(str(v) for k, v in llm.attributes.items() if k.startswith("llm.input_messages"))
    assert "Observation:\nThe Basic plan costs 7 euros a month." in resent  # what the memory resent
    [interaction] = extracted(spans_of(recording)).interactions
    assert not any("7 euros" in text for text in interaction.record.contexts)
    assert "Aurora Basic costs 9 euros a month, billed monthly." in interaction.record.contexts


def test_a_greeting_answered_without_a_search_is_skipped_with_nothing_to_judge() -> None:
    found = extracted(spans_of(RECORDED["smolagents_conversation/greeting_turn1"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.EMPTY_CONTEXT
