"""What stage 2 reads from Kafka to restore newly assigned partitions, read on a worker thread a stop gives up
on (`BoundedCall`): the state topic's partitions, the old state topic on a partition's first use, the
outputs written after each partition's last saved state, and where to read the keyed topic again from.

Reading a large state topic takes as long as it takes, so only a stop ends the wait; but no signal
interrupts a client call, and a broker that stops answering would hold the stop past its budget. Nothing of
what is read is applied until all of it is: a restore given up on leaves nothing half restored, and the
partitions' next owner (this service's next start) restores them again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kafka import KafkaConsumer, TopicPartition
from kafka.partitioner.default import murmur2

from tracescore._kafka_config import KafkaConnection
from tracescore._service._bounded import BoundedCall
from tracescore._service._changelog import Changelog, PartitionState, legacy_states
from tracescore._service._outputs import OutputLog

__all__ = ["ReadBack", "RestoreReader"]


@dataclass
class ReadBack:
    states: dict[int, PartitionState]
    # The old state topic's (partition, key, value) for partitions used for the first time (no meta yet).
    legacy: list[tuple[int, bytes, bytes]] = field(default_factory=list)
    found: dict[int, dict[str, str]] = field(default_factory=dict)  # outputs after each partition's marks
    committed: dict[int, int | None] = field(default_factory=dict)  # the group's committed offsets
    rewind: dict[int, int] = field(default_factory=dict)  # the first offset at or after `rewind_ms`

    def fresh(self) -> list[int]:
        """The partitions used for the first time: the old state topic is carried over to them."""
        return [p for p, s in self.states.items() if s.meta is None and s.unreadable_meta is None]


class RestoreReader:
    """Reads what a restore needs for stage 2's consumer (`consumer`), from its state topic (`changelog`),
    its verified outputs and the old state topic; given up on once `stopping()`."""

    def __init__(
        self,
        connection: KafkaConnection,
        consumer: KafkaConsumer,
        changelog: Changelog,
        outputs: OutputLog,
        legacy_topic: str | None,
        stopping: Callable[[], bool],
    ) -> None:
        self.connection, self.consumer, self.changelog = connection, consumer, changelog
        self.outputs, self.legacy_topic, self.stopping = outputs, legacy_topic, stopping

    def read(self, assigned: Sequence[TopicPartition], rewind_ms: int | None) -> ReadBack:
        """Everything a restore of `assigned` reads (KafkaTimeoutError once a stop gave it up; while not
        stopping, as long as it takes)."""
        where = f"{self.changelog.topic}[{','.join(str(tp.partition) for tp in assigned)}]"
        call = BoundedCall(lambda: self._read(assigned, rewind_ms), f"the restore of {where}")
        return call(self.stopping, math.inf)

    def _read(self, assigned: Sequence[TopicPartition], rewind_ms: int | None) -> ReadBack:
        changelog, consumer = self.changelog, self.consumer
        back = ReadBack(changelog.read([tp.partition for tp in assigned]))
        fresh = set(back.fresh())
        for key, value in legacy_states(self.connection, self.legacy_topic, dict.fromkeys(fresh, True)):
            # Where the old version's producer put the key's records (the default partitioner, murmur2).
            partition = (murmur2(key) & 0x7FFFFFFF) % changelog.partitions
            if partition in fresh:
                back.legacy.append((partition, key, value))
        for partition, state in back.states.items():
            if state.meta is not None and state.meta.outputs:
                found = self.outputs.find(state.meta.outputs)
                if found:
                    back.found[partition] = found
        # The consumer is not thread-safe; the stage waits for this call, so one thread uses it at a time.
        # A read given up on for a stop may still run while the service closes the consumer: whatever it
        # returns then is never applied.
        back.committed = {tp.partition: consumer.committed(tp) for tp in assigned}
        if rewind_ms:
            starts = consumer.offsets_for_times(dict.fromkeys(assigned, rewind_ms))
            back.rewind = {tp.partition: at.offset for tp, at in starts.items() if at is not None}
        return back
