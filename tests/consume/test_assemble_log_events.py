"""Trace assembly of log events (GenAI events a producer wrote as OTel log records): each waits with its
trace like a span and is added to its span's events when the trace is read, whether it arrived before its
span, after it, or after the trace was read; one whose span never arrives is counted."""

from __future__ import annotations

import itertools
import json

import pytest
from assembly_helpers import ROOT, assembler, span

from tracescore import semconv
from tracescore.consume import AssemblyCount
from tracescore.consume._decode import LogEvent
from tracescore.extract import extract
from tracescore.model import MAX_SPAN_EVENT_BYTES, MAX_SPAN_EVENTS, DecodedSpan, ExtractSkip, SpanEvent, Trace

DETAILS = "gen_ai.client.inference.operation.details"
CHAT = "00000000000000c1"
QUESTION, ANSWER = "How long does the battery last?", "It lasts 14 hours."
DOCUMENT = "The Aurora X2 battery lasts 14 hours on a single charge."


def chat(trace: str) -> DecodedSpan:
    """A GenAI chat span with content capture EVENT_ONLY: no message on it."""
    return span(
        trace,
        root=True,
        sid=CHAT,
        attributes={semconv.GEN_AI_OPERATION_NAME: "chat", semconv.GEN_AI_REQUEST_MODEL: "aurora-chat-1"},
    )


