"""LangChain.js under OpenLLMetry's LangChain instrumentation (`@traceloop/instrumentation-langchain`),
recorded from the langchain_js app through the real Collector (fixtures/openllmetry_js). Its callback handler
starts each step's span in the active context, not under the run that called it: every step is a childless
sibling under the app's `POST /ask` span. Each chain or graph is read once, on its root workflow, from the
siblings that started within it; none of the steps is skipped as an interaction of its own."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from recorded import FIXTURES, Recording, recordings, spans_of

from tracescore.consume import decode_message
from tracescore.extract import Extraction, extract
from tracescore.model import DecodedSpan, ExtractSkip, Interaction, Trace

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


# Chains run at once (fixtures/openllmetry_js/concurrent/, each entry's `requests` every chain of its run).
CONCURRENT = FIXTURES / "openllmetry_js" / "concurrent"
_MANIFEST = json.loads((CONCURRENT / "manifest.json").read_text())["scenarios"]


def _concurrent(scenario: str) -> tuple[Extraction, list[dict[str, Any]]]:
    entry = _MANIFEST[f"{scenario}.binpb"]
    spans = decode_message((CONCURRENT / f"{scenario}.binpb").read_bytes())
    return extract(Trace(entry["trace_id"], tuple(spans))), entry["requests"]


def _own(interaction: Interaction, requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The one request an interaction was read from whole: its question, its documents, its answer."""
    record = interaction.record
    [request] = [r for r in requests if r["question"] == record.query]
    assert record.answer == request["answer"]
    assert record.contexts == ("\n\n".join(request["documents"]),)
    return request


@pytest.mark.parametrize("scenario", ["concurrent_one_span", "concurrent_requests_first"])
def test_chains_run_at_once_are_never_read_as_one_each_model_call_is_its_own_request(scenario: str) -> None:
    """Their steps interleave under one span with nothing saying whose each is: the run is skipped as
    interleaved, naming both questions, and each chain's model call (its question, the documents under its
    prompt's `Context:`, its answer) is read on its own."""
    extraction, requests = _concurrent(scenario)
    assert sorted(_own(i, requests)["question"] for i in extraction.interactions) == sorted(
        r["question"] for r in requests
    )
    assert {i.convention for i in extraction.interactions} == {"genai"}
    interleaved = [s for s in extraction.skips if s.reason == ExtractSkip.INTERLEAVED_RUNS]
    assert interleaved and {s.reason for s in extraction.skips} == {ExtractSkip.INTERLEAVED_RUNS}
    assert all(r["question"] in interleaved[0].detail for r in requests)


def test_a_request_whose_steps_went_to_another_requests_trace_is_skipped_as_interleaved() -> None:
    """LangChain.js runs its callbacks in a background queue, in the first request's context: the second
    request's trace keeps its request span and a lone step."""
    extraction, _ = _concurrent("concurrent_requests_second")
    assert extraction.interactions == []
    [skip] = extraction.skips
    assert skip.reason == ExtractSkip.INTERLEAVED_RUNS and "workflow parser" in skip.detail


@pytest.mark.parametrize("scenario", ["concurrent_awaited_first", "concurrent_awaited_second"])
def test_requests_served_at_once_with_awaited_callbacks_are_each_one_chain(scenario: str) -> None:
    """With LANGCHAIN_CALLBACKS_BACKGROUND=false each request's steps are in its own trace: read as its chain
    on its root workflow, with no skip."""
    extraction, requests = _concurrent(scenario)
    assert extraction.skips == []
    [interaction] = extraction.interactions
    assert (interaction.convention, interaction.span.name) == ("openllmetry", "workflow RunnableSequence")
    assert _own(interaction, requests)["question"] == _MANIFEST[f"{scenario}.binpb"]["question"]
