"""OffsetTracker: a partition commits only up to the first message whose work is unfinished."""

from __future__ import annotations

from tracescore.consume._offsets import OffsetTracker


def read(tracker: OffsetTracker, partition: int, *offsets: int) -> None:
    for offset in offsets:
        tracker.read(partition, offset)


def test_work_in_flight_holds_its_partition_back_until_released() -> None:
    tracker = OffsetTracker()
    read(tracker, 0, 10, 11, 12)
    generation = tracker.hold({0: 11})
    assert tracker.committable({}) == {0: (11, 13)}  # 10 is finished, 11 is still being scored
    tracker.finish({0: 11}, generation)
    assert tracker.committable({}) == {0: (13, 13)}


def test_the_trace_buffer_holds_back_too() -> None:
    tracker = OffsetTracker()
    read(tracker, 0, 10, 11, 12)
    assert tracker.committable({0: 12}) == {0: (12, 13)}


def test_a_partition_where_nothing_finished_commits_nothing() -> None:
    tracker = OffsetTracker()
    read(tracker, 0, 10, 11)
    tracker.hold({0: 10})
    assert tracker.committable({}) == {}  # would restate (or create) the group's offset
    done = tracker.hold({0: 11})
    tracker.finish({0: 11}, done)
    assert tracker.committable({}) == {0: (10, 12)}, "finished work after the first held message"


def test_work_from_before_the_member_lost_the_group_releases_nothing_after_it() -> None:
    tracker = OffsetTracker()
    read(tracker, 0, 10)
    old = tracker.hold({0: 10})
    tracker.reset()
    read(tracker, 0, 20, 21)
    held = tracker.hold({0: 20})
    tracker.finish({0: 10}, old)  # stale: must not free the new generation's hold
    assert tracker.committable({}) == {}  # 20, the first offset read, is still held
    tracker.finish({0: 20}, held)
    assert tracker.committable({}) == {0: (22, 22)}


def test_forgetting_partitions_says_where_each_must_be_read_again_and_keeps_the_others() -> None:
    tracker = OffsetTracker()
    read(tracker, 0, 10, 11, 12, 13)
    read(tracker, 1, 5, 6)
    read(tracker, 2, 7)
    tracker.committed({0: 12})  # 12 and 13 were handed over unfinished; partition 1 never committed
    assert tracker.forget({0, 1}) == {0: 12, 1: 5}
    assert tracker.forget({0, 1}) == {}  # nothing read since
    assert tracker.committable({}) == {2: (8, 8)}, "a partition kept is untouched"
