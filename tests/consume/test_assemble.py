"""Trace assembly: spans wait for the rest of their trace, within bounds, and never past a commit."""

from __future__ import annotations

import gc
import itertools
from collections.abc import Callable

import pytest

from tracescore import semconv
from tracescore.consume import AssemblySettings, TraceAssembler
from tracescore.extract import DEFAULT_RECOGNIZERS, extract
from tracescore.model import DecodedSpan, Trace

_ids = itertools.count(1)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ROOT = "ffffffffffff0000"  # never one of the counted ids
CLIENT, SERVER = 3, 2


def span(
    trace: str,
    *,
    root: bool = False,
    sid: str | None = None,
    parent: str = ROOT,
    kind: int = 1,
    attributes: dict[str, object] | None = None,
) -> DecodedSpan:
    """A root has span id ROOT unless `sid` says otherwise; other spans are its children by default."""
    return DecodedSpan(
        trace_id=trace.ljust(32, "0"),
        span_id=sid or (ROOT if root else format(next(_ids), "016x")),
        parent_span_id=None if root else parent,
        name="s",
        service_name="svc",
        scope_name="lib",
        attributes=attributes or {},
        end_time_unix_nano=1,
        kind=kind,
    )


def assembler(**settings: float) -> tuple[TraceAssembler, Clock]:
    clock = Clock()
    return TraceAssembler(AssemblySettings(**settings), clock=clock), clock


def test_a_trace_is_ready_a_grace_period_after_its_root_arrived() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add([span("a")], "p0", 10, 100)
    asm.add([span("a", root=True)], "p0", 11, 100)
    clock.now += 1.9
    assert asm.ready() == []
    clock.now += 0.2
    [trace] = asm.ready()
    assert len(trace.spans) == 2 and trace.incomplete is None
    assert asm.buffered_traces == 0 and asm.buffered_bytes == 0


def test_a_child_arriving_after_its_root_within_the_grace_period_joins_the_trace() -> None:
    asm, clock = assembler(grace_s=2)
    asm.add([span("a", root=True)], "p0", 1, 10)
    clock.now += 1.5
    asm.add([span("a")], "p0", 2, 10)
    clock.now += 1.5
    assert asm.ready() == [], "the late child restarted the grace period"
    clock.now += 1
    [trace] = asm.ready()
    assert len(trace.spans) == 2


def test_a_trace_without_a_root_is_released_after_the_max_wait_and_marked() -> None:
    asm, clock = assembler(grace_s=1, max_wait_s=10)
    asm.add([span("a"), span("a")], "p0", 5, 200)
    clock.now += 9
    assert asm.ready() == []
    clock.now += 1
    [trace] = asm.ready()
    assert trace.incomplete == "no_root_span" and len(trace.spans) == 2


def test_duplicate_span_ids_are_counted_and_kept_once() -> None:
    asm, _ = assembler(grace_s=0)
    asm.add([span("a", root=True, sid="00000000000000aa")], "p0", 1, 10)
    asm.add([span("a", root=True, sid="00000000000000aa")], "p0", 2, 10)
    [trace] = asm.ready()
    assert len(trace.spans) == 1 and asm.counts["duplicate_spans"] == 1


def test_spans_of_a_released_trace_no_longer_kept_are_counted_late_not_buffered_again() -> None:
    asm, _ = assembler(grace_s=0, rejoin_traces=0)
    asm.add([span("a", root=True)], "p0", 1, 10)
    assert len(asm.ready()) == 1
    asm.add([span("a")], "p0", 2, 10)
    assert asm.buffered_traces == 0 and asm.counts["late_spans"] == 1


def test_low_watermarks_hold_the_oldest_message_of_every_buffered_trace() -> None:
    asm, clock = assembler(grace_s=5)
    asm.add([span("a")], "p0", 10, 10)
    asm.add([span("b", root=True)], "p0", 11, 10)
    asm.add([span("c", root=True)], "p1", 3, 10)
    asm.add([span("a", root=True)], "p0", 12, 10)
    assert asm.low_watermarks() == {"p0": 10, "p1": 3}
    clock.now += 5
    asm.ready()
    assert asm.low_watermarks() == {}, "released traces hold nothing"


