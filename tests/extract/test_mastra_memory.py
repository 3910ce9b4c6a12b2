"""The three-turn support chat on a Mastra agent whose history Mastra's memory keeps (`@mastra/memory` with
`@mastra/libsql`), recorded from a real Node app through its OtelExporter and the real Collector
(fixtures/mastra_memory): the app sends only the question. Each turn is a turn of the memory's thread, read
with what the model was given: the earlier turns' tool results the memory recalled (its last messages, or
semantic recall) as earlier turns' documents, and none where Mastra's ToolCallFilter kept them out of the
prompt (the follow-up is then grounded across traces, tests/conversations/test_grounding_kafka.py)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.score import evaluate

RECORDED = [r for r in recordings() if r.source == "mastra_memory"]
TURNS = [r for r in RECORDED if r.expected[0] == "interaction"]
FORMS = {"recall_": "resent", "semantic_": "resent", "filtered_": "qa_only"}


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
def test_each_turn_reads_the_earlier_tool_results_the_model_was_given_and_no_others(
    recording: Recording,
) -> None:
    """This turn's search, then the earlier turns' results the memory recalled into the prompt, each marked
    with how many turns back it was; where ToolCallFilter kept them out of the prompt (the memory still holds
    them, and Mastra's generation span records the messages before the filter ran), none."""
    [interaction] = extracted(spans_of(recording)).interactions
    conversation = recording.conversation
    assert conversation is not None
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    sources = dict(zip(interaction.record.contexts, interaction.context_sources, strict=True))
    for text in conversation["retrieved"]:
        assert (sources[text].kind, sources[text].turns_back) == ("tool", 0)
    for resent in conversation["resent"]:
        for text in resent["documents"]:
            back = conversation["turn"] - resent["turn"]
            assert (sources[text].kind, sources[text].turns_back) == ("earlier_turn", back)
    assert not set(conversation["earlier_answers_in_prompt"]) & set(interaction.record.contexts)


@pytest.mark.parametrize("recording", [r for r in TURNS if r.scenario.endswith("_turn3")], ids=lambda r: r.id)
def test_a_follow_up_reusing_an_earlier_turns_fact_is_not_flagged_when_its_trace_holds_it(
    recording: Recording,
) -> None:
    """ "And the weekend add-on?" costs the same as the Basic plan, whose price turn 1 retrieved: recalled by
    the memory, it grounds the answer in this trace; an invented or restated price stays flagged. Filtered
    out of the prompt, only turn 1's own trace holds it (`earlier_trace`): grounding across traces."""
    [interaction] = extracted(spans_of(recording)).interactions
    [result] = evaluate(interaction.record, ["faithfulness"])
    assert result.label == recording.label_in_this_trace, result.reason
    assert (recording.earlier_trace is not None) == (recording.faithful and _form(recording) == "filtered_")
