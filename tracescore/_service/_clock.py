"""Stream time per keyed partition: how far stage 2's view of the input is complete, as a time.

A decision that waits for input to stop (a conversation quiet for `quiet_seconds`) must not be taken while
input that arrived earlier is still on its way: held back in stage 1 by a rebalance of the group that reads
the input, by a member that crashed and keeps its partitions until its session expires, or by a member that
lags. Stage 1 commits an input partition only once its re-keyed records are acknowledged on the keyed topic,
so the group's committed offsets say how far the input is re-keyed, whichever member did it:

1. every tick, the input topics' end offsets are noted with the time they were read;
2. once the group's committed offsets reach the ends noted at time t, every input record that arrived
   before t is on the keyed topic: t is the input's time (`input_ms`);
3. the keyed topic's end offsets, read right after, say where those records are at the latest; a keyed
   partition read up to there has applied everything that arrived before t: t is its stream time.

A turn not applied yet reached the input after its partition's stream time; a turn's own time (when it was
re-keyed) is never before it reached the input. So a conversation whose last turn is `quiet_seconds` older
than its partition's stream time is quiet whatever is still in flight. Only the marks say this: the newest
record read does not (the records after it were re-keyed later, yet may have reached the input earlier).
Clocks: the stream time is this instance's wall clock; a turn's time is its re-keying producer's (a record's
CreateTime): hosts whose clocks drift by more than a small part of `quiet_seconds` weaken the guarantee.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from tracescore._kafka import known_partitions, made_or_closed, probe_consumer
from tracescore._kafka_config import KafkaConnection
from tracescore._service._bounded import BROKER_WAIT_S, BoundedCall, ClosedAtStop

__all__ = ["StreamClock", "StreamTime"]

_log = logging.getLogger("tracescore")
_MAX_MARKS = 3_600  # noted times kept while the input or a partition lags (an hour at one tick a second)
# Each broker call of an update; the update as a whole is given up on past BROKER_WAIT_S or at a stop.
_BROKER_WAIT_MS = int(BROKER_WAIT_S * 1000)


class StreamTime:
    """The bookkeeping of the stream clock, fed with what was read from Kafka (no Kafka here)."""

    def __init__(self, max_marks: int = _MAX_MARKS) -> None:
        self.input_ms = 0  # every input record that arrived before it is on the keyed topic; 0: not yet known
        self._max_marks = max_marks
        self._input_ends: deque[tuple[int, dict[TopicPartition, int]]] = deque()
        self._keyed_ends: dict[int, deque[tuple[int, int]]] = {}  # keyed partition -> (input_ms, end offset)
        self._through: dict[int, tuple[int, int]] = {}  # keyed partition -> the last mark its position passed

    def input_ends(self, at_ms: int, ends: Mapping[TopicPartition, int]) -> None:
        """The input topics' end offsets, read at `at_ms`."""
        if len(self._input_ends) < self._max_marks:  # past it the input's time advances in bigger steps
            self._input_ends.append((at_ms, dict(ends)))

    def behind(self, offsets: Mapping[TopicPartition, int]) -> list[TopicPartition]:
        """The input partitions whose committed `offsets` are short of the oldest ends noted."""
        if not self._input_ends:
            return []
        return [tp for tp, end in self._input_ends[0][1].items() if offsets.get(tp, -1) < end]

    def committed(self, offsets: Mapping[TopicPartition, int]) -> bool:
        """The group's committed offsets; True when they reach ends noted earlier, so the input's time moved
        on."""
        moved = False
        while self._input_ends and self._reached(self._input_ends[0][1], offsets):
            self.input_ms = max(self.input_ms, self._input_ends.popleft()[0])
            moved = True
        return moved

    @staticmethod
    def _reached(ends: Mapping[TopicPartition, int], offsets: Mapping[TopicPartition, int]) -> bool:
        return all(offsets.get(tp, 0) >= end for tp, end in ends.items())

    def keyed_ends(self, ends: Mapping[int, int]) -> None:
        """The keyed topic's end offsets, read after the input's time moved on: where the records that
        arrived before it are at the latest."""
        for partition, end in ends.items():
            marks = self._keyed_ends.setdefault(partition, deque())
            if len(marks) < self._max_marks:
                marks.append((self.input_ms, end))

    def of(self, partition: int, position: int | None) -> int:
        """The stream time of a keyed partition read up to `position` (None: unknown yet); 0 while nothing
        is known.

        Read up to the keyed ends noted with an input time, it is that time; behind them (a backlog) it stays
        at the last one passed, and a partition read again from before that (a restore) has none until it
        passes it again. Never the time of the newest record read: the records after it on the partition
        were re-keyed later, but may have reached the input long before (held in stage 1 by a rebalance),
        so a conversation would look quiet while its next turn is still unread."""
        if position is None:
            return 0
        marks = self._keyed_ends.get(partition)
        while marks and position >= marks[0][1]:
            self._through[partition] = marks.popleft()
        input_ms, end = self._through.get(partition, (0, 0))
        # Read again from an earlier offset (revoked and restored between two ticks): not passed any more.
        return input_ms if position >= end else 0

    def keep_only(self, partitions: set[int]) -> None:
        """Forget the partitions no longer assigned (a partition assigned again starts anew)."""
        for table in (self._keyed_ends, self._through):
            for partition in [p for p in table if p not in partitions]:
                del table[partition]


