"""Checkpoint: what the consumer may commit, with the handover that says which traces after the committed
offset are unfinished, and what happens to the work on a rebalance (no broker needed: the decisions are
plain methods; Kafka's own futures stand for the producer's acknowledgements)."""

from __future__ import annotations

import logging
from collections.abc import Collection, Hashable, Mapping

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaTimeoutError, MessageSizeTooLargeError, RebalanceInProgressError
from kafka.future import Future
from kafka.structs import OffsetAndMetadata

from tracescore.consume import OutputNotAcknowledged
from tracescore.consume._checkpoint import Checkpoint
from tracescore.consume._handover import Handover
from tracescore.emit import Output

TP = TopicPartition("spans", 0)
OTHER = TopicPartition("spans", 1)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Buffer:
    """The trace buffer's part: per trace id, the lowest offset per partition it was read from."""

    def __init__(self, traces: dict[str, dict[Hashable, int]] | None = None) -> None:
        self.traces = traces or {}

    def low_watermarks(self) -> Mapping[Hashable, int]:
        marks: dict[Hashable, int] = {}
        for offsets in self.traces.values():
            for partition, offset in offsets.items():
                marks[partition] = min(offset, marks.get(partition, offset))
        return marks

    def traces_on(self, partitions: Collection[Hashable]) -> Mapping[Hashable, list[str]]:
        out: dict[Hashable, list[str]] = {}
        for trace_id, offsets in self.traces.items():
            for partition in offsets:
                if partition in partitions:
                    out.setdefault(partition, []).append(trace_id)
        return out


def checkpoint(buffer: Buffer | None = None, clock: Clock | None = None) -> Checkpoint:
    return Checkpoint(buffer or Buffer(), commit_interval_s=5.0, clock=clock or Clock())


def read(cp: Checkpoint, tp: TopicPartition, *offsets: int) -> None:
    for offset in offsets:
        cp.read(tp, offset)


def offsets(commits: Mapping[Hashable, OffsetAndMetadata]) -> dict[Hashable, int]:
    return {tp: c.offset for tp, c in commits.items()}


def handover(commit: OffsetAndMetadata) -> Handover:
    decoded = Handover.decode(commit.metadata)
    assert decoded is not None, commit
    return decoded


def acked() -> Output:
    return Output(Future().success(None), "a record")


def pending() -> tuple[Output, Future]:
    future = Future()
    return Output(future, "a record"), future


def test_commits_up_to_the_lowest_unfinished_message_and_names_the_traces_left_after_it() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1, 2, 3)
    later = cp.hold({TP: 2}, trace_id="later", scoring=1)
    first = cp.hold({TP: 1}, trace_id="first", scoring=1)
    cp.scored(later, [], [acked()])
    assert [w is later for w in cp.settle()] == [True]
    assert cp.due(force=True) == {TP: OffsetAndMetadata(1, "", -1)}, "a periodic commit: the offset alone"
    [commit] = cp.due(final=True).values()
    assert commit.offset == 1, "1 is still being scored"
    left = handover(commit)
    assert left.until == 4, "everything read"
    assert left.keeps(2, "first") and not left.keeps(2, "later"), "the later trace is finished"
    assert left.keeps(4, "later"), "past what was read, everything is new"
    cp.committed({TP: commit})
    assert cp.due(final=True) == {}, "nothing changed"
    cp.scored(first, [], [acked()])
    assert list(cp.settle()) == [first]
    assert cp.due(final=True) == {TP: OffsetAndMetadata(4, "", -1)}, "all finished: no handover"


def test_a_partition_with_nothing_finished_commits_nothing() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    work = cp.hold({TP: 0}, trace_id="t", scoring=1)
    assert cp.due(force=True) == {}, "it would only create the group's offset where it starts"
    output, future = pending()
    cp.scored(work, [], [acked(), output])
    assert list(cp.settle()) == [] and cp.settling == 1, "waits for every output"
    assert cp.due(force=True) == {}
    future.success(None)
    assert list(cp.settle()) == [work] and cp.settling == 0
    assert offsets(cp.due(force=True)) == {TP: 2}


def test_a_dead_letter_not_acknowledged_is_read_again_by_the_next_owner() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1, 2)
    scored = cp.hold({TP: 0}, trace_id="t", scoring=1)
    output, future = pending()
    cp.hold({TP: 1}, outputs=[output])  # a dead letter
    cp.scored(scored, [], [acked()])
    list(cp.settle())
    assert cp.due(final=True) == {TP: OffsetAndMetadata(1, "", -1)}, "from the dead letter on, all new"
    future.success(None)
    assert len(list(cp.settle())) == 1
    assert offsets(cp.due(force=True)) == {TP: 3}


