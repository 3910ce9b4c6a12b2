"""Lifecycle: when the loop stops taking work and when run() returns (stop() and its drain timeout, the idle
timeout counted from the first assignment, max_records), on a fake clock. No broker: whether the partitions
are read to their end and the broker probe are handed in; the loop's parts are the real ones."""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from kafka.future import Future

from tracescore.consume import BrokerUnreachable, ConsumerSettings, ConsumerStats, TraceAssembler
from tracescore.consume._checkpoint import Checkpoint, Work
from tracescore.consume._judging import Judging
from tracescore.consume._lifecycle import Lifecycle, RunState
from tracescore.consume._pauser import Pauser
from tracescore.consume._revise import Revision
from tracescore.consume._scorer import Scorer
from tracescore.emit import Output
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness

TP = TopicPartition("spans", 0)


class Loop:
    """The parts a Lifecycle reads, a clock, and the partitions' end and the broker as the test says."""

    def __init__(
        self, idle_timeout_s: float | None = None, drain_timeout_s: float = 60, max_records: int | None = None
    ) -> None:
        self.now = 1000.0
        self.assigned_at: float | None = None
        self.at_end = True
        self.broker_up = True
        self.probes = 0
        self.judging = Judging(Scorer(OfflineJudge(), [Faithfulness()]), max_in_flight=4)
        self.checkpoint = Checkpoint(TraceAssembler(), commit_interval_s=5.0)
        self.pauser = Pauser(max_in_flight=4)
        self.stats = ConsumerStats()
        self.life = Lifecycle(
            ConsumerSettings(
                idle_timeout_s=idle_timeout_s, drain_timeout_s=drain_timeout_s, max_records=max_records
            ),
            self.judging,
            self.checkpoint,
            self.pauser,
            self.stats,
            assigned_at=lambda: self.assigned_at,
            at_end=lambda: self.at_end,
            probe=self._probe,
            clock=lambda: self.now,
        )

    def _probe(self) -> None:
        self.probes += 1
        if not self.broker_up:
            raise BrokerUnreachable("no Kafka broker reachable")

    def queue(self, count: int = 1) -> Work:
        work = self.checkpoint.hold({TP: 0}, scoring=count)
        for _ in range(count):
            self.judging.queue(work, Revision(None), None)  # type: ignore[arg-type]  # never scored here
        return work

    def emitted(self) -> Future:
        """Work scored whose output Kafka has not acknowledged yet."""
        future = Future()
        self.checkpoint.hold({TP: 0}, outputs=[Output(future, "a record")])
        return future

    def turn(self, polled: bool = False) -> bool:
        """One turn of the loop as run() takes it: whether the stream went idle."""
        self.life.check_stop()
        return self.life.went_idle(polled)


def test_stop_drops_what_was_not_started_and_returns_once_the_emitted_work_is_acknowledged() -> None:
    loop = Loop(drain_timeout_s=30)
    loop.queue(2)
    acked = loop.emitted()
    loop.life.stop()
    assert loop.life.state is RunState.RUNNING  # a signal handler only asks; the loop's next turn stops
    loop.turn()
    assert loop.life.state is RunState.STOPPING and loop.judging.queued == 0
    assert not loop.life.done()
    acked.success(None)
    list(loop.checkpoint.settle())
    assert loop.life.done()


def test_stopping_gives_up_on_unfinished_work_after_the_drain_timeout() -> None:
    loop = Loop(drain_timeout_s=30)
    loop.emitted()
    loop.life.stop()
    loop.turn()
    loop.now += 30
    assert not loop.life.done()
    loop.now += 0.1
    assert loop.life.done()


def test_the_idle_timeout_counts_from_the_first_assignment_and_the_last_message() -> None:
    loop = Loop(idle_timeout_s=10)
    loop.now += 60
    assert not loop.turn()  # waiting to join the group is not idleness
    loop.assigned_at = loop.now
    loop.now += 9
    assert not loop.turn()
    loop.turn(polled=True)
    loop.now += 9.5
    assert not loop.turn()  # 9.5 s since the last message
    loop.now += 0.5
    assert loop.turn() and loop.life.state is RunState.FINISHING
    assert not loop.turn()  # once


def test_work_in_hand_or_paused_partitions_are_not_idleness() -> None:
    loop = Loop(idle_timeout_s=10)
    loop.assigned_at = loop.now
    loop.queue()
    loop.now += 60
    assert not loop.turn()
    loop.judging.drop_queued()
    loop.now += 9
    assert not loop.turn()  # idleness starts when the work is done
    loop.pauser.update(4)
    loop.now += 60
    assert not loop.turn()
    loop.pauser.update(0)
    loop.now += 10
    assert loop.turn()


def test_idle_means_every_partition_read_to_its_end() -> None:
    loop = Loop(idle_timeout_s=10)
    loop.assigned_at = loop.now
    loop.at_end = False  # a slow first fetch on a loaded machine
    loop.now += 60
    assert not loop.turn() and loop.life.state is RunState.RUNNING
    loop.at_end = True
    assert loop.turn()


def test_a_broker_gone_while_idle_is_an_error_and_is_probed_at_most_every_5_seconds() -> None:
    loop = Loop(idle_timeout_s=10)
    loop.assigned_at = loop.now
    loop.at_end = False
    loop.now += 10
    for _ in range(4):
        loop.turn()
        loop.now += 2
    assert loop.probes == 2  # at 10 s and 16 s, not at 12 s and 14 s
    loop.broker_up = False
    loop.now += 5
    with pytest.raises(BrokerUnreachable):
        loop.turn()


def test_without_an_idle_timeout_it_never_finishes_on_its_own() -> None:
    loop = Loop()
    loop.assigned_at = loop.now
    loop.now += 1e6
    assert not loop.turn() and not loop.life.done() and loop.probes == 0


def test_max_records_finishes_what_was_taken_then_returns() -> None:
    loop = Loop(max_records=2)
    loop.stats.scored = 1
    assert not loop.life.done() and loop.life.state is RunState.RUNNING
    loop.stats.scored, loop.stats.sampled_out = 1, 1
    loop.queue()
    acked = loop.emitted()
    assert not loop.life.done() and loop.life.state is RunState.FINISHING
    loop.judging.drop_queued()  # stands for: scored, written and acknowledged
    assert not loop.life.done()
    acked.success(None)
    list(loop.checkpoint.settle())
    assert loop.life.done()


def test_busy_while_interactions_are_pending_or_outputs_unacknowledged() -> None:
    loop = Loop()
    assert not loop.life.busy
    loop.queue()
    assert loop.life.busy
    loop.judging.drop_queued()
    acked = loop.emitted()
    assert loop.life.busy
    acked.success(None)
    list(loop.checkpoint.settle())
    assert not loop.life.busy


def test_stop_keeps_the_rest_of_a_trace_already_at_the_judges_and_waits_for_it() -> None:
    loop = Loop()
    started = loop.queue(2)  # one trace, two interactions
    loop.queue(1)  # another, not started
    started.started = True  # its first interaction went to the judges
    loop.life.stop()
    loop.turn()
    assert loop.judging.queued == 2, "the started trace's interactions stay; the other trace is dropped"
    assert not loop.life.done(), "its second interaction is still to be scored"
    loop.judging.drop_queued()  # stands for: scored, written and acknowledged
    assert loop.life.done()