class StreamClock:
    """Reads what `StreamTime` needs from Kafka, at most once a tick and only when asked (a service whose
    logic never asks pays nothing)."""

    def __init__(
        self,
        connection: KafkaConnection,
        group_id: str,
        inputs: Sequence[str],
        keyed: str,
        clock: Callable[[], datetime],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.connection = connection
        self.clock = clock
        self._stopping = stopping  # a stop asked for: the update under way is given up on, none follows
        self.group_id = group_id
        self.inputs = list(inputs)
        self.keyed = keyed
        self.time = StreamTime()
        # Made by the first update, on its thread; closed at the stop, a call under way on them with it.
        self._probe = ClosedAtStop(self._new_probe, "the stream time's probe")
        self._admin = ClosedAtStop(self._new_admin, "the stream time's admin client")
        self._assigned: list[int] = []
        # On a thread of its own: a stop does not wait for it (a given-up update still ends on that thread,
        # and the next tick waits for it instead of asking the broker twice at once).
        self._update_call = BoundedCall(lambda: self._update(self._assigned), "the stream time's update")

    def tick(self, read_to: Callable[[], Mapping[int, int | None]]) -> Callable[[int], int]:
        """The stream time of each keyed partition (ms), as a function; `read_to()`: per keyed partition this
        instance reads, the next offset to read (None: not known yet). Kafka is read on the first call."""
        times: dict[int, int] | None = None

        def of(partition: int) -> int:
            nonlocal times
            if times is None:
                at = read_to()
                self._assigned = sorted(at)
                try:
                    self._update_call(self._stopping)
                except KafkaError as exc:  # no answer within BROKER_WAIT_S, or a stop: the stream time waits
                    _log.debug("stream time not updated: %s", exc)
                times = {p: self.time.of(p, position) for p, position in at.items()}
                self.time.keep_only(set(at))
            return times.get(partition, 0)

        return of

    def _update(self, assigned: list[int]) -> None:
        try:
            probe = self._clients()[0]
            at_ms = int(self.clock().timestamp() * 1000)
            # The keyed topic's too: its end offsets are asked for next, their leaders found in the answer.
            found = known_partitions(probe, [*self.inputs, self.keyed])
            inputs = [TopicPartition(topic, p) for topic in self.inputs for p in found.get(topic, ())]
            if self._stopping():
                return
            self.time.input_ends(at_ms, probe.end_offsets(inputs, timeout_ms=_BROKER_WAIT_MS))
            if self._stopping():
                return
            if self.time.committed(self._committed(inputs)) and assigned and not self._stopping():
                keyed = [TopicPartition(self.keyed, p) for p in assigned]
                ends = probe.end_offsets(keyed, timeout_ms=_BROKER_WAIT_MS)
                self.time.keyed_ends({tp.partition: end for tp, end in ends.items()})
        except KafkaError as exc:  # the broker restarting: the stream time waits
            _log.debug("stream time not updated: %s", exc)

    def _committed(self, inputs: list[TopicPartition]) -> dict[TopicPartition, int]:
        probe, admin = self._clients()
        offsets = admin.list_group_offsets({self.group_id: inputs}).get(self.group_id, {})
        committed = {tp: meta.offset for tp, meta in offsets.items()}
        behind = self.time.behind(committed)
        if behind:
            # Nothing to read below a partition's first offset: an empty partition (or one emptied by
            # retention) is never committed, and is re-keyed all the same.
            for tp, start in probe.beginning_offsets(behind, timeout_ms=_BROKER_WAIT_MS).items():
                committed[tp] = max(committed.get(tp, -1), start)
        return committed

    def _clients(self) -> tuple[KafkaConsumer, KafkaAdminClient]:
        return self._probe.get(), self._admin.get()

    def _new_probe(self) -> KafkaConsumer:
        wait_ms = int(BROKER_WAIT_S * 1000)  # its first connection and each request (30 s by default)
        return probe_consumer(
            self.connection.client_config(), request_timeout_ms=wait_ms, bootstrap_timeout_ms=wait_ms
        )

    def _new_admin(self) -> KafkaAdminClient:
        wait_ms = int(BROKER_WAIT_S * 1000)
        return made_or_closed(
            KafkaAdminClient,
            **self.connection.client_config(),
            request_timeout_ms=wait_ms,
            bootstrap_timeout_ms=wait_ms,
        )

    def close(self) -> None:
        """Both clients closed, an update under way on them failing at once; none made again."""
        for client in (self._probe, self._admin):
            try:
                client.close()
            except KafkaError as exc:  # closing after the broker went away
                _log.debug("closing the stream clock's clients: %s", exc)
