"""A RAG app with no framework: the app queries a vector database with its client and hands what it got to
its chat call. What OpenLLMetry's database instrumentations recorded of the results (Chroma's texts, Qdrant's
nothing) is what the call is judged against, and where they recorded no text (OpenLIT's never do) the skip
says why."""

from __future__ import annotations

import dataclasses

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.model import ContextSourceKind, DecodedSpan, ExtractSkip, SpanEvent

SOURCE = "openllmetry_vector_db"
DOCUMENT = "db.query.result.document"


OPENLIT = "openlit_vector_db"


def recording(scenario: str, source: str = SOURCE) -> Recording:
    [found] = [r for r in recordings() if r.source == source and r.scenario == scenario]
    return found


def query_span(spans: list[DecodedSpan]) -> DecodedSpan:
    [query] = [s for s in spans if s.name in ("chroma.query", "qdrant.query_points")]
    return query


def with_span(spans: list[DecodedSpan], changed: DecodedSpan) -> list[DecodedSpan]:
    return [changed if s.span_id == changed.span_id else s for s in spans]


@pytest.mark.parametrize("scenario", ["chroma_faithful", "chroma_request_unfaithful"])
def test_the_texts_the_query_returned_are_the_documents_in_its_ranking(scenario: str) -> None:
    spans = spans_of(recording(scenario))
    query = query_span(spans)
    [interaction] = extracted(spans).interactions
    ranked = [event.attributes[DOCUMENT] for event in query.events]
    assert list(interaction.record.contexts) == ranked
    assert {(s.span_id, s.kind) for s in interaction.context_sources} == {
        (query.span_id, ContextSourceKind.RETRIEVER)
    }


def test_under_a_label_too_the_query_wins_over_the_prompt() -> None:
    """Retrieved documents always win: one per result, not the prompt's block."""
    spans = spans_of(recording("chroma_labelled_faithful"))
    [interaction] = extracted(spans).interactions
    assert len(interaction.record.contexts) == len(query_span(spans).events) == 3


def test_a_query_after_the_chat_call_is_not_its_evidence() -> None:
    """Under the app's own span, the chat call reads the queries that ran before it, not a later one."""
    spans = spans_of(recording("chroma_request_faithful"))
    [chat] = [s for s in spans if s.name == "openai.chat"]
    query = query_span(spans)
    later = dataclasses.replace(
        query,
        start_time_unix_nano=chat.end_time_unix_nano + 1,
        end_time_unix_nano=chat.end_time_unix_nano + 2,
    )
    [skip] = extracted(with_span(spans, later)).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT


def test_a_chroma_query_without_its_texts_says_which_setting_records_them() -> None:
    spans = spans_of(recording("chroma_faithful"))
    query = query_span(spans)
    ids_only = tuple(
        SpanEvent(e.name, {k: v for k, v in e.attributes.items() if k != DOCUMENT}, e.time_unix_nano)
        for e in query.events
    )
    [skip] = extracted(with_span(spans, dataclasses.replace(query, events=ids_only))).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT
    assert "'chroma.query' recorded 3 result(s)" in skip.detail
    assert "include= left out 'documents'" in skip.detail


def test_a_qdrant_query_records_no_result_and_the_skip_says_so() -> None:
    [skip] = extracted(spans_of(recording("qdrant_faithful"))).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT
    assert "'qdrant.query_points' recorded none of its results, only db.vector.query.top_k" in skip.detail
    assert "@task(name='retrieve')" in skip.detail


def test_a_qdrant_app_that_labels_its_documents_is_read_from_its_prompt_with_no_note() -> None:
    [interaction] = extracted(spans_of(recording("qdrant_labelled_faithful"))).interactions
    assert {s.kind for s in interaction.context_sources} == {ContextSourceKind.INSTRUCTIONS}
    assert interaction.context_notes == ()


@pytest.mark.parametrize(
    ("scenario", "recorded"),
    [
        ("chroma_faithful", "the chroma query 'GET aurora_docs' recorded that it returned 3 rows"),
        ("chroma_request_unfaithful", "the chroma query 'GET aurora_docs' recorded that it returned 3 rows"),
        ("qdrant_faithful", "the qdrant query 'QUERY unknown' recorded none of their texts"),
    ],
)
def test_openlit_records_no_result_text_and_the_skip_says_so(scenario: str, recorded: str) -> None:
    [skip] = extracted(spans_of(recording(scenario, OPENLIT))).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT
    assert recorded in skip.detail
    assert "OpenLIT's vector database instrumentations write none" in skip.detail
