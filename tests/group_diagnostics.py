"""What the members of a service's groups did and hold, said when a test of several members fails waiting:
a member that stopped reading after a rebalance shows which one, in which state, holding what.

`GroupDiagnostics` keeps the INFO lines of tracescore and of kafka-python's group coordinator from the
test's start, each named by the member whose thread logged it (its service thread, its clients' IO
threads). `explained()` wraps the test's waits: an AssertionError out of it prints those lines, what each
member's clients hold (their group state, assignment, paused partitions) and what the broker holds (each
group's members and assignments, committed against end offsets): pytest shows it with the failure only.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from tracescore._service import ServiceLoop

__all__ = ["GroupDiagnostics", "member_partitions"]

# tracescore's own lines, and kafka-python's joins, assignments and heartbeats failures.
_LOGGERS = ("tracescore", "kafka.coordinator")


class _Kept(logging.Handler):
    """Each record with the member whose thread logged it, named as it is logged: a thread's id is reused
    once it ended (a member that left), its object never."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[tuple[logging.LogRecord, str]] = []
        self.threads: dict[threading.Thread, str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        thread = threading.current_thread()
        self.records.append((record, self.threads.get(thread, thread.name)))


class GroupDiagnostics:
    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = bootstrap
        self._kept = _Kept()
        self._levels: dict[str, int] = {}
        self._members: dict[str, tuple[ServiceLoop, threading.Thread]] = {}
        for name in _LOGGERS:
            logger = logging.getLogger(name)
            self._levels[name] = logger.level
            if logger.getEffectiveLevel() > logging.INFO:
                logger.setLevel(logging.INFO)
            logger.addHandler(self._kept)

    def close(self) -> None:
        for name, level in self._levels.items():
            logger = logging.getLogger(name)
            logger.removeHandler(self._kept)
            logger.setLevel(level)

    def member(self, name: str, loop: ServiceLoop, thread: threading.Thread) -> None:
        """`loop` (a service's, to run on `thread`: named before it starts) named `name` in what is said."""
        self._members[name] = (loop, thread)
        self._kept.threads[thread] = name
        for stage, consumer in _stages(loop):
            io_thread = consumer._net._io_thread  # kafka-python's, started with the client: its group's lines
            if io_thread is not None:
                self._kept.threads[io_thread] = f"{name} {stage}"

    @contextmanager
    def explained(self) -> Iterator[None]:
        """A failed wait (AssertionError) inside: everything above printed, for pytest to show with it."""
        try:
            yield
        except AssertionError:
            print(self.report())
            raise

    def report(self) -> str:
        lines = ["=== what each member holds"]
        for name, (loop, thread) in self._members.items():
            if not thread.is_alive():
                lines.append(f"{name}: stopped")
                continue
            for stage, consumer in _stages(loop):
                lines.append(f"{name} {stage}: {_holds(consumer)}")
            if loop.keyed.not_restored:
                lines.append(f"{name} stage 2: restore given up on for {loop.keyed.not_restored}")
        if self._members:
            loop, _ = next(iter(self._members.values()))
            lines += ["=== what the broker holds", *_broker(self._bootstrap, loop)]
        lines.append("=== INFO lines (tracescore, kafka.coordinator)")
        for record, who in list(self._kept.records):
            lines.append(f"{record.relativeCreated / 1000:9.3f} [{who}] {record.name}: {record.getMessage()}")
        return "\n".join(lines)


def _stages(loop: ServiceLoop) -> list[tuple[str, KafkaConsumer]]:
    return [("stage 1", loop.rekey.consumer), ("stage 2", loop.keyed.consumer)]


def _holds(consumer: KafkaConsumer) -> str:
    """The member's own view: kafka-python's coordinator state (no public call says whether it will rejoin),
    its assignment and what of it is paused."""
    try:
        coordinator = consumer._coordinator
        group = consumer.group_metadata()
        join = coordinator._join_task
        return (
            f"state={group.state} generation={group.generation_id} member={group.member_id} "
            f"need_rejoin={coordinator.need_rejoin()} rejoin_needed={coordinator.rejoin_needed} "
            f"join_task={'none' if join is None else 'done' if join.is_done else 'under way'} "
            f"assigned={_names(consumer.assignment())} paused={_names(consumer.paused())}"
        )
    except Exception as exc:  # closed already, or mid-change: said rather than hiding the rest
        return f"unknown ({exc!r})"


def _names(partitions: Sequence[TopicPartition] | set[TopicPartition]) -> list[str]:
    return sorted(f"{tp.topic}[{tp.partition}]" for tp in partitions)


def _broker(bootstrap: str, loop: ServiceLoop) -> list[str]:
    """Each of the service's two groups as the broker describes it, and its committed offsets against the
    ends of what it reads; the state topic's ends."""
    stage_one = loop.rekey.consumer.config["group_id"]
    stage_two = loop.keyed.consumer.config["group_id"]
    groups = {stage_one: list(loop.topics.inputs), stage_two: [loop.topics.keyed]}
    lines = []
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_groups(list(groups))
    finally:
        admin.close()
    for group, topics in groups.items():
        about: dict[str, Any] = described.get(group) or {}
        lines.append(f"group {group}: state={about.get('group_state')}")
        for member in about.get("members") or []:
            lines.append(f"  member {member.get('member_id')}: {sorted(member_partitions(member))}")
        lines += [f"  {line}" for line in _offsets(bootstrap, group, topics)]
    lines += _offsets(bootstrap, None, [loop.topics.state])
    return lines


def member_partitions(member: dict[str, Any]) -> set[str]:
    """The partitions (`topic[partition]`) of a member as `KafkaAdminClient.describe_groups` describes it."""
    assignment = member.get("member_assignment") or {}
    owned = assignment.get("assigned_partitions", []) if isinstance(assignment, dict) else []
    return {f"{t['topic']}[{p}]" for t in owned for p in t["partitions"]}


def _offsets(bootstrap: str, group: str | None, topics: Sequence[str]) -> list[str]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        lines = []
        for topic in topics:
            tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            ends = consumer.end_offsets(tps)
            if group is None:
                lines.append(f"{topic} ends: {[ends[tp] for tp in tps]}")
                continue
            done = [consumer.committed(tp) for tp in tps]
            lines.append(
                f"{topic} committed/end: {[f'{c}/{ends[tp]}' for c, tp in zip(done, tps, strict=True)]}"
            )
        return lines
    finally:
        consumer.close(autocommit=False)
