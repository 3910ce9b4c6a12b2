"""Stage 2 of a service: state per key, read from a keyed topic, saved to a state topic partitioned like it.

Poll, process and commit are separate steps (quix-streams' order):

* poll: `step` reads a batch; partitions newly assigned are restored first (their state topic partitions
  only, then their records again from the committed offset, or from `logic.rewind_ms()` for windows: a
  record before the committed offset is a replay, already reflected in the saved state);
* process: `logic.apply` per record, `logic.tick` on time;
* commit: `checkpoint` writes the outputs the logic decided, then the state that says they were written,
  then commits each partition's offset no further than the logic's floor (the oldest change of a state not
  yet saved). A crash between any two of these loses nothing: see docs, Contributing, Architecture.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.structs import OffsetAndMetadata

from tracescore._kafka import RebalanceListener, caught_up
from tracescore._kafka_config import KafkaConnection
from tracescore._plural import counted
from tracescore._service._awaited import GuardedJoins
from tracescore._service._bounded import BROKER_WAIT_S, poll_or_nothing
from tracescore._service._changelog import (
    META_SAVED,
    Changelog,
    ChangelogError,
    PartitionMeta,
    PartitionState,
)
from tracescore._service._codec import StateRecord, UnreadableState
from tracescore._service._counts import StateCount
from tracescore._service._crash import crash_point
from tracescore._service._found import FoundOutputs
from tracescore._service._group_check import GroupLook
from tracescore._service._keyed_logic import KeyedLogic, Saved
from tracescore._service._outputs import Marks, Output, OutputLog, seconds_left
from tracescore._service._restore import ReadBack, RestoreReader

__all__ = ["KeyedStage"]

_CHECK_TOPIC_S = 5.0  # how often the state topic is looked for (deleted while running)
_META_REFRESH_S = 60.0  # how often every partition's output marks are written anew
_POSITION_WAIT_MS = 100  # what a position call may wait (for the coordinator: committed offsets)


class KeyedStage:
    def __init__(
        self,
        *,
        log: logging.Logger,
        connection: KafkaConnection,
        consumer: KafkaConsumer,
        topic: str,
        changelog: Changelog,
        outputs: OutputLog,
        logic: KeyedLogic,
        counts: Counter[StateCount],
        legacy_topic: str | None,
        clock: Callable[[], datetime],
        restore_retries: int,
        stop_deadline: Callable[[], float | None] = lambda: None,
    ) -> None:
        self.log = log
        self.connection = connection
        self.consumer = consumer
        self.topic = topic
        self.changelog = changelog
        self.outputs = outputs
        self.logic = logic
        self.legacy_topic = legacy_topic
        self.clock = clock
        # A stop's deadline (None until one is asked for): the running checkpoint waits no longer, and leaves
        # the rest to the closing checkpoint, bounded by the same deadline.
        self._stop_deadline = stop_deadline
        self._stopping = lambda: stop_deadline() is not None
        self._listener: RebalanceListener | None = None
        self._joins: GuardedJoins | None = None  # stage 1's guards of its joins: see `_awaited`
        self._members: GroupLook | None = None  # the looks at its group's members (`subscribe`)
        # keys restored and carried over, the state topic recreated, partitions whose state was read back: in
        # the service's own counter (its stats' `state`)
        self.counts = counts
        self._pending: set[TopicPartition] = set()
        self._replay_below: dict[int, int] = {}
        # Per partition, the offset after the last record applied: where it is read to when the client cannot
        # say (its position call asks the group's coordinator, which may be gone when a stop comes).
        self._applied_to: dict[int, int] = {}
        self._committed: dict[int, int] = {}
        self._metas: dict[int, PartitionMeta] = {}
        self._meta_due: set[int] = set()
        # The partitions whose meta is on the state topic (restored, or saved since): see `_first_metas`.
        self._meta_saved: set[int] = set()
        # Per restored partition: the outputs found written after its last saved state (a crash came between
        # them), kept until its stream time passes its restore and no key older than that waits for a
        # decision (`_decided_again`); its meta keeps the marks they were found from meanwhile.
        self._found = FoundOutputs()
        self._topic_checked = 0.0
        self._metas_written = time.monotonic()
        self._rewrite: list[Saved] = []
        # The partitions whose position the last `positions()` did not ask of the client: the stop's deadline
        # had passed (what this stage knows itself taken instead).
        self.not_asked: list[int] = []
        self._reader = RestoreReader(
            connection, consumer, changelog, outputs, legacy_topic, self._stopping, restore_retries, log
        )
        self.not_restored: list[int] = []  # assigned partitions whose restore a stop gave up on

    # -- poll -------------------------------------------------------------------------------------------
    def subscribe(self, members: GroupLook | None = None) -> None:
        """`members`, cooperatively: the looks at this stage's own group, after each of its generations (an
        empty assignment starts the idle clock only once they outnumber the partitions). Stage 1's group
        misses an instance whose stage 1 waits in none for inputs no writer created yet: counted there, an
        empty assignment for good went unnoticed and such an instance never stopped on its idle timeout."""
        self._members = members
        self._listener = RebalanceListener(
            self.log,
            assigned=self._assigned,
            revoked=self._revoked,
            regrouped=None if members is None else members.changed,
            outnumbered=None if members is None else members.outnumbered,
        )
        self._joins = GuardedJoins(self.consumer, self._stopping)
        self._joins.subscribe([self.topic], self._listener)

    @property
    def first_assigned_at(self) -> float | None:
        """When the group first gave this member its partitions (none, too, when more members than them)."""
        return None if self._listener is None else self._listener.first_assigned_at

    def _assigned(self, assigned: Sequence[TopicPartition]) -> None:
        # On the client's IO thread while `poll` waits: park them until the main loop restored them. With
        # cooperative rebalancing `assigned` is only what was added: what the member keeps reads on.
        self._pending.update(assigned)
        self.consumer.pause(*assigned)

    def _revoked(self, revoked: Sequence[TopicPartition]) -> None:
        # Their new owner restores them from the state topic and reads again from the committed offset.
        gone = {tp.partition for tp in revoked}
        self.logic.forget_partitions(gone)
        self._pending.difference_update(revoked)
        for partition in gone:
            for table in (self._replay_below, self._applied_to, self._committed, self._metas):
                table.pop(partition, None)
        self._found.forget(gone)
        self._meta_due -= gone
        self._meta_saved -= gone

    def step(self, timeout_ms: int) -> int:
        """Poll once, restore what was newly assigned, apply the rest; the number of records read."""
        if self._joins is not None:
            self._joins.before_poll()  # a rejoin its metadata started waited for by this poll, and the next
        polled = poll_or_nothing(self.consumer, timeout_ms)
        if self._listener is not None:
            self._listener.polled(self.consumer)
        if self._members is not None:
            self._members()  # counted after a new generation (BROKER_WAIT_S at most)
        if self._pending:
            # Anything fetched for them before the seek is read again from the restored position.
            polled = {tp: m for tp, m in polled.items() if tp not in self._pending}
            self._restore()
        count = 0
        for tp, messages in polled.items():
            replay_below = self._replay_below.get(tp.partition, 0)
            for message in messages:
                self.logic.apply(message, message.offset < replay_below)
                self._applied_to[tp.partition] = message.offset + 1
                count += 1
        if count:
            crash_point("keyed.applied")
        return count

    def positions(self) -> dict[int, int | None]:
        """Where each restored partition is read to (None: not known yet); what this stage knows itself when
        the client cannot say (its position call asks the group's coordinator, gone with the broker) or, at a
        stop, is not asked any more (each call may wait: none past the stop's deadline, see `not_asked`)."""
        out: dict[int, int | None] = {}
        deadline = self._stop_deadline()
        self.not_asked = []
        for tp in self.consumer.assignment():
            if tp in self._pending or tp.partition not in self._replay_below:
                continue
            left = seconds_left(deadline)
            wait_ms = _POSITION_WAIT_MS if left is None else min(_POSITION_WAIT_MS, int(1000 * left))
            if wait_ms <= 0:
                self.not_asked.append(tp.partition)
                out[tp.partition] = self._known_position(tp.partition)
                continue
            try:
                out[tp.partition] = self.consumer.position(tp, timeout_ms=wait_ms)
            except KafkaError:
                out[tp.partition] = self._known_position(tp.partition)
        return out

    def _known_position(self, partition: int) -> int | None:
        # At least as far as applied, or committed (never before it: a replay).
        known = [at for at in (self._applied_to.get(partition), self._committed.get(partition)) if at]
        return max(known) if known else None

    def fully_read(self) -> bool:
        return not self._pending and caught_up(self.consumer)

    # -- restore ----------------------------------------------------------------------------------------
    def _restore(self) -> None:
        assigned = sorted(self._pending & self.consumer.assignment())
        self._pending.clear()
        if not assigned:
            return
        crash_point("keyed.restoring")
        mine = [tp.partition for tp in assigned]
        restored_at = int(self.clock().timestamp() * 1000)  # before anything is read: see `checkpoint`
        try:
            read = self._reader.read(assigned, self.logic.rewind_ms())
        except KafkaTimeoutError:  # given up on for a stop: nothing of them applied, none committed
            self.not_restored = mine
            raise
        self.counts[StateCount.PARTITIONS_READ] += len(mine)
        restored = sum(self._restore_partition(p, read.states[p]) for p in mine)
        self._meta_due.update(read.lost)  # a meta again at the next save, before the next commit
        migrated = self._migrate(read)
        self.logic.restored()
        self._found.add(read.since, read.found, restored_at)
        crash_point("keyed.restored")
        self.log.info(
            "restored %s of %s[%s] from %s%s",
            counted(restored, "key"),
            self.topic,
            ",".join(map(str, mine)),
            self.changelog.topic,
            f" and {migrated} from the old state topic {self.legacy_topic}" if migrated else "",
        )
        self._seek(assigned, read)
        self.consumer.resume(*assigned)

    def _restore_partition(self, partition: int, state: PartitionState) -> int:
        if state.unreadable_meta is not None:
            self.logic.skip(state.unreadable_meta.reason, f"partition meta: {state.unreadable_meta.detail}")
        self._metas[partition] = state.meta or PartitionMeta()
        if state.meta is not None:
            self._meta_saved.add(partition)
        restored = 0
        for key, value in state.values.items():
            if value is None:
                continue
            try:
                self.logic.restore(partition, key, self.logic.codec.decode(value), migrated=False)
            except UnreadableState as unreadable:
                # Read at every assignment, so skipping (counted, said once) is the only way on.
                self.logic.skip(unreadable.reason, unreadable.detail)
                continue
            restored += 1
        self.counts[StateCount.RESTORED] += restored
        return restored

    def _migrate(self, read: ReadBack) -> int:
        """First use of these partitions: carry over their keys' state from the old single-partition topic
        (read once; the partition meta written after them says it was)."""
        migrated = 0
        for partition, key, value in read.legacy:
            try:
                self.logic.restore(partition, key, self.logic.legacy(key, value), migrated=True)
            except UnreadableState as unreadable:
                self.logic.skip(unreadable.reason, f"old state topic: {unreadable.detail}")
                continue
            migrated += 1
        for partition in read.fresh():
            self._metas[partition] = PartitionMeta(migrated_from=self.legacy_topic if migrated else None)
            self._meta_due.add(partition)
        self.counts[StateCount.MIGRATED] += migrated
        return migrated

    def _seek(self, assigned: Sequence[TopicPartition], read: ReadBack) -> None:
        for tp in assigned:
            committed = read.committed.get(tp.partition)
            if committed is None:
                self.consumer.seek_to_beginning(tp)  # a new group: nothing was read before
                self._replay_below[tp.partition] = 0
                continue
            start = read.rewind.get(tp.partition)
            self.consumer.seek(tp, min(start, committed) if start is not None else committed)
            self._applied_to.pop(tp.partition, None)
            self._replay_below[tp.partition] = committed
            self._committed[tp.partition] = committed

    # -- commit -----------------------------------------------------------------------------------------
    def checkpoint(self, stream_time: Callable[[int], int] | None = None) -> None:
        """Outputs, then the state that records them, then the input offsets they cover; `stream_time`: the
        one the logic's tick just decided on."""
        if not self.consumer.assignment():
            return
        if time.monotonic() - self._topic_checked >= _CHECK_TOPIC_S:
            self._topic_checked = time.monotonic()
            crash_point("state_topic.look")
            try:
                gone = not self.changelog.check(self._stopping)
            except ChangelogError:  # partitioned unlike at the start: one line out of run()
                raise
            except KafkaError as exc:  # the broker restarting (or a stop asked for): look again next time
                self.log.debug("cannot look for %s now: %s", self.changelog.topic, exc)
                gone = False
            if self._stopping():  # asked for during the look: the stop's checkpoint does the rest, bounded
                return
            if gone:
                self._recreate()
        found = self.found_outputs()
        outputs = self.logic.outputs(found)
        if outputs:
            self.write(outputs, found, self._stop_deadline)
        self.save(wrote_outputs=bool(outputs))
        if stream_time is not None:
            # The previous owner decided what it wrote by a stream time before this restore: once the stream
            # time reaches the restore, every key it decided is held here. A key that changed since (its
            # next record came after the restore) is decided again only later, with what was found: kept
            # until no key older than the restore waits for a decision. Read to its end is not enough.
            self._found.release(lambda p, restored_at: self._decided_again(p, restored_at, stream_time))
        self.commit()
        again = self.logic.after_save()
        if again:
            crash_point("delivered")
            self._rewrite.extend(again)
            if not self._stopping():  # asked for during the deliveries: the stop's checkpoint saves, bounded
                self.save(wrote_outputs=False)

    def write(
        self, outputs: Sequence[Output], found: dict[str, str], until: Callable[[], float | None]
    ) -> None:
        """Send the `outputs` not `found` on the topics already, then mark all of them written (KafkaError;
        KafkaTimeoutError past `until()`). While a restore's window is open, the topics are looked at again
        first (not at a stop: no broker call it would wait for): what the previous owner sent and gave up on
        may have been appended since the restore read them, and would otherwise be written twice."""
        unwritten = [o for o in outputs if found.get(o.id) != o.digest]
        if unwritten:
            self._first_metas(until)
        if any(o.verified for o in unwritten) and self._found.held() and not self._stopping():
            try:
                found = self._found.look_again(
                    lambda since: self.outputs.find_to_ends(since, give_up=self._stopping)
                )
            except KafkaError as exc:  # written from what the restore found: the rest of the service goes on
                self.log.warning(
                    "could not look on the output topics again before writing %d output(s) (%s): one its "
                    "previous owner sent that the broker appended after the restore may be written twice",
                    len(unwritten),
                    exc,
                )
            unwritten = [o for o in unwritten if found.get(o.id) != o.digest]
        self.outputs.send(unwritten, until)
        self.logic.written(outputs, found)

    def _first_metas(self, until: Callable[[], float | None]) -> None:
        """Save the meta of each partition that has none on the state topic yet (first used, or the topic
        recreated), before any output goes out: its output marks are where the partition's next owner looks
        for what this one wrote (after a crash, or a send the broker appends late). Saved only after the
        outputs (a partition restored between two ticks decides at the next one), the next owner found no
        marks, did not look, and wrote the same decisions again. KafkaError, as `write`."""
        first = sorted(set(self._metas) - self._meta_saved)
        if not first:
            return
        # A fresh look at the ends; none at a stop (no broker call it would wait for): the ends known then
        # may lack a topic never looked at, which the next owner reads from its log start (`since`).
        marks = self.outputs.marks(refresh=False) if self._stopping() else self.outputs.ends()
        try:
            futures = self._write_metas(first, marks)
        except KafkaTimeoutError:  # no metadata for the state topic: deleted since the last look (`save`)
            if self._stopping() or self.changelog.check():
                raise
            self._recreate()
            return self._first_metas(until)
        failures = self.changelog.delivered(futures, until)
        if failures:
            raise failures[0]
        self._meta_saved.update(first)

    def _write_metas(self, partitions: Sequence[int], marks: Marks) -> list[Any]:
        """Send `partitions`' metas with the output marks `marks` (held back where a restore's are held)."""
        futures = []
        for partition in partitions:
            outputs = self._found.marks(partition, marks)
            meta = self._metas.get(partition, PartitionMeta()).model_copy(update={"outputs": outputs})
            self._metas[partition] = meta
            futures.append(self.changelog.write_meta(partition, meta))
        return futures

    def _decided_again(self, partition: int, restored_at: int, stream_time: Callable[[int], int]) -> bool:
        return stream_time(partition) >= restored_at and not self.logic.undecided(partition, restored_at)

    def found_outputs(self) -> dict[str, str]:
        """The ids (-> digest) of the outputs a restore found written after the last saved state."""
        return self._found.ids()

    def read_past_commit(self) -> list[int]:
        """The partitions read past their last commit."""
        return sorted(
            p for p, at in self.positions().items() if at is not None and at != self._committed.get(p)
        )

    @property
    def unsaved(self) -> int:
        """How many states a failed save left for the next one."""
        return len(self._rewrite)

    def _recreate(self) -> None:
        """The state topic was deleted while running: create it again and save every state held."""
        everything = self.logic.everything()
        self.log.error(
            "the state topic %s was deleted while running: recreating it (%s, compacted) and "
            "saving the %s this instance holds again (other instances save theirs)",
            self.changelog.topic,
            counted(self.changelog.partitions, "partition"),
            counted(len(everything), "state"),
        )
        self.changelog.recreate()
        self.counts[StateCount.RECREATED] += 1
        self._meta_due.update(self._metas)
        self._meta_saved.clear()
        self._rewrite = everything

    def save(self, wrote_outputs: bool, deadline: float | None = None, first: Sequence[Saved] = ()) -> int:
        """Save what is due, `first` first (KafkaError, and KafkaTimeoutError past `deadline`); the number of
        states."""
        saves, self._rewrite = [*self._rewrite, *first, *self.logic.to_save()], []
        if time.monotonic() - self._metas_written >= _META_REFRESH_S:
            # Output marks move on even where nothing changed: a restart reads the outputs from there.
            self._meta_due.update(self._metas)
            self._metas_written = time.monotonic()
        if wrote_outputs:
            self._meta_due.update(p for p, _, _ in saves)
        if not saves and not self._meta_due:
            return 0
        marks = self.outputs.marks(refresh=not self._stopping())  # no broker call a stop would wait for
        try:
            futures = [self._write(p, key, state) for p, key, state in saves]
            futures += self._write_metas(sorted(self._meta_due), marks)
        except KafkaTimeoutError:
            # No metadata for the topic: deleted between two looks. Anything else is the broker's problem.
            if deadline is not None:  # stopping: no look that may wait for a broker that is gone
                self._rewrite = [*self._rewrite, *saves]
                raise
            if self.changelog.check():
                raise
            self._recreate()
            self._rewrite = [*self._rewrite, *saves]
            return self.save(wrote_outputs)
        try:
            failures = self.changelog.delivered(
                futures, self._stop_deadline if deadline is None else lambda: deadline
            )
        except KafkaTimeoutError:
            self._rewrite = [*self._rewrite, *saves]
            raise
        if failures:
            self._rewrite = [*self._rewrite, *saves]
            raise failures[0]
        self._meta_saved.update(self._meta_due)
        self._meta_due.clear()
        crash_point("state.saved")
        return len(saves)

    def _write(self, partition: int, key: bytes, state: StateRecord | None) -> Any:
        value = None if state is None else self.logic.codec.encode(state)
        future = self.changelog.write(partition, key, value)
        crash_point("state.sent", before=self.changelog.flush)
        return future

    def _due(self, every: bool) -> dict[TopicPartition, OffsetAndMetadata]:
        # Restored partitions only: one revoked stays assigned until the rebalance completes, its keys gone.
        positions = {p: offset for p, offset in self.positions().items() if offset is not None}
        return {
            TopicPartition(self.topic, partition): OffsetAndMetadata(offset, META_SAVED, -1)
            for partition, offset in self.logic.commit_floors(positions).items()
            if every or self._committed.get(partition) != offset
        }

    def commit(self, deadline: float | None = None) -> None:
        """Commit the offsets the saved state covers (KafkaError past `deadline` if given, then every floor
        is committed again: the stop's last word with the group; without one a failure waits for the next
        checkpoint)."""
        due = self._due(every=deadline is not None)
        if not due:
            return
        left = seconds_left(deadline)
        if left is None:  # the running checkpoint's: BROKER_WAIT_S, and no longer than a stop's deadline
            stop_left = seconds_left(self._stop_deadline())
            left = BROKER_WAIT_S if stop_left is None else min(BROKER_WAIT_S, stop_left)
        try:
            self.consumer.commit(due, timeout_ms=max(1, int(1000 * left)))
        except KafkaError as exc:  # a rebalance under way: the next checkpoint commits, or the new owner
            if deadline is not None:
                raise
            self.log.debug("commit of %s deferred: %s", self.topic, exc)
            return
        self._committed.update({tp.partition: meta.offset for tp, meta in due.items()})
        crash_point("committed")
