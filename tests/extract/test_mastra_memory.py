"""The three-turn support chat on a Mastra agent whose history Mastra's memory keeps (`@mastra/memory` with
`@mastra/libsql`), recorded from a real Node app through its OtelExporter and the real Collector
(fixtures/mastra_memory): the app sends only the question. Each turn is a turn of the memory's thread, read
with the earlier turns' tool results the memory recalled (its last messages, or semantic recall) as earlier
turns' documents, also where Mastra's ToolCallFilter then kept them out of the prompt (the same user's earlier
retrieval: evidence for grounding across turns either way, read here without judging the turn twice)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.score import evaluate

RECORDED = [r for r in recordings() if r.source == "mastra_memory"]
TURNS = [r for r in RECORDED if r.expected[0] == "interaction"]
FORMS = {"recall_": "resent", "semantic_": "resent", "filtered_": "qa_only"}
# Each turn's own search, by conversation and turn.
RETRIEVED = {
    (r.conversation["name"], r.conversation["turn"]): r.conversation["retrieved"]
    for r in TURNS
    if r.conversation
}


def _form(recording: Recording) -> str:
    return next(prefix for prefix in FORMS if recording.scenario.startswith(prefix))


def test_each_memory_form_is_recorded_as_three_turn_chats() -> None:
    for prefix, history in FORMS.items():
        turn3 = [r for r in TURNS if _form(r) == prefix and r.scenario.endswith("_turn3")]
        assert len(turn3) == 3, prefix  # faithful, invented, restated
        assert {r.conversation["history"] for r in turn3 if r.conversation} == {history}


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.scenario)
def test_each_turn_is_a_turn_of_the_memorys_thread_and_resource(recording: Recording) -> None:
    [interaction] = extracted(spans_of(recording)).interactions
    assert recording.conversation is not None
    assert interaction.session_id == recording.conversation["session_id"]  # the memory's thread
    assert interaction.user_id == recording.conversation["user_id"]  # its resource
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.scenario)
def test_each_turn_reads_the_earlier_tool_results_the_memory_recalled(recording: Recording) -> None:
    """This turn's search, then each earlier turn's results the memory recalled, marked with how many turns
    back it was; never an earlier answer. ToolCallFilter keeps them out of the prompt after Mastra recorded
    the recalled messages: they are read all the same."""
    [interaction] = extracted(spans_of(recording)).interactions
    conversation = recording.conversation
    assert conversation is not None
    sources = dict(zip(interaction.record.contexts, interaction.context_sources, strict=True))
    for text in conversation["retrieved"]:
        assert (sources[text].kind, sources[text].turns_back) == ("tool", 0)
    earlier = {text: conversation["turn"] - t for (name, t), texts in RETRIEVED.items() for text in texts
               if name == conversation["name"] and t < conversation["turn"]}  # fmt: skip
    assert {text: (s.kind, s.turns_back) for text, s in sources.items() if s.turns_back} == {
        text: ("earlier_turn", back) for text, back in earlier.items()
    }
    assert not set(conversation["earlier_answers_in_prompt"]) & set(interaction.record.contexts)


@pytest.mark.parametrize("recording", [r for r in TURNS if r.scenario.endswith("_turn3")], ids=lambda r: r.id)
def test_a_follow_up_reusing_an_earlier_turns_fact_is_not_flagged_when_its_trace_holds_it(
    recording: Recording,
) -> None:
    """The weekend add-on costs the same as the Basic plan, whose price turn 1 retrieved: recalled by the
    memory, that price grounds the answer in this trace, in every memory form; an invented or restated price
    stays flagged."""
    [interaction] = extracted(spans_of(recording)).interactions
    [result] = evaluate(interaction.record, ["faithfulness"])
    assert result.label == ("faithful" if recording.faithful else "hallucinated"), result.reason
    assert recording.earlier_trace is None
