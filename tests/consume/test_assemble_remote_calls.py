"""Trace assembly: a trace that called remote work (a client span, a span whose parent has not arrived)
waits past its grace for the callee's spans, up to the max wait; calls that report no spans of their own
(LLM, embedding, database clients) are not waited for."""

from __future__ import annotations

import pytest
from assembly_helpers import CLIENT, SERVER, assembler, span


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