def test_memory_bounds_release_the_least_recently_fed_trace_early() -> None:
    asm, _ = assembler(max_traces=2, grace_s=60)
    assert asm.add([span("a")], "p0", 1, 10) == []
    assert asm.add([span("b")], "p0", 2, 10) == []
    asm.add([span("a")], "p0", 3, 10)  # a is now the most recently fed
    [evicted] = asm.add([span("c")], "p0", 4, 10)
    assert evicted.trace_id.startswith("b") and evicted.incomplete == "evicted_memory"
    assert asm.counts["released_evicted_memory"] == 1 and asm.buffered_traces == 2


def test_byte_bound_is_kept() -> None:
    asm, _ = assembler(max_bytes=1000, grace_s=60)
    for i in range(20):
        asm.add([span(f"{i:02x}")], "p0", i, 300)
        assert asm.buffered_bytes <= 1000
    assert asm.counts["released_evicted_memory"] == 17


def test_a_trace_reaching_the_span_limit_is_released_at_once() -> None:
    asm, _ = assembler(max_spans_per_trace=100, grace_s=60)
    released = asm.add([span("a") for _ in range(150)], "p0", 1, 15_000)
    assert [len(t.spans) for t in released] == [100]
    assert released[0].incomplete == "too_many_spans"
    assert asm.counts["late_spans"] == 50, "the rest are counted, not silently dropped"


def test_ten_thousand_spans_in_one_trace_assemble() -> None:
    asm, _ = assembler(grace_s=0)
    spans = [span("big") for _ in range(9_999)] + [span("big", root=True)]
    for start in range(0, len(spans), 1000):
        asm.add(spans[start : start + 1000], "p0", start, 100_000)
    [trace] = asm.ready()
    assert len(trace.spans) == 10_000 and trace.incomplete is None


def test_clear_forgets_everything_so_replayed_messages_are_assembled_again() -> None:
    asm, _ = assembler(grace_s=0)
    asm.add([span("a", root=True)], "p0", 1, 10)
    asm.ready()
    asm.add([span("b")], "p0", 2, 10)
    assert asm.clear() == 1
    assert asm.low_watermarks() == {} and asm.buffered_bytes == 0
    asm.add([span("a", root=True)], "p0", 1, 10)
    assert len(asm.ready()) == 1, "a replayed trace is not 'late'"


def test_release_all_reads_everything_buffered() -> None:
    asm, _ = assembler(grace_s=60)
    asm.add([span("a", root=True)], "p0", 1, 10)
    asm.add([span("b")], "p0", 2, 10)
    released = {t.trace_id[0]: t for t in asm.release_all()}
    assert released["a"].incomplete is None and released["b"].incomplete == "no_root_span"
    assert asm.buffered_traces == 0


@pytest.mark.parametrize("field", ["max_traces", "max_bytes", "max_spans_per_trace"])
def test_bounds_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        AssemblySettings(**{field: 0})


# --- waiting for remote work ------------------------------------------------------------------------------


def test_a_client_call_without_its_callee_waits_past_the_grace_and_joins_when_the_callee_reports() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    call = "00000000000000c1"
    asm.add([span("a", root=True), span("a", sid=call, kind=CLIENT)], "p0", 1, 100)
    clock.now += 5
    assert asm.ready() == [], "the callee's spans have not arrived"
    asm.add([span("a", parent=call, kind=SERVER), span("a", parent=call, kind=SERVER)], "p0", 2, 100)
    clock.now += 2
    [trace] = asm.ready()
    assert len(trace.spans) == 4 and trace.incomplete is None
    assert asm.counts["remote_work_not_arrived"] == 0


def test_an_http_call_without_a_span_kind_is_waited_for_too() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add([span("a", root=True), span("a", kind=0, attributes={"http.request.method": "GET"})], "p", 1, 1)
    clock.now += 5
    assert asm.ready() == []


def test_a_span_whose_parent_has_not_arrived_holds_its_trace() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add([span("a", root=True), span("a", parent="0000000000000bad")], "p0", 1, 100)
    clock.now += 5
    assert asm.ready() == []
    asm.add([span("a", sid="0000000000000bad")], "p0", 2, 100)
    clock.now += 2
    [trace] = asm.ready()
    assert len(trace.spans) == 3 and trace.incomplete is None


