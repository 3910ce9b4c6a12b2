"""Trace assembly: a span arriving after its trace was read rebuilds the trace, and a changed interaction is
scored again as the next revision; the memory of released traces that makes this possible is bounded."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest
from assembly_helpers import ROOT, assembler, span

from tracescore import semconv
from tracescore.consume import TraceAssembler
from tracescore.extract import DEFAULT_RECOGNIZERS, extract
from tracescore.model import DecodedSpan, ExtractSkip, Trace

QUESTION, ANSWER = "How long does the battery last?", "14 hours."


def rag_span(trace: str, documents: list[str], *, sid: str = ROOT) -> DecodedSpan:
    """A `@tracescore.rag` span (parent: the trace's root)."""
    attributes: dict[str, object] = {semconv.INPUT_VALUE: QUESTION, semconv.OUTPUT_VALUE: ANSWER}
    for i, doc in enumerate(documents):
        attributes[semconv.document_content_key(i)] = doc
    made = span(trace, sid=sid, root=sid == ROOT, attributes=attributes)
    made.scope_name = semconv.SDK_SCOPE
    return made


def judge(asm: TraceAssembler, trace: Trace) -> list[tuple[str, int, str | None]]:
    found = extract(trace)
    revisions, _ = asm.revise(trace, found.interactions, found.skips)
    return [(r.interaction.span.span_id, r.revision, r.supersedes) for r in revisions]


def test_a_late_span_that_changes_the_documents_rebuilds_the_trace_as_the_next_revision() -> None:
    asm, clock = assembler(grace_s=2)
    rag = "00000000000000aa"
    asm.add([span("a", root=True), rag_span("a", ["It lasts 14 hours."], sid=rag)], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    assert judge(asm, first) == [(rag, 0, None)]

    late = rag_span("a", [], sid=rag)  # same span id would be a duplicate: a new span adds documents
    late.span_id, late.parent_span_id = "00000000000000bb", rag
    late.attributes = {semconv.RETRIEVAL_DOCUMENTS + ".0.document.content": "It charges in 90 minutes."}
    late.scope_name = "retriever"
    asm.add([late], "p0", 9, 50)
    assert asm.low_watermarks() == {"p0": 9}, "only the late message's offset is held"
    clock.now += 2
    [again] = asm.ready()
    assert len(again.spans) == 3, "the whole trace, not the late span alone"
    assert judge(asm, again) == [] and asm.counts["late_spans_unchanged"] == 1, (
        "a span the interaction does not read changes nothing"
    )


def test_what_a_reading_judged_is_kept_as_one_flat_record_the_collector_stops_tracking() -> None:
    """Every trace read is kept for late spans: its record holds strings and counts only, no nested
    containers, so the garbage collector's first pass stops tracking it (each object kept costs every young
    collection that meets it)."""
    asm, clock = assembler(grace_s=2)
    asm.add([rag_span("a", ["It lasts 14 hours.", "It charges in 90 minutes."])], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    assert judge(asm, first) == [(ROOT, 0, None)]
    [memory] = asm._rejoin.values()
    assert memory.judged is not None
    [record] = memory.judged
    assert not [part for part in record if isinstance(part, tuple | list | set | frozenset | dict)], record
    gc.collect()
    assert not gc.is_tracked(record) and not gc.is_tracked(memory.judged)


def counting_readings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The trace ids tracescore's own recogniser (the first one every trace meets) reads, in order."""
    ours = DEFAULT_RECOGNIZERS[0]
    assert ours.name == "tracescore"
    seen: list[str] = []
    for method in ("find", "recognize"):  # find: what extract calls; recognize: the Recognizer protocol
        read = getattr(ours, method, None)
        if read is None:
            continue

        def counted(trace: Trace, read: Callable[[Trace], object] = read) -> object:
            seen.append(trace.trace_id)
            return read(trace)

        monkeypatch.setattr(ours, method, counted)
    return seen


@pytest.mark.parametrize("late_in_the_same_batch", [False, True])
def test_extract_runs_once_per_reading_and_a_late_span_still_revises_the_first_one(
    monkeypatch: pytest.MonkeyPatch, late_in_the_same_batch: bool
) -> None:
    """What the first reading judged is kept from that reading: the late span's rebuild never extracts it
    again, even when the late span comes before the first reading was revised (one batch held both)."""
    readings = counting_readings(monkeypatch)
    asm, clock = assembler(grace_s=2)
    rag = "00000000000000aa"
    asm.add([span("a", root=True), rag_span("a", ["It lasts 14 hours."], sid=rag)], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    late = rag_span("a", ["It lasts 14 hours.", "It charges in 90 minutes."], sid="00000000000000bb")
    late.parent_span_id = ROOT  # a second interaction of the trace, late
    if late_in_the_same_batch:
        asm.add([late], "p0", 9, 50)
    assert judge(asm, first) == [(rag, 0, None)]
    if not late_in_the_same_batch:
        asm.add([late], "p0", 9, 50)
    clock.now += 2
    [again] = asm.ready()
    assert judge(asm, again) == [(late.span_id, 0, None)], "the first interaction is not scored again"
    assert readings == [first.trace_id, again.trace_id], "one extraction per reading"


def openinference(trace: str, kind: str, *, sid: str | None = None, **attributes: str) -> DecodedSpan:
    """An OpenInference span: the CHAIN is the root, the others its children."""
    extra = {key.replace("_", "."): value for key, value in attributes.items()}
    made = span(trace, root=kind == "CHAIN", sid=sid, attributes={"openinference.span.kind": kind, **extra})
    made.scope_name = "openinference.instrumentation.langchain"
    return made


def retriever(trace: str, document: str) -> DecodedSpan:
    made = openinference(trace, "RETRIEVER")
    made.attributes = {**made.attributes, "retrieval.documents.0.document.content": document}
    return made


def chain(trace: str) -> DecodedSpan:
    return openinference(trace, "CHAIN", input_value=QUESTION, output_value=ANSWER)


def test_a_changed_interaction_is_scored_again_and_supersedes_the_earlier_revision() -> None:
    asm, clock = assembler(grace_s=2)
    asm.add([chain("a"), retriever("a", "It lasts 14 hours.")], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    assert judge(asm, first) == [(ROOT, 0, None)]
    asm.add([retriever("a", "It charges in 90 minutes.")], "p0", 2, 100)  # a second retrieval, late
    clock.now += 2
    [again] = asm.ready()
    [(anchor, revision, supersedes)] = judge(asm, again)
    assert (anchor, revision) == (ROOT, 1)
    assert supersedes == f"{first.trace_id}:{ROOT}:0"
    assert asm.counts["rescored"] == 1 and asm.counts["late_spans_rejoined"] == 1
    asm.add([retriever("a", "A third document.")], "p0", 3, 100)
    clock.now += 2
    [third] = asm.ready()
    assert judge(asm, third) == [(ROOT, 2, f"{first.trace_id}:{ROOT}:1")]


def test_an_interaction_first_skipped_is_scored_when_its_documents_arrive_late() -> None:
    asm, clock = assembler(grace_s=2)
    asm.add([chain("a")], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    found = extract(first)
    revisions, skips = asm.revise(first, found.interactions, found.skips)
    assert revisions == [] and [s.reason for s in skips] == [ExtractSkip.EMPTY_CONTEXT]
    asm.add([retriever("a", "It lasts 14 hours.")], "p0", 2, 100)
    clock.now += 2
    [again] = asm.ready()
    assert judge(asm, again) == [(ROOT, 0, None)], "nothing was recorded before: revision 0"


def test_a_skipped_trace_rebuilt_by_its_late_root_is_not_counted_skipped_again() -> None:
    """Read early without its root (a slow poll under load), the trace's skip is anchored on the LLM span;
    the late root anchors the same skip on itself: one interaction not scored, said once."""
    asm, clock = assembler(grace_s=2, max_wait_s=5)
    asm.add([openinference("a", "LLM", input_value=QUESTION, output_value=ANSWER)], "p0", 1, 100)
    clock.now += 6
    [first] = asm.ready()
    found = extract(first)
    _, skips = asm.revise(first, found.interactions, found.skips)
    assert [s.reason for s in skips] == [ExtractSkip.EMPTY_CONTEXT]
    asm.add([chain("a")], "p0", 2, 100)
    clock.now += 6
    [again] = asm.ready()
    found = extract(again)
    assert [s.span.span_id for s in found.skips if s.span] == [ROOT], "the skip moved to the root"
    assert asm.revise(again, found.interactions, found.skips) == ([], [])
    asm.add([chain("b"), openinference("b", "LLM", input_value=QUESTION, output_value=ANSWER)], "p0", 3, 100)
    clock.now += 6
    [other] = asm.ready()
    found = extract(other)
    _, skips = asm.revise(other, found.interactions, found.skips)
    assert len(skips) == len(found.skips) >= 1, "another trace's skips are its own"


def test_rejoin_memory_is_bounded_and_a_forgotten_trace_counts_its_late_spans() -> None:
    asm, _ = assembler(grace_s=0, rejoin_traces=2)
    for name in "abc":
        asm.add([span(name, root=True)], "p0", 1, 100)
        asm.ready()
    asm.add([span("a")], "p0", 2, 10)  # "a" was the least recently released: forgotten
    assert asm.counts["late_spans"] == 1 and asm.buffered_traces == 0
    asm.add([span("c")], "p0", 3, 10)
    assert asm.buffered_traces == 1
    [trace] = asm.ready()
    assert len(trace.spans) == 2


def test_rejoin_memory_is_bounded_by_bytes() -> None:
    asm, _ = assembler(grace_s=0, rejoin_bytes=250)
    for name in "abc":
        asm.add([span(name, root=True)], "p0", 1, 100)
        asm.ready()
    asm.add([span("a")], "p0", 2, 10)
    assert asm.counts["late_spans"] == 1, "two traces of 100 bytes fit, the oldest was forgotten"


def test_a_trace_read_early_for_its_size_is_not_rebuilt_by_its_remaining_spans() -> None:
    asm, _ = assembler(max_spans_per_trace=10, grace_s=60)
    released = asm.add([span("a") for _ in range(15)], "p0", 1, 1500)
    assert len(released) == 1 and asm.counts["late_spans"] == 5 and asm.buffered_traces == 0


def test_a_rebuilt_trace_read_early_for_memory_is_still_revised_not_scored_as_new() -> None:
    asm, clock = assembler(grace_s=2, max_traces=1)
    asm.add([chain("a"), retriever("a", "It lasts 14 hours.")], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    assert judge(asm, first) == [(ROOT, 0, None)]
    asm.add([retriever("a", "It charges in 90 minutes.")], "p0", 2, 100)
    [evicted] = asm.add([span("b", root=True)], "p0", 3, 100)
    assert evicted.incomplete == "evicted_memory"
    assert judge(asm, evicted) == [(ROOT, 1, f"{first.trace_id}:{ROOT}:0")]
    asm.add([span("a")], "p0", 4, 10)
    assert asm.counts["late_spans"] == 1, "a trace read early is not rebuilt again"


def test_rejoining_does_not_depend_on_remembering_released_ids() -> None:
    asm, _ = assembler(grace_s=0, remember_released=0)
    asm.add([span("a", root=True)], "p0", 1, 100)
    asm.ready()
    asm.add([span("a")], "p0", 2, 10)
    [trace] = asm.ready()
    assert len(trace.spans) == 2


def test_spans_after_a_rebuilt_trace_was_read_early_for_its_size_do_not_lose_its_revision() -> None:
    asm, clock = assembler(grace_s=2, max_spans_per_trace=3)
    asm.add([chain("a"), retriever("a", "It lasts 14 hours.")], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    assert judge(asm, first) == [(ROOT, 0, None)]
    late = [retriever("a", "It charges in 90 minutes."), span("a"), span("a")]
    [early] = asm.add(late, "p0", 2, 300)  # the third span of the rebuilt trace reads it at once
    assert early.incomplete == "too_many_spans" and asm.counts["late_spans"] == 2
    assert judge(asm, early) == [(ROOT, 1, f"{first.trace_id}:{ROOT}:0")]


def test_traces_released_together_keep_the_newest_in_memory_within_both_bounds() -> None:
    # Released in one call, as the consumer releases every trace whose grace is over: the late-span memory
    # keeps the most recently released that fit its bounds, and its bytes follow what it holds.
    asm, _ = assembler(grace_s=0, rejoin_traces=3, rejoin_bytes=250)
    for name in "abcd":
        asm.add([span(name, root=True)], "p0", 1, 100)
    assert [t.trace_id[0] for t in asm.ready()] == list("abcd")
    asm.add([span("a"), span("b")], "p0", 2, 20)
    assert asm.counts["late_spans"] == 2, "a and b were forgotten: only two of 100 bytes fit in 250"
    asm.add([span("c"), span("d")], "p0", 3, 20)
    assert asm.counts["late_spans"] == 2 and asm.buffered_traces == 2
    assert sorted(len(t.spans) for t in asm.ready()) == [2, 2]
