"""Mastra workflows, recorded from a real Node app through its OtelExporter and the real Collector
(fixtures/mastra_workflow): a workflow run is one interaction, asked what the workflow was started with,
answered by the agent its last step called, judged against the documents a retrieving step handed on to the
answering step (or the documents the agent's own tool returned), by parallel steps as well, or put into the
agent's instructions under a label that names them."""

from __future__ import annotations

import json

import pytest
from recorded import Recording, extracted, read_as_run, recordings, replaced, spans_of

from tracescore.model import ExtractSkip

RECORDED = {r.scenario: r for r in recordings() if r.source == "mastra_workflow"}
STEP_INPUT, WORKFLOW_INPUT = "mastra.workflow_step.input", "mastra.workflow_run.input"
GENERATION_INPUT, INSTRUCTIONS = "mastra.model_generation.input", "gen_ai.system_instructions"


@pytest.mark.parametrize("recording", RECORDED.values(), ids=lambda r: r.scenario)
def test_a_workflow_run_is_one_interaction_with_its_question_documents_answer(recording: Recording) -> None:
    interaction = read_as_run(recording, "mastra", recording.interaction_span or "")
    assert interaction.question_missing is None
    assert extracted(spans_of(recording)).skips == []  # its agent is not scored again on its own


@pytest.mark.parametrize("shape", ["step", "tool_step", "parallel", "branch"])
def test_the_documents_a_retrieving_step_handed_on_are_what_the_answer_is_judged_against(shape: str) -> None:
    recording = RECORDED[f"{shape}_unfaithful"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert {s.kind for s in interaction.context_sources} == {"input"}
    [answering_step] = {s.span_id for s in interaction.context_sources}
    [step] = [s for s in spans_of(recording) if s.span_id == answering_step]
    assert step.name == "workflow_step answer"  # the step that was handed them, once


def test_a_workflow_whose_steps_hand_no_documents_on_is_skipped_not_judged_against_nothing() -> None:
    recording = RECORDED["step_faithful"]
    spans = replaced(spans_of(recording), STEP_INPUT, '{"notes": "no documents"}')
    # Nor does the agent's prompt carry any under a label: the question alone.
    asked = json.dumps({"messages": [{"role": "user", "content": recording.question}]})
    found = extracted(replaced(spans, GENERATION_INPUT, asked))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.EMPTY_CONTEXT and STEP_INPUT in skip.detail


def test_documents_a_step_put_into_the_agents_prompt_under_a_label_are_read_beside_the_question() -> None:
    """The answering step's agent is asked "Context:\n...\n\nQuestion: ...": with no step input holding a
    list of documents, the block is the one document (`prompt`), the text after `Question:` the question."""
    recording = RECORDED["step_faithful"]
    found = extracted(replaced(spans_of(recording), STEP_INPUT, '{"notes": "no documents"}'))
    [interaction] = found.interactions
    assert [s.kind for s in interaction.context_sources] == ["prompt"]
    assert interaction.record.contexts == ("\n".join(recording.documents),)
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)


def test_a_workflow_started_with_a_text_is_asked_that_text() -> None:
    recording = RECORDED["step_faithful"]
    spans = replaced(spans_of(recording), WORKFLOW_INPUT, f'"{recording.question}"')
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question


@pytest.mark.parametrize("faithful", [True, False], ids=["faithful", "unfaithful"])
def test_documents_from_parallel_steps_are_each_read_once_from_the_step_they_were_handed_to(
    faithful: bool,
) -> None:
    """After `.parallel()` the answering step is handed each parallel step's output under its step id: all
    of them are what the answer could rest on (half the documents each), once."""
    recording = RECORDED[f"parallel_{'faithful' if faithful else 'unfaithful'}"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert list(interaction.record.contexts) == list(recording.documents)
    assert (
        interaction.record.answer == recording.answer
        and interaction.span.name == "invoke_workflow aurora-parallel"
    )


@pytest.mark.parametrize("faithful", [True, False], ids=["faithful", "unfaithful"])
def test_documents_put_into_the_agents_instructions_under_a_label_are_read(faithful: bool) -> None:
    """The step retrieved and put the documents into the agent's instructions for the call (its system
    message), under "... from this context only:": that text is the one document, read from what the model
    was given (the generation's system message)."""
    recording = RECORDED[f"instructions_{'faithful' if faithful else 'unfaithful'}"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.record.contexts == recording.documents
    [source] = interaction.context_sources
    assert source.kind == "instructions"
    [generation] = [s for s in spans_of(recording) if s.span_id == source.span_id]
    assert GENERATION_INPUT in generation.attributes


def test_instructions_are_read_from_the_agent_span_when_the_generation_recorded_no_input() -> None:
    spans = replaced(spans_of(RECORDED["instructions_faithful"]), GENERATION_INPUT, "{}")
    [interaction] = extracted(spans).interactions
    assert interaction.record.contexts == RECORDED["instructions_faithful"].documents
    assert [s.span_id for s in interaction.context_sources] == [
        s.span_id for s in spans if s.name == "invoke_agent aurora_answer"
    ]


def test_instructions_without_a_label_naming_documents_are_never_documents() -> None:
    """Instructions that only instruct (no "Context:"-like label) are not evidence: the run is skipped as
    having no documents, never judged against its instructions."""
    recording = RECORDED["instructions_faithful"]
    unlabelled = "You answer questions about Aurora products. Be brief."
    spans = replaced(replaced(spans_of(recording), GENERATION_INPUT, "{}"), INSTRUCTIONS, unlabelled)
    found = extracted(spans)
    [skip] = found.skips
    assert (
        found.interactions == [] and skip.reason == ExtractSkip.EMPTY_CONTEXT and INSTRUCTIONS in skip.detail
    )
