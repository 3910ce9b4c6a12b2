"""Strands Agents' memory, recorded from the real library (fixtures/strands_memory): the entries its
`MemoryManager` found (a `memory.search` span) are the documents, whether its injection put them into the
prompt or the model called its `search_memory` tool (read once, from the search)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, recordings, spans_of, without

RECORDED = {r.scenario: r for r in recordings() if r.source == "strands_memory"}
MEMORY_RESULTS = "content"  # a memory.search span's entries, as Strands writes them on the span


@pytest.mark.parametrize("recording", RECORDED.values(), ids=lambda r: r.scenario)
def test_the_memorys_entries_are_the_documents_read_once(recording: Recording) -> None:
    interaction = read_as_run(recording, "strands", "invoke_agent aurora_support")
    assert {s.kind for s in interaction.context_sources} == {"retriever"}
    [search] = [s for s in spans_of(recording) if s.name == "memory.search"]
    assert {s.span_id for s in interaction.context_sources} == {search.span_id}


def test_injected_entries_the_search_did_not_record_leave_nothing_to_judge() -> None:
    # Memory injection puts the entries into the prompt text only, which is never split into documents.
    found = extracted(without(spans_of(RECORDED["injected_unfaithful"]), MEMORY_RESULTS))
    assert found.interactions == [] and [s.reason for s in found.skips] == ["empty_context"]
