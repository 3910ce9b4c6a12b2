"""Trace assembly: spans wait a grace period for the rest of their trace, within memory bounds, and never
past a commit; a revoked partition takes its traces with it."""

from __future__ import annotations

import pytest
from assembly_helpers import assembler, span

from tracescore.consume import AssemblySettings


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


def test_a_trace_read_from_two_partitions_holds_the_lowest_offset_of_each() -> None:
    # Rare (the SDK's per-partition layout with a trace's spans exported by two processes) but possible: each
    # partition's commit waits for the trace, and a revoke of either takes it.
    asm, clock = assembler(grace_s=5)
    asm.add([span("a")], "p0", 10, 10)
    asm.add([span("a")], "p0", 8, 10)  # read again lower (a replay): the lowest is held
    asm.add([span("a")], "p1", 4, 10)
    asm.add([span("a", root=True)], "p1", 6, 10)
    asm.add([span("a")], "p0", 12, 10)
    assert asm.low_watermarks() == {"p0": 8, "p1": 4}
    assert asm.traces_on({"p1"}) == {"p1": ["a".ljust(32, "0")]}
    clock.now += 5
    [trace] = asm.ready()
    assert trace.offsets == {"p0": 8, "p1": 4}
    assert asm.low_watermarks() == {}

    asm.add([span("b")], "p0", 20, 10)
    asm.add([span("b")], "p1", 9, 10)
    assert asm.revoke({"p1"}, handed_over=[]) == 1, "revoking either partition takes the trace"
    assert asm.low_watermarks() == {}


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


def test_a_one_span_trace_at_a_limit_of_one_span_is_released_at_once() -> None:
    asm, _ = assembler(max_spans_per_trace=1, grace_s=60)
    [trace] = asm.add([span("a", root=True)], "p0", 1, 100)
    assert len(trace.spans) == 1 and trace.incomplete == "too_many_spans"
    assert asm.buffered_traces == 0 and asm.buffered_bytes == 0


def test_a_one_span_trace_read_again_after_a_rebalance_goes_on_without_a_new_grace() -> None:
    asm, _ = assembler(grace_s=60)
    asm.add([span("a", root=True)], "p0", 1, 100, handed_over=True)
    asm.add([span("b", root=True)], "p0", 2, 100)  # read for the first time: waits its grace
    [trace] = asm.release_handed_over("p0")
    assert trace.trace_id == "a".ljust(32, "0") and dict(trace.offsets) == {"p0": 1}
    assert asm.buffered_traces == 1 and asm.buffered_bytes == 100


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
