"""Checkpoint: what the consumer may commit, and what happens to it on a rebalance (no broker needed: the
decisions are plain methods; Kafka's own futures stand for the producer's acknowledgements)."""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError
from kafka.future import Future

from tracescore.consume import OutputNotAcknowledged
from tracescore.consume._checkpoint import Checkpoint
from tracescore.emit import Output

TP = TopicPartition("spans", 0)
OTHER = TopicPartition("spans", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def checkpoint(buffered: dict | None = None, clock: Clock | None = None) -> Checkpoint:
    return Checkpoint(lambda: dict(buffered or {}), commit_interval_s=5.0, clock=clock or Clock())


def read(cp: Checkpoint, tp: TopicPartition, *offsets: int) -> None:
    for offset in offsets:
        cp.read(tp, offset)


def acked() -> Output:
    return Output(Future().success(None), "a record")


def pending() -> tuple[Output, Future]:
    future = Future()
    return Output(future, "a record"), future


def test_commits_only_up_to_the_lowest_unfinished_message() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1, 2, 3)
    later = cp.hold({TP: 2}, scoring=1)
    first = cp.hold({TP: 1}, scoring=1)
    assert cp.due(force=True) == {TP: 1}
    cp.committed({TP: 1})
    cp.scored(later, [], [acked()])
    assert [w is later for w in cp.settle()] == [True]
    assert cp.due(force=True) == {}  # 1 is still being scored: nothing new is finished
    cp.scored(first, [], [acked()])
    assert list(cp.settle()) == [first]
    assert cp.due(force=True) == {TP: 4}


def test_work_waits_for_every_output_to_be_acknowledged() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    work = cp.hold({TP: 0}, scoring=1)
    output, future = pending()
    cp.scored(work, [], [acked(), output])
    assert list(cp.settle()) == [] and cp.settling == 1
    assert cp.due(force=True) == {}
    future.success(None)
    assert list(cp.settle()) == [work] and cp.settling == 0
    assert cp.due(force=True) == {TP: 2}


def test_a_dead_letter_waits_only_for_its_own_acknowledgement() -> None:
    cp = checkpoint()
    read(cp, TP, 0)
    output, future = pending()
    cp.hold({TP: 0}, outputs=[output])
    assert cp.settling == 1 and cp.due(force=True) == {}
    future.success(None)
    assert len(list(cp.settle())) == 1
    assert cp.due(force=True) == {TP: 1}


def test_the_trace_buffer_holds_its_partitions_back() -> None:
    buffered = {TP: 1}
    cp = checkpoint(buffered)
    read(cp, TP, 0, 1, 2)
    read(cp, OTHER, 7)
    assert cp.due(force=True) == {TP: 1, OTHER: 8}


def test_commits_at_most_once_per_interval_unless_forced() -> None:
    clock = Clock()
    cp = checkpoint(clock=clock)
    read(cp, TP, 0)
    assert cp.due() == {TP: 1}
    cp.committed({TP: 1})
    read(cp, TP, 1)
    clock.now += 1.0
    assert cp.due() == {}  # within the interval
    assert cp.due(force=True) == {TP: 2}
    clock.now += 5.0
    assert cp.due() == {TP: 2}  # not marked committed: offered again


def test_an_output_too_large_is_replaced_by_its_smaller_record() -> None:
    cp = checkpoint()
    read(cp, TP, 0)
    smaller, smaller_future = pending()
    too_large = Output(Future().failure(MessageSizeTooLargeError()), "a record", fallback=lambda: smaller)
    work = cp.hold({TP: 0}, scoring=1)
    cp.scored(work, [], [too_large])
    assert list(cp.settle()) == []
    assert work.outputs == [smaller]  # the smaller record was sent in its place
    smaller_future.success(None)
    assert list(cp.settle()) == [work]


def test_a_droppable_output_too_large_is_dropped() -> None:
    cp = checkpoint()
    read(cp, TP, 0)
    span = Output(Future().failure(MessageSizeTooLargeError()), "evaluation spans", droppable=True)
    work = cp.hold({TP: 0}, scoring=1)
    cp.scored(work, [], [acked(), span])
    assert list(cp.settle()) == [work]
    assert cp.due(force=True) == {TP: 1}


def test_an_output_kafka_refused_is_an_error_and_its_offsets_stay_uncommitted() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    work = cp.hold({TP: 0}, scoring=1)
    cp.scored(work, [], [Output(Future().failure(KafkaTimeoutError()), "a record")])
    with pytest.raises(OutputNotAcknowledged, match="a record"):
        list(cp.settle())
    assert cp.due(force=True) == {}


def test_revoke_commits_finished_work_and_forgets_the_partition() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1, 2, 3)
    done = cp.hold({TP: 0}, scoring=1)
    unfinished = cp.hold({TP: 2}, scoring=1)
    cp.scored(done, [], [acked()])
    list(cp.settle())
    assert cp.revoke(lost=False) == {TP: 2}
    assert cp.due(force=True) == {}  # forgotten: nothing read since
    # Work from before the revoke finishes but releases nothing of the next assignment.
    read(cp, TP, 10, 11)
    held = cp.hold({TP: 10}, scoring=1)
    cp.scored(unfinished, [], [acked()])
    assert list(cp.settle()) == [unfinished]
    assert cp.due(force=True) == {}
    cp.scored(held, [], [acked()])
    list(cp.settle())
    assert cp.due(force=True) == {TP: 12}


def test_a_kept_partition_is_read_again_from_the_first_offset_not_committed() -> None:
    cp = checkpoint()
    read(cp, TP, 5, 6, 7)
    read(cp, OTHER, 3)
    cp.hold({TP: 6}, scoring=1)
    cp.hold({OTHER: 3}, scoring=1)
    committing = cp.revoke(lost=False)
    assert committing == {TP: 6}
    cp.committed_on_revoke(committing)  # the asynchronous commit answered
    assert cp.seeks([TP, OTHER]) == {TP: 6, OTHER: 3}
    assert cp.seeks([TP]) == {}  # once


def test_a_partition_given_back_unanswered_resumes_where_it_was_first_read() -> None:
    cp = checkpoint()
    read(cp, TP, 5, 6, 7)
    cp.hold({TP: 6}, scoring=1)
    cp.revoke(lost=False)  # its commit never answered
    assert cp.seeks([TP]) == {TP: 5}


def test_a_lost_member_commits_nothing_and_seeks_nowhere() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    assert cp.revoke(lost=True) == {}
    assert cp.seeks([TP]) == {}  # kafka-python starts from the group's committed offset itself
