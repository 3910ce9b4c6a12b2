"""Spans recorded from the real OpenInference, OpenLLMetry and OTel GenAI libraries read right: the
question, documents and answer the application used, on the interaction's own span; never a retrieval
span's output read as an answer; an explained skip where the library records no usable retrieval."""

from __future__ import annotations

import re

import pytest
from recorded import Recording, recordings, spans_of

from tracescore.consume import decode_message
from tracescore.extract import extract
from tracescore.model import ContextSourceKind, Trace

PROMPTED = {ContextSourceKind.INSTRUCTIONS, ContextSourceKind.PROMPT}
RETRIEVAL_KINDS = {"RETRIEVER", "RERANKER", "EMBEDDING", "TOOL", "PROMPT"}
GENAI_RETRIEVAL_OPERATIONS = {"retrieval", "execute_tool", "embeddings"}
# A Langfuse trace with an agent/chain/span around them is never scored on these.
LANGFUSE_INNER = {"retriever", "tool", "generation", "embedding", "evaluator", "guardrail", "event"}


@pytest.mark.parametrize("recording", [r.param for r in recordings()])
def test_a_recorded_trace_is_read_as_the_application_ran_it(recording: Recording) -> None:
    spans = spans_of(recording)
    assert {s.trace_id for s in spans} == {recording.trace_id}
    found = extract(Trace(recording.trace_id, tuple(spans)))
    outcome, name = recording.expected
    if outcome == "skip":
        assert found.interactions == [], "a score built from the wrong text is worse than none"
        [skip] = found.skips
        assert skip.reason == name and skip.detail
        return
    [interaction] = found.interactions
    assert found.skips == []
    assert interaction.convention == name
    assert interaction.record.query == recording.recorded_question
    assert (interaction.question_missing is None) == (recording.question_not_recorded is None)
    assert interaction.record.answer == recording.answer
    if {source.kind for source in interaction.context_sources} <= PROMPTED:
        # Read from the prompt: one document, the block under its label, holding each of the app's.
        [block] = interaction.record.contexts
        assert all(document in block for document in recording.documents)
    else:
        assert sorted(interaction.record.contexts) == sorted(recording.documents)
    kind = str(interaction.span.attributes.get("openinference.span.kind", ""))
    assert kind not in RETRIEVAL_KINDS
    assert interaction.span.attributes.get("gen_ai.operation.name") not in GENAI_RETRIEVAL_OPERATIONS
    assert interaction.span.attributes.get("langfuse.observation.type") not in LANGFUSE_INNER
    if recording.interaction_span is not None:
        assert interaction.span.name == recording.interaction_span


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def _holds(text: str, answer: str) -> bool:
    return f" {_words(answer)} " in f" {_words(text)} "


@pytest.mark.parametrize("recording", recordings(), ids=lambda r: r.id)
def test_an_answer_never_supports_itself(recording: Recording) -> None:
    """No judged document holds the answer's words unless it is one of the app's documents that does: a
    final-answer tool's result, a tool handed the answer, an agent's own output are never evidence."""
    spans = spans_of(recording)
    for interaction in extract(Trace(recording.trace_id, tuple(spans))).interactions:
        answer = interaction.record.answer
        for document in interaction.record.contexts:
            if _holds(document, answer):
                # One of the app's documents, or the prompt's block of them (one of which holds it).
                holding = [
                    d for d in recording.documents if d == document or (d in document and _holds(d, answer))
                ]
                assert holding, f"{recording.id}: {document[:120]!r} is the answer"


@pytest.mark.parametrize("recording", recordings(), ids=lambda r: r.id)
def test_a_recorded_trace_in_any_span_order_reads_the_same(recording: Recording) -> None:
    spans = spans_of(recording)
    forward = extract(Trace(recording.trace_id, tuple(spans)))
    backward = extract(Trace(recording.trace_id, tuple(reversed(spans))))
    assert [(r.span.span_id, r.record) for r in forward.interactions] == [
        (r.span.span_id, r.record) for r in backward.interactions
    ]
    assert [s.reason for s in forward.skips] == [s.reason for s in backward.skips]


@pytest.mark.parametrize("recording", [r for r in recordings() if r.messages], ids=lambda r: r.id)
def test_a_trace_split_across_services_is_the_same_trace_once_all_its_messages_are_in(
    recording: Recording,
) -> None:
    parts = [decode_message(message.payload) for message in recording.messages]
    assert [{s.service_name for s in part} for part in parts] == [{m.service} for m in recording.messages]
    joined = [span for part in parts for span in part]
    whole = decode_message(recording.payload)
    assert sorted(s.span_id for s in joined) == sorted(s.span_id for s in whole)
    assert [
        (r.span.span_id, r.record) for r in extract(Trace(recording.trace_id, tuple(joined))).interactions
    ] == [(r.span.span_id, r.record) for r in extract(Trace(recording.trace_id, tuple(whole))).interactions]
