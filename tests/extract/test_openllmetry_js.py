"""LangChain.js under OpenLLMetry's LangChain instrumentation (`@traceloop/instrumentation-langchain`),
recorded from the langchain_js app through the real Collector (fixtures/openllmetry_js). Its callback handler
starts each step's span in the active context, not under the run that called it: every step is a childless
sibling under the app's `POST /ask` span. Each chain or graph is read once, on its root workflow, from the
siblings that started within it; none of the steps is skipped as an interaction of its own."""

from __future__ import annotations

import dataclasses

from recorded import Recording, recordings, spans_of

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import DecodedSpan, Interaction, Trace

RECORDED = {r.id: r for r in recordings() if r.source == "openllmetry_js"}


def _read(recording: Recording, spans: list[DecodedSpan], root: str) -> Interaction:
    """The recording's one interaction, with no skip: on its root workflow, with the app's question, answer
    and documents, every sibling step read as part of it."""
    extraction = extract(Trace(recording.trace_id, tuple(spans)))
    assert extraction.skips == []
    [interaction] = extraction.interactions
    assert (interaction.convention, interaction.span.name) == ("openllmetry", f"workflow {root}")
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert interaction.record.contexts == ("\n\n".join(recording.documents),)
    steps = {s.span_id for s in spans if s.parent_span_id == interaction.span.parent_span_id}
    assert steps <= interaction.span_ids
    return interaction


def test_a_chains_flat_steps_are_one_interaction_on_its_root_workflow() -> None:
    """No retriever run is recorded: the documents are the chat call's instructions under `Context:`."""
    recording = RECORDED["openllmetry_js/rag_unfaithful"]
    interaction = _read(recording, spans_of(recording), "RunnableSequence")
    assert {s.kind for s in interaction.context_sources} == {"instructions"}


def test_a_graphs_answer_is_its_last_model_calls_and_its_documents_the_tool_message() -> None:
    """The graph's own output is its message list, not text: the answer is the last chat call's."""
    recording = RECORDED["openllmetry_js/agent_faithful"]
    interaction = _read(recording, spans_of(recording), "CompiledStateGraph")
    assert {s.kind for s in interaction.context_sources} == {"tool_message"}
    run = interaction.run
    assert run is not None and run.steps == 2
    assert (run.prompt_tokens, run.completion_tokens) == (84, 18)


def test_the_steps_are_read_alike_before_the_request_span_arrives() -> None:
    """The request's span ends last and reaches Kafka in a later message: the steps' first message alone
    is read the same way (grouped by their parent's id)."""
    recording = RECORDED["openllmetry_js/rag_faithful"]
    first = recording.messages[0]
    spans = decode_message(first.payload)
    assert all(s.span_id not in {p.parent_span_id for p in spans} for s in spans)  # no request span
    _read(recording, spans, "RunnableSequence")


def test_two_chains_run_one_after_the_other_in_one_request_are_two_interactions() -> None:
    faithful, unfaithful = RECORDED["openllmetry_js/rag_faithful"], RECORDED["openllmetry_js/rag_unfaithful"]
    [request] = [s for s in spans_of(faithful) if s.parent_span_id is None]
    steps = [s for s in spans_of(faithful) if s is not request]
    later = [
        dataclasses.replace(s, trace_id=request.trace_id, parent_span_id=request.span_id)
        for s in spans_of(unfaithful)
        if s.parent_span_id is not None
    ]
    request = dataclasses.replace(request, end_time_unix_nano=max(s.end_time_unix_nano for s in later))
    extraction = extract(Trace(request.trace_id, (request, *steps, *later)))
    assert extraction.skips == []
    assert [i.record.answer for i in extraction.interactions] == [faithful.answer, unfaithful.answer]