def details(trace: str, *, sid: str = CHAT, time: int = 10, answer: str = ANSWER) -> LogEvent:
    """The util's operation-details event, as the decoder gives it: the chat's messages."""
    attributes = {
        semconv.GEN_AI_INPUT_MESSAGES: json.dumps([
            {"role": "system", "parts": [{"type": "text", "content": f"Context:\n{DOCUMENT}"}]},
            {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        ]),
        semconv.GEN_AI_OUTPUT_MESSAGES: json.dumps([
            {"role": "assistant", "parts": [{"type": "text", "content": answer}]}
        ]),
    }  # fmt: skip
    return LogEvent(trace.ljust(32, "0"), sid, SpanEvent(DETAILS, attributes, time), 400)


def read(trace: Trace) -> tuple[str | None, str | None]:
    """The (question, answer) the trace's interaction is read with; (None, skip reason) when skipped."""
    found = extract(trace)
    if not found.interactions:
        [skip] = found.skips
        return None, skip.reason
    [interaction] = found.interactions
    return interaction.record.query, interaction.record.answer


def test_an_event_arriving_before_or_after_its_span_is_read_as_its_span_event_alike() -> None:
    before, _ = assembler(grace_s=2)
    before.add_events([details("a")], "p0", 1, 500)
    before.add([chat("a")], "p0", 2, 100)
    after, _ = assembler(grace_s=2)
    after.add([chat("b")], "p0", 1, 100)
    after.add_events([details("b")], "p0", 2, 500)

    [first] = before.release_all()
    [second] = after.release_all()

    assert first.by_id[CHAT].events == second.by_id[CHAT].events == (details("a").event,)
    assert read(first) == read(second) == (QUESTION, ANSWER)
    assert before.counts[AssemblyCount.LOG_EVENTS] == after.counts[AssemblyCount.LOG_EVENTS] == 1


def test_the_span_read_is_a_new_one_and_its_own_events_keep_their_place_in_time_order() -> None:
    asm, _ = assembler()
    own = chat("a")
    own.events = (SpanEvent("gen_ai.user.message", {}, 5), SpanEvent("gen_ai.choice", {}, 20))
    asm.add([own], "p0", 1, 100)
    asm.add_events([details("a", time=10)], "p0", 2, 500)

    [trace] = asm.release_all()

    names = [event.name for event in trace.by_id[CHAT].events]
    assert names == ["gen_ai.user.message", DETAILS, "gen_ai.choice"]
    assert own.events == (SpanEvent("gen_ai.user.message", {}, 5), SpanEvent("gen_ai.choice", {}, 20))
    assert trace.spans == (trace.by_id[CHAT],)


def test_an_event_after_its_trace_was_read_rebuilds_it_and_the_changed_interaction_is_scored_again() -> None:
    asm, clock = assembler(grace_s=2)
    asm.add([chat("a")], "p0", 1, 100)
    clock.now += 2
    [first] = asm.ready()
    found = extract(first)
    revisions, skips = asm.revise(first, found.interactions, found.skips)
    assert (revisions, [s.reason for s in skips]) == ([], [ExtractSkip.CONTENT_NOT_CAPTURED])

    asm.add_events([details("a")], "p0", 2, 500)
    clock.now += 2
    [rebuilt] = asm.ready()

    assert read(rebuilt) == (QUESTION, ANSWER)
    found = extract(rebuilt)
    [revision], _ = asm.revise(rebuilt, found.interactions, found.skips)
    assert revision.interaction.record.answer == ANSWER
    assert asm.counts[AssemblyCount.LATE_SPANS_REJOINED] == 1


def test_a_replayed_event_is_kept_once_before_and_after_its_trace_was_read() -> None:
    asm, clock = assembler(grace_s=2)
    asm.add_events([details("a")], "p0", 1, 500)
    asm.add_events([details("a")], "p0", 1, 500)  # the same message read again
    asm.add([chat("a")], "p0", 2, 100)
    clock.now += 2
    [trace] = asm.ready()
    asm.add_events([details("a")], "p0", 1, 500)  # and again once the trace was read

    assert len(trace.by_id[CHAT].events) == 1
    assert asm.buffered_traces == 0
    assert asm.counts[AssemblyCount.DUPLICATE_LOG_EVENTS] == 2


def test_an_event_of_a_trace_no_longer_kept_is_counted_late() -> None:
    asm, clock = assembler(grace_s=2, rejoin_traces=0)
    asm.add([chat("a")], "p0", 1, 100)
    clock.now += 2
    asm.ready()

    asm.add_events([details("a")], "p0", 2, 500)

    assert asm.buffered_traces == 0
    assert asm.counts[AssemblyCount.LATE_LOG_EVENTS] == 1


def test_an_event_whose_span_never_arrives_is_counted_once_and_joins_a_late_span() -> None:
    asm, clock = assembler(grace_s=2)
    other = "00000000000000d2"
    asm.add([chat("a")], "p0", 1, 100)
    asm.add_events([details("a", sid=other)], "p0", 2, 500)
    clock.now += 2
    [first] = asm.ready()
    assert all(s.events == () for s in first.spans)
    assert asm.counts[AssemblyCount.LOG_EVENTS_WITHOUT_SPAN] == 1

    asm.add([span("a", parent=CHAT)], "p0", 3, 100)  # another late span: the trace read again without it
    clock.now += 2
    asm.ready()
    assert asm.counts[AssemblyCount.LOG_EVENTS_WITHOUT_SPAN] == 1  # not counted again

    asm.add([span("a", sid=other, parent=CHAT)], "p0", 4, 100)
    clock.now += 2
    [rebuilt] = asm.ready()

    assert rebuilt.by_id[other].events == (details("a", sid=other).event,)
    assert asm.counts[AssemblyCount.LOG_EVENTS_WITHOUT_SPAN] == 1


def test_events_whose_spans_come_after_the_maximum_wait_still_join_them() -> None:
    asm, clock = assembler(grace_s=2, max_wait_s=30)
    asm.add_events([details("a")], "p0", 1, 500)
    clock.now += 29
    assert asm.ready() == []

    clock.now += 1
    assert asm.ready() == []  # no span to read: nothing released, the events remembered
    assert asm.buffered_traces == 0
    assert asm.counts[AssemblyCount.LOG_EVENTS_WITHOUT_SPAN] == 1
    assert AssemblyCount.RELEASED_NO_ROOT_SPAN not in asm.counts

    asm.add([chat("a")], "p0", 2, 100)
    clock.now += 2
    [trace] = asm.ready()
    assert read(trace) == (QUESTION, ANSWER)


def test_events_count_toward_max_bytes_and_hold_their_offsets() -> None:
    asm, _ = assembler(max_bytes=1_000)
    asm.add([chat("a")], "p0", 7, 100)
    asm.add_events([details("a")], "p1", 3, 500)

    assert asm.buffered_bytes == 600
    assert asm.low_watermarks() == {"p0": 7, "p1": 3}

    asm.add_events([details("b")], "p1", 4, 500)  # past max_bytes: the least recently fed is read early
    assert asm.buffered_traces == 1
    assert asm.low_watermarks() == {"p1": 4}


def test_an_event_restarts_its_rooted_traces_grace() -> None:
    asm, clock = assembler(grace_s=2)
    asm.add([chat("a")], "p0", 1, 100)
    clock.now += 1.5
    asm.add_events([details("a")], "p0", 2, 500)
    clock.now += 1.5
    assert asm.ready() == []

    clock.now += 0.5
    [trace] = asm.ready()
    assert read(trace) == (QUESTION, ANSWER)


@pytest.mark.parametrize(
    ("count", "size", "kept"),
    [
        pytest.param(MAX_SPAN_EVENTS + 5, 10, MAX_SPAN_EVENTS, id="past-the-count"),
        pytest.param(5, MAX_SPAN_EVENT_BYTES // 2, 2, id="past-the-bytes"),
    ],
)
def test_a_spans_events_stay_within_the_bounds_the_latest_kept_the_rest_counted(
    count: int, size: int, kept: int
) -> None:
    asm, _ = assembler()
    asm.add([chat("a")], "p0", 1, 100)
    times = itertools.count(1)
    events = [
        LogEvent("a".ljust(32, "0"), CHAT, SpanEvent(f"gen_ai.n{i}", {}, next(times)), size)
        for i in range(count)
    ]
    asm.add_events(events, "p0", 2, 500)

    [trace] = asm.release_all()

    span_read = trace.by_id[CHAT]
    assert span_read.events == tuple(e.event for e in events[-kept:])
    assert span_read.events_dropped == count - kept


def test_unrelated_traces_and_root_span_ids_are_untouched() -> None:
    asm, _ = assembler()
    plain = span("c", root=True)
    asm.add([plain], "p0", 1, 100)
    asm.add_events([details("a")], "p0", 2, 500)

    traces = {t.trace_id[:1]: t for t in asm.release_all()}

    assert traces["c"].by_id[ROOT] is plain
