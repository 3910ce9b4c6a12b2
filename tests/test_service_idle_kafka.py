"""When `--idle-timeout` starts counting for a member of stage 1's cooperative group that joins after
another took every partition: its first generation gives it none (the other gives up its share first), the
next, a heartbeat later, gives it its own. Counted from the first, a short idle timeout stopped it having read
nothing. The member's rebalance listener and the service's look at the group's members, on the real broker;
and a service whose stage 2 its group gives nothing for good, which stops when idle."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from _helpers import wait_until
from _members import GuardedMember
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.structs import MemberState

from tracescore._kafka import RebalanceListener, group_member
from tracescore._kafka_config import KafkaConnection
from tracescore._service._awaited import GuardedJoins
from tracescore._service._group_check import GroupCheck
from tracescore.alert import AlertConfig, AlertService

pytestmark = pytest.mark.kafka

_log = logging.getLogger("tracescore")


def member(bootstrap: str, group: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        **group_member(10_000, "cooperative"),
    )
    wait_until(lambda: consumer.partitions_for_topic(topic), f"{topic}'s partitions known")
    return consumer


@pytest.fixture
def first_holds_all(bootstrap: str, topic_prefix: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A member of group `<prefix>.g` holding every partition of topic `<prefix>.in` (as many as the test's
    `partitions` mark says), polling on its own thread; the topic's name."""
    topic = f"{topic_prefix}.in"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, request.param, 1)])
    admin.close()
    first = member(bootstrap, f"{topic_prefix}.g", topic)
    # With the services' guards against kafka-python 3.0.12 leaving a join undone: without them, a rejoin of
    # this leader whose SyncGroup came after the poll that sent it was never taken, its heartbeats stayed off
    # and the group expired it, so the second member's first generation held every partition (seen once in a
    # loaded full run; its LeaveGroup at the close: UnknownMemberIdError).
    joins = GuardedJoins(first)
    joins.subscribe([topic], RebalanceListener(_log, assigned=lambda _: None, revoked=lambda _: None))

    def polled(timeout_ms: int) -> None:
        joins.before_poll()
        first.poll(timeout_ms)

    wait_until(lambda: polled(100) is None and len(first.assignment()) == request.param, "all held")
    done = threading.Event()

    def polls() -> None:
        while not done.is_set():
            polled(200)

    thread = threading.Thread(target=polls, daemon=True)
    thread.start()
    yield topic
    done.set()
    thread.join(30)
    first.close(autocommit=False)


@contextmanager
def joined(
    bootstrap: str, topic_prefix: str, topic: str
) -> Iterator[tuple[KafkaConsumer, RebalanceListener, GroupCheck, GuardedJoins]]:
    """A second member wired as stage 1 wires its own: each generation makes the look at the members due, and
    the look runs after each poll."""
    group = f"{topic_prefix}.g"
    look = GroupCheck(KafkaConnection(bootstrap_servers=bootstrap), group, "tracescore alert", lambda: False)
    listener = RebalanceListener(
        _log,
        assigned=look.changed,
        revoked=look.changed,
        regrouped=lambda: look.changed(()),
        outnumbered=look.outnumbered,
    )
    second = member(bootstrap, group, topic)
    joins = GuardedJoins(second)
    joins.subscribe([topic], listener)
    try:
        yield second, listener, look, joins
    finally:
        look.close()
        second.close(autocommit=False)


def step(second: KafkaConsumer, listener: RebalanceListener, look: GroupCheck, joins: GuardedJoins) -> None:
    joins.before_poll()
    second.poll(100)
    listener.polled(second)
    look()


@pytest.mark.parametrize("first_holds_all", [2], indirect=True)
def test_a_member_given_nothing_by_its_first_cooperative_generation_is_not_idle_until_its_partitions_come(
    bootstrap: str, topic_prefix: str, first_holds_all: str
) -> None:
    with joined(bootstrap, topic_prefix, first_holds_all) as (second, listener, look, joins):
        while second.group_metadata().state != MemberState.STABLE:
            step(second, listener, look, joins)
        assert not second.assignment(), "the first generation gives the member nothing: the other held all"
        while not second.assignment():
            # Before: the first stable generation started the idle clock, empty.
            assert listener.idle_from is None, "the idle clock started while the member's partitions came"
            step(second, listener, look, joins)
        assert listener.idle_from is not None


@pytest.mark.parametrize("first_holds_all", [1], indirect=True)
def test_a_member_of_a_group_with_more_members_than_partitions_starts_its_idle_clock_empty(
    bootstrap: str, topic_prefix: str, first_holds_all: str
) -> None:
    """Two members, one partition: the second's empty assignment is for good, and its idle clock starts."""
    with joined(bootstrap, topic_prefix, first_holds_all) as (second, listener, look, joins):
        wait_until(
            lambda: step(second, listener, look, joins) or listener.idle_from is not None, "the idle clock"
        )
        assert not second.assignment()


def test_an_instance_whose_stage_2_gets_nothing_for_good_while_its_input_is_unwritten_stops_when_idle(
    bootstrap: str, topic_prefix: str
) -> None:
    """Another instance holds the one routes partition, and nobody has written the evaluations topic yet:
    stage 1 waits for it in no group, and stage 2's empty assignment is for good (two members, one
    partition). Stage 2 judged that by stage 1's group, whose members it counted only at stage 1's changes:
    none came, the count stayed at the none found at the start, and the instance never stopped on its
    --idle-timeout. The other instance, a stand-in member of stage 2's group, polls on its own thread."""
    topics = {f"{name}_topic": f"{topic_prefix}.{name}" for name in ("evaluations", "routes", "state")}
    group = f"{topic_prefix}.alert"
    cfg = AlertConfig(bootstrap_servers=bootstrap, group_id=group, routes_partitions=1, **topics)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(cfg.routes_topic, 1, 1)])
    admin.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"{cfg.group_id}.routes",  # stage 2's group
        enable_auto_commit=False,
        **group_member(10_000, "cooperative"),
    )
    other = GuardedMember(consumer, cfg.routes_topic)
    done = threading.Event()

    def polls() -> None:
        while not done.is_set():
            other.poll(200)

    polling = threading.Thread(target=polls, daemon=True)
    try:
        wait_until(lambda: other.poll(100) is not None and other.assignment(), "the other's partition")
        polling.start()
        service = AlertService(cfg, [])
        running = threading.Thread(target=lambda: service.run(idle_timeout_s=1.0), daemon=True)
        running.start()
        running.join(60)  # joining, a look at the members, 1 s idle: seconds
        stopped = not running.is_alive()
        if not stopped:
            service.stop()
            running.join(60)
        assert other.assignment(), "the other instance kept the partition throughout"
    finally:
        done.set()
        if polling.is_alive():
            polling.join(30)
        other.close()
    assert stopped, "given no partition for good, the instance never stopped on its idle timeout"