@pytest.mark.parametrize(
    "attributes",
    [
        {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"},
        {"llm.request.type": "chat"},
        {"db.system": "postgresql"},
        {"openinference.span.kind": "EMBEDDING"},
    ],
)
def test_llm_embedding_and_database_client_calls_are_not_waited_for(attributes: dict[str, object]) -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add([span("a", root=True), span("a", kind=CLIENT, attributes=attributes)], "p0", 1, 100)
    clock.now += 2
    assert len(asm.ready()) == 1, "an LLM provider or a database sends no spans to wait for"


def test_an_http_client_under_an_llm_span_is_not_waited_for() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    llm = "00000000000011aa"
    spans = [
        span("a", root=True),
        span("a", sid=llm, attributes={"openinference.span.kind": "LLM"}),
        span("a", parent=llm, kind=CLIENT, attributes={"http.request.method": "POST"}),
    ]
    asm.add(spans, "p0", 1, 100)
    clock.now += 2
    assert len(asm.ready()) == 1


def test_a_callee_that_never_reports_is_read_at_the_max_wait_and_counted() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add([span("a", root=True), span("a", kind=CLIENT)], "p0", 7, 100)
    asm.add([span("b", root=True)], "p0", 8, 100)
    clock.now += 2
    [other] = asm.ready()
    assert other.trace_id.startswith("b"), "a trace that waits for nothing keeps the short grace"
    assert asm.low_watermarks() == {"p0": 7}, "the waiting trace's offset stays uncommitted"
    clock.now += 27.9
    assert asm.ready() == []
    clock.now += 0.2
    [trace] = asm.ready()
    assert trace.incomplete == "remote_work_not_arrived" and len(trace.spans) == 2
    assert asm.counts["remote_work_not_arrived"] == 1


def test_waiting_for_remote_work_can_be_switched_off() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30, wait_for_remote=False)
    asm.add([span("a", root=True), span("a", kind=CLIENT)], "p0", 1, 100)
    clock.now += 2
    [trace] = asm.ready()
    assert trace.incomplete is None


def test_release_all_says_which_trace_still_waited_for_remote_work() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add([span("a", root=True), span("a", kind=CLIENT)], "p0", 1, 100)
    clock.now += 3
    asm.ready()
    [trace] = asm.release_all()
    assert trace.incomplete == "remote_work_not_arrived"


# --- late spans of a trace already read -------------------------------------------------------------------

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
    assert revisions == [] and [s.reason for s in skips] == ["empty_context"]
    asm.add([retriever("a", "It lasts 14 hours.")], "p0", 2, 100)
    clock.now += 2
    [again] = asm.ready()
    assert judge(asm, again) == [(ROOT, 0, None)], "nothing was recorded before: revision 0"


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


def test_revoked_partitions_take_their_buffered_traces_and_the_handed_over_ones_with_them() -> None:
    asm, _ = assembler(grace_s=0)
    asm.add([span("a", root=True)], "p0", 1, 10)
    asm.ready()  # a is released (and being scored, say)
    asm.add([span("b")], "p0", 2, 10)
    asm.add([span("c")], "p1", 7, 10)
    assert asm.traces_on({"p0"}) == {"p0": ["b".ljust(32, "0")]}

    assert asm.revoke({"p0"}, handed_over=["a".ljust(32, "0")]) == 1

    assert asm.low_watermarks() == {"p1": 7}, "a kept partition's traces stay"
    asm.add([span("a", root=True)], "p0", 1, 10)  # given back later and read again: a is new, not late
    assert [t.trace_id for t in asm.ready()] == ["a".ljust(32, "0")]


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


def test_a_trace_that_waited_for_remote_work_is_released_with_the_others_once_it_came() -> None:
    asm, clock = assembler(grace_s=2)
    call = "c000000000000001"
    asm.add([span("a", root=True), span("a", sid=call, kind=CLIENT)], "p0", 1, 100)
    asm.add([span("b", root=True)], "p0", 2, 100)
    clock.now += 2
    assert [t.trace_id[0] for t in asm.ready()] == ["b"], "a waits for its callee's spans"
    asm.add([span("a", parent=call, kind=SERVER), span("e", root=True)], "p0", 3, 100)
    clock.now += 2
    released = asm.ready()
    assert [t.trace_id[0] for t in released] == ["a", "e"] and released[0].incomplete is None
    assert asm.counts["released_complete"] == 3 and asm.buffered_traces == 0
