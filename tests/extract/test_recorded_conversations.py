"""Two-turn conversations recorded from the real libraries (Pydantic AI with message_history; LangGraph's
and LlamaIndex's are the three-turn chats of test_recorded_multiturn.py): turn 2 calls no tool and answers
from turn 1's tool result, which the app kept in the conversation. The follow-up is judged against that
result, marked as an earlier turn's; a follow-up that result does not support is a hallucination; the record
says which turn's evidence each claim rests on."""

from __future__ import annotations

import pytest
from recorded import Recording, recordings

from tracescore.consume import decode_message
from tracescore.emit import evaluation_record
from tracescore.extract import extract
from tracescore.model import Interaction, Trace
from tracescore.score import evaluate

CONVERSATIONS = ("pydantic_ai_conversation",)
FOLLOW_UPS = [r for r in recordings() if r.source in CONVERSATIONS and r.scenario.startswith("followup")]
FIRST_TURNS = [r for r in recordings() if r.source in CONVERSATIONS and r.scenario == "turn1"]


def _read(recording: Recording) -> tuple[Interaction, Trace]:
    trace = Trace(recording.trace_id, tuple(decode_message(recording.payload)))
    found = extract(trace)
    [interaction] = found.interactions
    return interaction, trace


def test_every_library_is_recorded() -> None:
    assert sorted({r.source for r in FOLLOW_UPS}) == sorted(CONVERSATIONS)
    assert sorted({r.source for r in FIRST_TURNS}) == sorted(CONVERSATIONS)
    assert all(len([r for r in FOLLOW_UPS if r.source == s]) == 2 for s in CONVERSATIONS)


@pytest.mark.parametrize("recording", FOLLOW_UPS, ids=lambda r: r.id)
def test_a_follow_up_is_judged_against_the_earlier_turns_tool_result(recording: Recording) -> None:
    interaction, trace = _read(recording)
    assert interaction.record.query == recording.question
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {(s.kind, s.turns_back) for s in interaction.context_sources} == {("earlier_turn", 1)}
    # Read from the LLM call that answered: the tool result sits in its input, no tool span in this trace.
    assert {trace.by_id[s.span_id].attributes.get("openinference.span.kind", "LLM") for s in
            interaction.context_sources} == {"LLM"}  # fmt: skip
    assert interaction.session_id, "the conversation the turn belongs to"

    [result] = evaluate(interaction.record, ["faithfulness"])
    assert result.label == ("faithful" if recording.faithful else "hallucinated"), result.reason
    record = evaluation_record(interaction, result, None)
    [claim] = record.details["claims"]
    assert claim["evidence_source"] == {
        "span_id": interaction.context_sources[claim["context_index"]].span_id,
        "kind": "earlier_turn",
        "turns_back": 1,
    }


@pytest.mark.parametrize("recording", FIRST_TURNS, ids=lambda r: r.id)
def test_the_first_turn_is_judged_against_its_own_tool_call(recording: Recording) -> None:
    interaction, _ = _read(recording)
    assert {(s.kind, s.turns_back) for s in interaction.context_sources} == {("tool", 0)}
    [result] = evaluate(interaction.record, ["faithfulness"])
    record = evaluation_record(interaction, result, None)
    assert result.label == "faithful"
    assert all("turns_back" not in s for s in record.details["context_sources"])
    assert all(c["evidence_source"]["kind"] == "tool" for c in record.details["claims"])


@pytest.mark.parametrize("recording", FOLLOW_UPS, ids=lambda r: r.id)
def test_the_same_conversation_is_one_session_across_its_turns(recording: Recording) -> None:
    """The follow-up's session is the one its first turn was recorded under (the faithful conversation's)."""
    follow_up, _ = _read(recording)
    if recording.faithful:
        [first] = [r for r in FIRST_TURNS if r.source == recording.source]
        assert _read(first)[0].session_id == follow_up.session_id
