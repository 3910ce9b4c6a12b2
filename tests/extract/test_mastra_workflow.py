"""Mastra workflows, recorded from a real Node app through its OtelExporter and the real Collector
(fixtures/mastra_workflow): a workflow run is one interaction, asked what the workflow was started with,
answered by the agent its last step called, judged against the documents a retrieving step handed on to the
answering step (or the documents the agent's own tool returned)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, recordings, replaced, spans_of

RECORDED = {r.scenario: r for r in recordings() if r.source == "mastra_workflow"}
STEP_INPUT, WORKFLOW_INPUT = "mastra.workflow_step.input", "mastra.workflow_run.input"


@pytest.mark.parametrize("recording", RECORDED.values(), ids=lambda r: r.scenario)
def test_a_workflow_run_is_one_interaction_with_its_question_documents_answer(recording: Recording) -> None:
    interaction = read_as_run(recording, "mastra", recording.interaction_span or "")
    assert interaction.question_missing is None
    assert extracted(spans_of(recording)).skips == []  # its agent is not scored again on its own


@pytest.mark.parametrize("shape", ["step", "tool_step"])
def test_the_documents_a_retrieving_step_handed_on_are_what_the_answer_is_judged_against(shape: str) -> None:
    recording = RECORDED[f"{shape}_unfaithful"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert {s.kind for s in interaction.context_sources} == {"input"}
    [answering_step] = {s.span_id for s in interaction.context_sources}
    [step] = [s for s in spans_of(recording) if s.span_id == answering_step]
    assert step.name == "workflow_step answer"  # the step that was handed them, once


def test_a_workflow_whose_steps_hand_no_documents_on_is_skipped_not_judged_against_nothing() -> None:
    spans = replaced(spans_of(RECORDED["step_faithful"]), STEP_INPUT, '{"notes": "no documents"}')
    found = extracted(spans)
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == "empty_context" and STEP_INPUT in skip.detail


def test_a_workflow_started_with_a_text_is_asked_that_text() -> None:
    recording = RECORDED["step_faithful"]
    spans = replaced(spans_of(recording), WORKFLOW_INPUT, f'"{recording.question}"')
    [interaction] = extracted(spans).interactions
    assert interaction.record.query == recording.question
