"""What stage 2 reads from Kafka to restore newly assigned partitions, read on a worker thread a stop gives up
on (`BoundedCall`): the state topic's partitions, the old state topic on a partition's first use, the
outputs written after each partition's last saved state, and where to read the keyed topic again from.

Reading a large state topic takes as long as it takes, but no wait is open-ended: each broker call waits
BROKER_WAIT_S at most, and so does a read that gets no further (`read_partitions`). A read that timed out is
tried again `restore_retries` times, with growing pauses, each said in a warning; then `RestoreFailed` (one
line, the service exits: under Kubernetes the pod restarts and restores again). A stop gives the restore up at
once, and the thread it leaves ends within BROKER_WAIT_S: every read looks at the stop between two polls.
Nothing of what is read is applied until all of it is: a restore given up on leaves nothing half restored,
and the partitions' next owner (this service's next start) restores them again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.partitioner.default import murmur2
from kafka.structs import OffsetAndMetadata
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from tracescore._kafka import BROKER_WAIT_S, committed_offsets
from tracescore._kafka_config import KafkaConnection
from tracescore._service._bounded import STOP_CHECK_S, BoundedCall
from tracescore._service._changelog import META_SAVED, Changelog, PartitionState
from tracescore._service._outputs import Marks, OutputLog, lowest

__all__ = ["ReadBack", "RestoreFailed", "RestoreReader", "lost_state"]

_PAUSE_S = (1.0, 30.0)  # between two tries of a restore: doubling from the first, at most the second


class RestoreFailed(KafkaError):
    """The broker did not answer a restore's reads, tried `restore_retries` times more: one line that says
    what it waited for (a KafkaError: the command line prints it as one line, exit status 1)."""


@dataclass
class ReadBack:
    states: dict[int, PartitionState]
    # The old state topic's (partition, key, value) for partitions used for the first time (no meta yet).
    legacy: list[tuple[int, bytes, bytes]] = field(default_factory=list)
    # Per partition not used for the first time: where it looks for its outputs (its marks; a log start
    # where it has none).
    since: dict[int, Marks] = field(default_factory=dict)
    found: dict[str, str] = field(default_factory=dict)  # the outputs from there to the topics' ends
    committed: dict[int, int | None] = field(default_factory=dict)  # the group's committed offsets
    rewind: dict[int, int] = field(default_factory=dict)  # the first offset at or after `rewind_ms`
    # The partitions whose state was lost (`lost_state`): looked at like a meta without marks.
    lost: list[int] = field(default_factory=list)

    def fresh(self) -> list[int]:
        """The partitions used for the first time: the old state topic is carried over to them."""
        return [p for p in _without_meta(self.states) if p not in self.lost]


def _without_meta(states: Mapping[int, PartitionState]) -> list[int]:
    return [p for p, s in states.items() if s.meta is None and s.unreadable_meta is None]


def lost_state(
    states: Mapping[int, PartitionState], committed: Mapping[int, OffsetAndMetadata | None], legacy: bool
) -> list[int]:
    """The partitions of `states` without a meta whose input offsets were committed after one was saved: a
    partition's first meta goes out before its first output and before any offset committed with META_SAVED
    (`KeyedStage.save`), so such a partition lost its state (the state topic deleted, or named anew). An
    offset without META_SAVED (committed by an earlier version, or by a tool) says the same unless an old
    state topic is set (`legacy`): the single-partition version committed offsets on the same keyed topic,
    wrote no meta, and its state is carried over from that topic the first time a partition is used."""
    return [
        p
        for p in _without_meta(states)
        if (at := committed.get(p)) is not None and (at.metadata == META_SAVED or not legacy)
    ]


def _retriable(error: BaseException) -> bool:
    """A broker that did not answer in time, or not yet (a leader moving, the broker restarting)."""
    return isinstance(error, KafkaError) and bool(error.retriable)


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
        retries: int,
        log: logging.Logger,
    ) -> None:
        self.connection, self.consumer, self.changelog = connection, consumer, changelog
        self.outputs, self.legacy_topic, self.stopping = outputs, legacy_topic, stopping
        self.retries, self.log = retries, log

    def read(self, assigned: Sequence[TopicPartition], rewind_ms: int | None) -> ReadBack:
        """Everything a restore of `assigned` reads: KafkaTimeoutError once a stop gave it up; RestoreFailed
        when the broker did not answer its reads in `retries` + 1 tries."""
        where = f"{self.changelog.topic}[{','.join(str(tp.partition) for tp in assigned)}]"
        call = BoundedCall(lambda: self._read(assigned, rewind_ms), f"the restore of {where}")
        tries = Retrying(
            stop=stop_after_attempt(self.retries + 1),
            wait=wait_exponential(multiplier=_PAUSE_S[0], max=_PAUSE_S[1]),
            retry=retry_if_exception(lambda e: _retriable(e) and not self.stopping()),
            sleep=self._pause,
            before_sleep=lambda state: self._said(where, state),
            reraise=True,
        )
        started = time.monotonic()
        try:
            back = tries(call, self.stopping, math.inf)
        except KafkaError as exc:
            if self.stopping() or not _retriable(exc):
                raise
            raise RestoreFailed(
                f"could not restore {where}: the broker did not answer in {self.retries + 1} tries over "
                f"{time.monotonic() - started:.0f}s (restore_retries={self.retries}, each wait at most "
                f"{BROKER_WAIT_S:g}s); the last: {exc}. Nothing of those partitions was applied or "
                "committed: the next start restores them again once the broker answers"
            ) from exc
        if back.lost:
            self._said_lost(back.lost)
        return back

    def _said_lost(self, lost: Sequence[int]) -> None:
        topics = ", ".join(self.outputs.verified)
        self.log.warning(
            "the state topic %s has no meta for partition(s) %s of %s, whose offsets group %s committed "
            "after saving one: their state was lost (the topic deleted, or named anew). %s; their keys start "
            "again from the records after the committed offsets",
            self.changelog.topic,
            ",".join(map(str, lost)),
            self.changelog.source,
            self.consumer.config["group_id"],
            f"What they wrote is looked for on {topics} from the log start, so nothing found is written again"
            if topics
            else "No output topic to look at: what they decide again may go out again",
        )

    def _said(self, where: str, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome is not None else None
        pause = state.next_action.sleep if state.next_action is not None else 0.0
        self.log.warning(
            "restoring %s: %s; try %d of %d failed, trying again in %.0fs (restore_retries); nothing of "
            "those partitions is applied or committed meanwhile",
            where,
            error,
            state.attempt_number,
            self.retries + 1,
            pause,
        )

    def _pause(self, seconds: float) -> None:
        """tenacity's pause between two tries, cut short by a stop."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            if self.stopping():
                raise KafkaTimeoutError("the restore's pause: given up on, a stop was asked for")
            time.sleep(min(STOP_CHECK_S, max(0.0, until - time.monotonic())))

    def _read(self, assigned: Sequence[TopicPartition], rewind_ms: int | None) -> ReadBack:
        changelog, consumer, stopping = self.changelog, self.consumer, self.stopping
        back = ReadBack(changelog.read([tp.partition for tp in assigned], give_up=stopping))
        # The consumer is not thread-safe; the stage waits for this call, so one thread uses it at a time.
        # A read given up on for a stop may still run while the service closes the consumer (for one
        # BROKER_WAIT_S at most): whatever it returns then is never applied.
        if stopping():
            raise KafkaTimeoutError("the restore's commits: given up on, a stop was asked for")
        wait_ms = int(BROKER_WAIT_S * 1000)
        # One OffsetFetch for every assigned partition, not a round trip each.
        found = committed_offsets(consumer, assigned, wait_ms)
        committed = {tp.partition: at for tp, at in found.items()}
        back.committed = {p: None if at is None else at.offset for p, at in committed.items()}
        back.lost = lost_state(back.states, committed, legacy=bool(self.legacy_topic))
        fresh = set(back.fresh())
        legacy = changelog.legacy_states(self.legacy_topic, dict.fromkeys(fresh, True), stopping)
        for key, value in legacy:
            # Where the old version's producer put the key's records (the default partitioner, murmur2).
            partition = (murmur2(key) & 0x7FFFFFFF) % changelog.partitions
            if partition in fresh:
                back.legacy.append((partition, key, value))
        if stopping():
            raise KafkaTimeoutError("the restore's outputs: given up on, a stop was asked for")
        # A partition used for the first time never had an output: its first meta goes out before its first
        # output (`KeyedStage._first_metas`). Every other one is looked at (nothing found is held too: looked
        # at again before what it decides is sent): from its marks, or where a verified topic partition has
        # none (a meta unreadable, written before its owner knew that end; its state lost), from the log
        # start.
        looked_at = sorted(set(back.states) - fresh)
        if looked_at and self.outputs.verified:
            log_starts = self.outputs.log_starts()
            for partition in looked_at:
                meta = back.states[partition].meta
                back.since[partition] = self.outputs.since(meta.outputs if meta else {}, log_starts)
            # One look from the lowest marks for them all: what it finds of another partition's keys only
            # says written of what was written. It ends at the ends read as it starts (`find`), so a look
            # from a log start reads at most what retention keeps, and holds at most FOUND_AT_MOST ids.
            back.found = self.outputs.find(lowest(*back.since.values()), give_up=stopping)
        if rewind_ms:
            starts = consumer.offsets_for_times(dict.fromkeys(assigned, rewind_ms), timeout_ms=wait_ms)
            back.rewind = {tp.partition: at.offset for tp, at in starts.items() if at is not None}
        return back
