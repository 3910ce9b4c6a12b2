"""Strands Agents' memory, recorded from the real library (fixtures/strands_memory): the entries its
`MemoryManager` found (a `memory.search` span) are the documents, whether its injection put them into the
prompt or the model called its `search_memory` tool (read once, from the search). Its background extraction
(a trace of its own after the request) is no interaction."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, recordings, spans_of, without

from tracescore.model import ExtractSkip

RECORDED = {r.scenario: r for r in recordings() if r.source == "strands_memory"}
REQUESTS = {name: r for name, r in RECORDED.items() if not name.endswith("_background")}
EXTRACTIONS = [r for name, r in RECORDED.items() if name.endswith("_background")]
MEMORY_RESULTS = "content"  # a memory.search span's entries, as Strands writes them on the span


@pytest.mark.parametrize("recording", REQUESTS.values(), ids=lambda r: r.scenario)
def test_the_memorys_entries_are_the_documents_read_once(recording: Recording) -> None:
    interaction = read_as_run(recording, "strands", "invoke_agent aurora_support")
    assert {s.kind for s in interaction.context_sources} == {"retriever"}
    [search] = [s for s in spans_of(recording) if s.name == "memory.search"]
    assert {s.span_id for s in interaction.context_sources} == {search.span_id}


def test_injected_entries_the_search_did_not_record_leave_nothing_to_judge() -> None:
    # Memory injection puts the entries into the prompt text only, which is never split into documents.
    found = extracted(without(spans_of(RECORDED["injected_unfaithful"]), MEMORY_RESULTS))
    assert found.interactions == [] and [s.reason for s in found.skips] == [ExtractSkip.EMPTY_CONTEXT]


def test_the_extraction_is_recorded_as_its_own_trace_after_the_request() -> None:
    # In each of Strands' ways of writing messages: on the spans, one event per message, operation details.
    modes = {r.scenario.removesuffix("extract_faithful_background") for r in EXTRACTIONS}
    assert len(EXTRACTIONS) == 6 and modes >= {"", "default_", "events_"}
    for recording in EXTRACTIONS:
        names = [span.name for span in spans_of(recording)]
        assert sorted(names) == ["chat", "memory.extract"]


@pytest.mark.parametrize("recording", EXTRACTIONS, ids=lambda r: r.scenario)
def test_the_background_extraction_is_no_interaction(recording: Recording) -> None:
    """The model call that distils the conversation into facts to remember answers nobody: it is counted with
    the traces that hold no interaction (an expected skip, not a warning), never scored, and says why."""
    found = extracted(spans_of(recording))
    assert found.interactions == []
    [skip] = found.skips
    assert (skip.reason, skip.expected, skip.convention) == (ExtractSkip.NOT_RAG, True, "strands")
    assert "memory.extract" in skip.detail and "not an interaction" in skip.detail