def test_the_trace_buffer_holds_its_partitions_back_and_its_traces_are_in_the_handover() -> None:
    cp = checkpoint(Buffer({"buffered": {TP: 1}}))
    read(cp, TP, 0, 1, 2)
    read(cp, OTHER, 7)
    commits = cp.due(final=True)
    assert offsets(commits) == {TP: 1, OTHER: 8}
    assert handover(commits[TP]).keeps(1, "buffered") and commits[OTHER].metadata == ""


def test_commits_at_most_once_per_interval_unless_forced() -> None:
    clock = Clock()
    cp = checkpoint(clock=clock)
    read(cp, TP, 0)
    commits = cp.due()
    assert offsets(commits) == {TP: 1}
    cp.committed(commits)
    read(cp, TP, 1)
    clock.now += 1.0
    assert cp.due() == {}  # within the interval
    assert offsets(cp.due(force=True)) == {TP: 2}
    clock.now += 5.0
    assert offsets(cp.due()) == {TP: 2}  # not marked committed: offered again


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
    assert offsets(cp.due(force=True)) == {TP: 1}


def test_an_output_kafka_refused_is_an_error_and_its_offsets_stay_uncommitted() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    work = cp.hold({TP: 0}, scoring=1)
    cp.scored(work, [], [Output(Future().failure(KafkaTimeoutError()), "a record")])
    with pytest.raises(OutputNotAcknowledged, match="a record"):
        list(cp.settle())
    assert cp.due(force=True) == {}


def test_revoke_commits_the_handover_and_hands_the_unfinished_work_over() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1, 2, 3)
    done = cp.hold({TP: 0}, trace_id="done", scoring=1)
    unfinished = cp.hold({TP: 2}, trace_id="unfinished", scoring=1)
    after = cp.hold({TP: 3}, trace_id="after", scoring=1)
    for work in (done, after):
        cp.scored(work, [], [acked()])
    list(cp.settle())

    commits, handed = cp.revoke([TP], lost=False)

    assert offsets(commits) == {TP: 2}
    left = handover(commits[TP])
    assert left.keeps(2, "unfinished") and not left.keeps(3, "after") and left.until == 4
    assert handed == [unfinished] and unfinished.handed_over
    assert cp.due(force=True) == {}  # forgotten: nothing read since
    # Its result, when it comes, settles nothing: the next owner scores it.
    read(cp, TP, 10, 11)
    held = cp.hold({TP: 10}, trace_id="new", scoring=1)
    cp.scored(unfinished, [], [acked()])
    assert list(cp.settle()) == [] and cp.settling == 0
    cp.scored(held, [], [acked()])
    list(cp.settle())
    assert offsets(cp.due(force=True)) == {TP: 12}


def test_a_cooperative_revoke_leaves_the_kept_partitions_as_they_were() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    read(cp, OTHER, 5, 6)
    on_kept = cp.hold({OTHER: 5}, trace_id="kept", scoring=1)
    split = cp.hold({TP: 1, OTHER: 6}, trace_id="split", scoring=1)  # a trace not keyed by its id

    _, handed = cp.revoke([TP], lost=False)

    assert handed == [split] and not on_kept.handed_over
    [commit] = cp.due(final=True).values()
    assert commit.offset == 5, "the kept partition still waits for its own work"
    assert handover(commit).keeps(6, "kept") and not handover(commit).keeps(6, "split")
    cp.committed({OTHER: commit})
    cp.scored(on_kept, [], [acked()])
    assert list(cp.settle()) == [on_kept]
    assert offsets(cp.due(force=True)) == {OTHER: 7}, "the split trace no longer holds it"


def test_a_kept_partition_is_read_again_from_the_first_offset_not_committed() -> None:
    cp = checkpoint()
    read(cp, TP, 5, 6, 7)
    read(cp, OTHER, 3)
    cp.hold({TP: 6}, scoring=1)
    cp.hold({OTHER: 3}, scoring=1)
    cp.hold({TP: 7}, trace_id="t", scoring=0)  # finished: something to commit
    list(cp.settle())
    committing, _ = cp.revoke([TP, OTHER], lost=False)
    assert offsets(committing) == {TP: 6, OTHER: 3}, "OTHER: nothing finished, its handover all the same"
    cp.committed_on_revoke(committing)  # the asynchronous commit answered
    assert cp.seeks([TP, OTHER]) == {TP: 6, OTHER: 3}
    assert cp.seeks([TP]) == {}  # once


