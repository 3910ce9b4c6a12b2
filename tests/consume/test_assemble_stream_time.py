"""Trace assembly counts a trace's grace on the stream's time: a consumer slower than the stream (a backlog, a
starved CPU) holds a trace whose rest is still in Kafka, and once caught up a trace still gets its grace of
real time. Polls are described as the consumer loop reports them to StreamTime, on clocks the test moves."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from assembly_helpers import span

from tracescore.consume import AssemblySettings, TraceAssembler
from tracescore.consume._stream_time import StreamTime

EPOCH = 1_800_000_000.0  # record times: seconds since the epoch


class Loop:
    """A consumer loop: the monotonic clock, the wall clock (the record times' epoch) and its assembler."""

    def __init__(self, grace_s: float = 2, max_wait_s: float = 30) -> None:
        self.mono, self.wall = 100.0, EPOCH + 3600  # read an hour after the backlog was written
        self.time = StreamTime(grace_s, clock=lambda: self.mono, wall=lambda: self.wall)
        settings = AssemblySettings(grace_s=grace_s, max_wait_s=max_wait_s)
        self.asm = TraceAssembler(settings, clock=self.time.now, stamp=self.time.stamp)

    def poll(
        self,
        read: Mapping[str, float | None],
        *,
        took_s: float = 0.01,
        behind: Collection[str] = (),
        assigned: Collection[str] = ("p0",),
    ) -> None:
        """A poll that waited `took_s` and read records up to `read`'s times (seconds after EPOCH)."""
        self.mono += took_s
        self.wall += took_s
        latest = {p: None if t is None else EPOCH + t for p, t in read.items()}
        self.time.polled(latest, behind, assigned, took_s)

    def work(self, seconds: float) -> None:
        """Processing a batch: the consumer's clocks move, nothing is read."""
        self.mono += seconds
        self.wall += seconds

    def ready(self) -> list[str]:
        return [t.trace_id[:1] for t in self.asm.ready()]


def test_a_trace_split_over_two_slow_batches_of_a_backlog_waits_for_its_rest() -> None:
    loop = Loop()
    loop.poll({"p0": 0.0})
    loop.asm.add([span("a", root=True)], "p0", 0, 100)  # written at 0.0 s, its child at 0.5 s
    loop.work(5)  # the batch took 5 s: past the grace on the consumer's clock
    assert loop.ready() == []
    loop.poll({"p0": 0.5})
    loop.asm.add([span("a")], "p0", 1, 100)
    loop.work(5)
    assert loop.ready() == [], "the stream moved 0.5 s past its last span"
    loop.poll({"p0": 3.0})  # what was written 2.5 s after its last span is read: the rest would be here
    assert loop.ready() == ["a"]


def test_a_caught_up_consumer_reads_a_trace_a_grace_of_its_own_waiting_after_its_last_span() -> None:
    loop = Loop()
    loop.poll({"p0": 3600.0})
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    loop.work(0.1)
    for _ in range(3):
        loop.poll({}, took_s=0.5)  # nothing more to read: real time counts
    assert loop.ready() == []
    loop.poll({}, took_s=0.5)
    assert loop.ready() == ["a"]


def test_after_a_slow_batch_only_the_wait_of_the_poll_that_found_nothing_counts() -> None:
    """The batch's processing is not the stream's time: what was written meanwhile is read by the next poll,
    or (its fetch still on its way) the one after."""
    loop = Loop()
    loop.poll({"p0": 3600.0})
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    loop.work(5)
    loop.poll({}, took_s=0.02)
    assert loop.ready() == []
    loop.work(0.01)
    loop.poll({}, took_s=0.02)
    loop.poll({}, took_s=2)
    assert loop.ready() == ["a"], "two polls in a row found nothing: the time between them counts"


def test_record_times_never_move_faster_than_the_consumers_clock() -> None:
    """A producer's clock running an hour ahead (or a backlog read faster than it was written) cannot release
    a trace sooner than its grace of real time."""
    loop = Loop()
    loop.poll({"p0": 0.0})
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    loop.poll({"p0": 3000.0}, took_s=0.5)
    assert loop.ready() == []
    loop.poll({"p0": 3010.0}, took_s=1.6)
    assert loop.ready() == ["a"]


def test_records_without_a_timestamp_or_from_the_future_are_timed_as_read() -> None:
    loop = Loop()
    loop.poll({"p0": None})
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    loop.work(5)
    loop.poll({"p0": None}, took_s=0.01)  # read now: real time, as before stream time
    assert loop.ready() == ["a"]
    loop.poll({"p0": 1e9})  # written in ~2050, read in ~2027: taken as read now
    loop.asm.add([span("b", root=True)], "p0", 1, 100)
    loop.work(5)
    loop.poll({"p0": 3609.5}, took_s=0.01)
    assert loop.ready() == ["b"], "the next record's time goes on from the consumer's clock, not from 2050"


def test_a_producer_clock_set_back_does_not_stop_the_stream() -> None:
    loop = Loop()
    loop.poll({"p0": 1000.0})
    loop.poll({"p0": 10.0})  # set back: the stream goes on from here
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    loop.work(5)
    loop.poll({"p0": 13.0})
    assert loop.ready() == ["a"]


def test_a_partition_with_more_to_read_holds_the_traces_until_it_moves_on() -> None:
    """Spans of one trace may sit on two partitions (a Collector not keying by trace id): one partition's
    stream moving on says nothing of the other's."""
    both = ("p0", "p1")
    loop = Loop()
    loop.poll({"p0": 0.0, "p1": 0.0}, assigned=both)
    loop.asm.add([span("a", root=True)], "p1", 0, 100)
    loop.work(5)
    loop.poll({"p0": 5.0}, behind=["p1"], assigned=both)  # p1 has more: its next fetch is still to come
    assert loop.ready() == []
    loop.poll({"p1": 5.0}, assigned=both)  # p0 read to its end meanwhile
    assert loop.ready() == ["a"]


def test_an_idle_partition_does_not_hold_the_others() -> None:
    both = ("p0", "p1")
    loop = Loop()
    loop.poll({"p0": 0.0, "p1": 0.0}, assigned=both)
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    for second in range(1, 4):
        loop.work(1)
        loop.poll({"p0": float(second)}, assigned=both)  # p1: read to its end, nothing written there
    assert loop.ready() == ["a"]


def test_a_partition_assigned_anew_starts_level_and_a_revoked_one_is_forgotten() -> None:
    loop = Loop()
    loop.poll({"p0": 0.0})
    loop.asm.add([span("a", root=True)], "p0", 0, 100)
    loop.poll({"p1": 9.0}, assigned=("p1",), took_s=3)  # p0 revoked (its traces dropped by the assembler)
    loop.asm.add([span("b", root=True)], "p1", 0, 100)
    loop.poll({"p1": 10.0}, assigned=("p1",), took_s=1)
    assert [t for t in loop.ready() if t == "b"] == [], "its first records told nothing of how far it moved"
    loop.poll({"p1": 12.0}, assigned=("p1",), took_s=1.5)
    assert "b" in loop.ready()


def test_the_max_wait_counts_stream_time_too() -> None:
    loop = Loop(max_wait_s=10)
    loop.poll({"p0": 0.0})
    loop.asm.add([span("a")], "p0", 0, 100)  # its root never comes
    loop.work(60)
    loop.poll({"p0": 5.0})
    assert loop.ready() == []
    loop.work(60)
    loop.poll({"p0": 11.0})
    [trace] = loop.asm.ready() or [None]
    assert trace is not None and trace.incomplete is not None


def test_a_partition_whose_stream_moves_faster_does_not_hold_every_trace_ever_longer() -> None:
    """Read as many bytes from each, a partition of sparse traffic covers ten times the time of a busy one:
    its clock runs at most a grace ahead, so a trace waits at most two graces of the busy one's time."""
    both = ("busy", "sparse")
    loop = Loop()
    for step in range(31):
        loop.work(1)
        loop.poll({"busy": step * 0.1, "sparse": step * 1.0}, assigned=both)
    loop.asm.add([span("a", root=True)], "sparse", 0, 100)
    for step in range(31, 72):
        loop.work(1)
        loop.poll({"busy": step * 0.1, "sparse": step * 1.0}, assigned=both)
        if loop.ready():
            break
    assert step - 30 <= 41, f"held {step - 30} polls: its stream moved {step - 30} s"
    assert loop.ready() == [] and loop.asm.buffered_traces == 0