def test_a_partition_given_back_unanswered_resumes_where_it_was_first_read() -> None:
    cp = checkpoint()
    read(cp, TP, 5, 6, 7)
    cp.hold({TP: 6}, scoring=1)
    cp.revoke([TP], lost=False)  # its commit never answered
    assert cp.seeks([TP]) == {TP: 5}


def test_a_lost_member_commits_nothing_hands_everything_over_and_seeks_nowhere() -> None:
    cp = checkpoint()
    read(cp, TP, 0, 1)
    work = cp.hold({TP: 1}, trace_id="t", scoring=1)
    commits, handed = cp.revoke([TP], lost=True)
    assert commits == {} and handed == [work]
    assert cp.seeks([TP]) == {}  # kafka-python starts from the group's committed offset itself


def test_a_handover_received_and_not_read_past_is_passed_on() -> None:
    cp = checkpoint()
    given = Handover.build(20, ["theirs"], None)
    assert given is not None
    cp.handovers[TP] = given
    read(cp, TP, 10, 11, 12)  # the member reads again from 10; the previous owner had read up to 20
    mine = cp.hold({TP: 11}, trace_id="mine", scoring=1)
    done = cp.hold({TP: 12}, trace_id="done", scoring=1)
    cp.scored(done, [], [acked()])
    list(cp.settle())

    commits, _ = cp.revoke([TP], lost=False)

    left = handover(commits[TP])
    assert commits[TP].offset == 11 and mine.handed_over
    assert left.keeps(12, "mine") and not left.keeps(12, "done") and not left.keeps(12, "theirs")
    assert left.keeps(15, "theirs") and not left.keeps(15, "done"), "what it had not read yet, as given"
    assert left.keeps(20, "anything")


def test_periodic_commits_pass_on_a_handover_received_until_it_is_read_past() -> None:
    cp = checkpoint()
    cp.handovers[TP] = Handover.build(20, ["theirs"], None)
    read(cp, TP, 10, 11)
    done = cp.hold({TP: 11}, trace_id="done", scoring=1)
    cp.scored(done, [], [acked()])
    list(cp.settle())
    [commit] = cp.due(force=True).values()
    assert (
        commit.offset == 12 and handover(commit).keeps(15, "theirs") and not handover(commit).keeps(15, "x")
    )
    del cp.handovers[TP]  # the Pipeline drops it once it reads offset 20
    read(cp, TP, 20)
    assert cp.due(force=True) == {TP: OffsetAndMetadata(21, "", -1)}


def test_a_final_commit_hands_over_what_was_read_even_where_nothing_finished() -> None:
    cp = checkpoint(Buffer({"read": {TP: 5}}))
    read(cp, TP, 5, 6)  # read again from the group's offset 5: nothing finished yet
    assert cp.due(force=True) == {}, "a periodic commit would only restate (or create) the group's offset"
    [commit] = cp.due(final=True).values()
    assert commit.offset == 5 and handover(commit).until == 7
    assert handover(commit).keeps(6, "read"), "its next owner goes on with it once it read up to 7"
    commits, _ = cp.revoke([TP], lost=False, final=False)  # the member stops on an error
    assert commits == {}, "it vouches for finished work only"


class RefusingConsumer:
    """Refuses `refusals` commits as a rebalancing group does, then takes them."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.commits: list[Mapping[Hashable, OffsetAndMetadata]] = []

    def commit(self, offsets: Mapping[Hashable, OffsetAndMetadata], timeout_ms: int | None = None) -> None:
        if self.refusals:
            self.refusals -= 1
            raise RebalanceInProgressError("the group is rebalancing")
        self.commits.append(offsets)


def test_commits_refused_through_a_long_rebalance_are_said_once_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two members killed at once: the group waits their session timeout (45 s) and the members left, trying
    every commit interval, logged one line a second for the whole of it (27 lines in the walk)."""
    clock = Clock()
    cp = checkpoint(clock=clock)
    consumer = RefusingConsumer(refusals=30)
    read(cp, TP, 0)
    with caplog.at_level(logging.INFO, logger="tracescore.consume"):
        for _ in range(31):
            clock.now += 1.0
            cp.commit_with(consumer, force=True)  # type: ignore[arg-type]
    assert [offsets(c) for c in consumer.commits] == [{TP: 1}], "the commit is retried until taken"
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "rebalancing" in lines[0] and "session timeout" in lines[0]
    assert "refused 30 commits while it rebalanced, for 30 s" in lines[1]
