"""A member waiting for inputs that their writers have not created yet (tracescore/_service/_awaited.py), on
the real broker: it looks for them on one client of its own for the whole wait, closed once nothing is
awaited and at the stop, which ends a look under way at once, however long the broker takes to answer it;
its own metadata before it joins waits no longer than the service's broker wait, nor past a stop; the
rejoin that extending its subscription starts is waited for until it completes, however short its polls; and
a join that completed between two polls is taken, not thrown away for another rebalance."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from _helpers import consumer_settings, pause, wait_until
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import Cancelled
from kafka.structs import MemberState

from tracescore._kafka import (
    BROKER_WAIT_S,
    RebalanceListener,
    group_member,
    not_creating_topics,
    quiet_kafka_client_noise,
    topic_partitions,
)
from tracescore._kafka_config import RebalanceProtocol
from tracescore._service import _awaited
from tracescore._service._awaited import AwaitedInputs
from tracescore.alert import AlertConfig, AlertService
from tracescore.consume import EvaluationConsumer
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

LOOKING = "tracescore: looking for the inputs not written yet"  # the name of a look's thread


class Probes:
    """Every client the looks made (kafka-python's KafkaConsumer, counted): each look (`topic_partitions`),
    how it ended, and whether it was closed."""

    def __init__(self) -> None:
        self.made: list[Any] = []
        probes = self

        class Probe(KafkaConsumer):  # type: ignore[misc]
            def __init__(self, **config: Any) -> None:
                self.looks: list[BaseException | None] = []  # None: under way, or answered
                self.answered = 0  # looks ended
                self.named: list[list[str]] = []  # the topics each look asked for
                self.closed = False
                super().__init__(**config)
                probes.made.append(self)

            def look(self, topics: Any, *args: Any) -> Any:
                self.looks.append(None)
                self.named.append(sorted(topics))
                try:
                    return topic_partitions(self, topics, *args)
                except BaseException as exc:
                    self.looks[-1] = exc
                    raise
                finally:
                    self.answered = len(self.looks)

            def close(self, *args: Any, **kwargs: Any) -> None:
                self.closed = True
                super().close(*args, **kwargs)

        self.kind = Probe

    def looks(self) -> int:
        """The looks that ended, over every client."""
        return sum(p.answered for p in self.made)


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> Probes:
    made = Probes()
    monkeypatch.setattr(_awaited, "KafkaConsumer", made.kind)

    def look(client: KafkaConsumer, *args: Any) -> Any:  # a look's client counts it; the member's does not
        return client.look(*args) if isinstance(client, made.kind) else topic_partitions(client, *args)

    monkeypatch.setattr(_awaited, "topic_partitions", look)
    return made


def member(bootstrap: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, **not_creating_topics())


def awaited(
    consumer: KafkaConsumer, bootstrap: str, topic: str, absent: bool = True, **stopping: Callable[[], bool]
) -> AwaitedInputs:
    """`topic` awaited (`absent`) or subscribed to at once; `stopping`, a stop asked for."""
    listener = RebalanceListener(logging.getLogger("tracescore"), assigned=print, revoked=print)
    absent_topics = [topic] if absent else []
    return AwaitedInputs(
        consumer, [topic], listener, absent_topics, {"bootstrap_servers": bootstrap}, **stopping
    )


def looked(inputs: AwaitedInputs, probes: Probes, looks: int) -> Callable[[], bool]:
    """The poll loop's look, until `looks` looks ended."""

    def condition() -> bool:
        inputs.look()
        return probes.looks() >= looks

    return condition


@contextmanager
def not_answering(broker: KafkaBroker) -> Iterator[None]:
    """The broker frozen (SIGSTOP): connections stay open, no request is answered until it resumes."""
    assert broker.process is not None
    try:
        pause(broker.process.pid)
        yield
    finally:
        broker.process.send_signal(signal.SIGCONT)


def test_the_looks_share_one_client_closed_once_the_input_exists(
    bootstrap: str, topic_prefix: str, probes: Probes
) -> None:
    """A new client every second for as long as the writer had not created the topic: a connection churn on
    the broker of every member of a fleet waiting for its input."""
    topic = f"{topic_prefix}.later"
    consumer = member(bootstrap)
    inputs = awaited(consumer, bootstrap, topic)
    try:
        wait_until(looked(inputs, probes, 3), "three looks")
        assert len(probes.made) == 1, "a client of its own for each look"
        assert {tuple(n) for n in probes.made[0].named} == {(topic,)}, "asked for more than the input"
        input_producer(bootstrap, [topic]).close()
        wait_until(lambda: (inputs.look(), not inputs.absent)[1], "the topic found")
        assert consumer.subscription() == {topic}
        assert [p.closed for p in probes.made] == [True], "nothing awaited: its client closed"
        inputs.look()
        assert len(probes.made) == 1, "no look once nothing is awaited"
    finally:
        inputs.close()
        consumer.close()


def test_closing_ends_a_look_the_broker_does_not_answer(
    own_broker: KafkaBroker, topic_prefix: str, probes: Probes, caplog: pytest.LogCaptureFixture
) -> None:
    """A look under way at a stop kept its client open, and its thread running, until the broker's answer or
    the request timeout (BROKER_WAIT_S): past the stop of a service run in-process. Closing cancels it now,
    without kafka-python's ERROR for the request cancelled on purpose (what the command line installs)."""
    quiet_kafka_client_noise()
    bootstrap = own_broker.bootstrap_servers
    consumer = member(bootstrap)
    inputs = awaited(consumer, bootstrap, f"{topic_prefix}.later")
    try:
        wait_until(looked(inputs, probes, 1), "a first look, answered")
        [probe] = probes.made
        with not_answering(own_broker):
            wait_until(lambda: (inputs.look(), len(probe.looks) == 2)[1], "a look the broker does not answer")
            [look] = [t for t in threading.enumerate() if t.name == LOOKING]
            inputs.close()
            look.join(60)
            assert not look.is_alive()
            assert probe.closed
            assert isinstance(probe.looks[1], Cancelled), f"ended by the close, not a timeout: {probe.looks}"
    finally:
        inputs.close()
        consumer.close()
    assert [
        r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR and r.name == "kafka.cluster"
    ] == []


def test_a_stop_is_not_kept_waiting_by_the_metadata_asked_for_before_joining(
    own_broker: KafkaBroker, topic_prefix: str
) -> None:
    """The member's own metadata, asked for once it subscribes, was waited for on the poll thread for
    kafka-python's request timeout (30 s) while the broker did not answer: longer than any broker call of
    the service's pass (BROKER_WAIT_S, now its most), and a stop asked for meanwhile waited too."""
    bootstrap = own_broker.bootstrap_servers
    topic = f"{topic_prefix}.present"
    input_producer(bootstrap, [topic]).close()
    consumer = member(bootstrap)
    consumer.topics()  # connected to the broker, as a member that polled its other inputs is
    stop = threading.Event()
    made: list[AwaitedInputs] = []
    try:
        with not_answering(own_broker):
            joining = threading.Thread(
                target=lambda: made.append(awaited(consumer, bootstrap, topic, False, stopping=stop.is_set))
            )
            joining.start()
            # Subscribed: the metadata is asked for next, which the broker does not answer.
            wait_until(lambda: consumer.subscription() == {topic}, "subscribed")
            stop.set()
            joining.join(2 * BROKER_WAIT_S)  # the request timeout of kafka-python's (30 s) is longer
            assert not joining.is_alive(), "the poll thread still waits for the broker's metadata"
        assert [i.absent for i in made] == [()]
        assert consumer.subscription() == {topic}
    finally:
        consumer.close()


class Polling:
    """A group member of `topics`, each subscribed to once it exists (AwaitedInputs), polling on a thread of
    its own as a service's stage 1 does, but for `poll_ms` at a time: a rejoin takes longer than one poll."""

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topics: list[str],
        absent: list[str],
        poll_ms: int,
        protocol: RebalanceProtocol = "cooperative",
    ) -> None:
        client = {"bootstrap_servers": bootstrap}
        self.consumer = KafkaConsumer(
            **client, group_id=group, enable_auto_commit=False, **not_creating_topics(),
            **group_member(3_000, protocol),
        )  # fmt: skip
        listener = RebalanceListener(logging.getLogger("tracescore"), assigned=print, revoked=print)
        self.inputs = AwaitedInputs(self.consumer, topics, listener, absent, client)
        self._poll_ms = poll_ms
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.inputs.look()
            self.consumer.poll(timeout_ms=self._poll_ms)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.inputs.close()
        self.consumer.close(autocommit=False)


def test_a_member_whose_input_appears_completes_its_rejoin_however_short_its_polls(
    bootstrap: str, topic_prefix: str
) -> None:
    """Two members of a group share its first input; a second appears, and the member that reads it too
    extends its subscription: a rejoin that waits for the other member's, longer than a poll. kafka-python
    3.0.12 waits for a join in later polls only when its coordinator asked for it, not when a changed
    subscription (or the leader's metadata) started it: the member never took its new assignment, its
    heartbeats stayed off, the group dropped it after its session and it never rejoined (two `tracescore
    conversations`, once in 12 runs at their 200 ms polls). Both keep their share now, and the one that reads
    it holds the new input."""
    first, later = f"{topic_prefix}.first", f"{topic_prefix}.later"
    input_producer(bootstrap, [NewTopic(first, 2, 1)]).close()
    group = f"{topic_prefix}.group"
    members = [Polling(bootstrap, group, [first], [], 50)]
    try:

        def shared(topics: list[str]) -> bool:
            owned = [m.consumer.assignment() for m in members]
            every = {TopicPartition(t, p) for t in topics for p in range(2)}
            return (
                all(owned) and (len(owned) == 1 or not owned[0] & owned[1]) and set().union(*owned) == every
            )

        wait_until(lambda: shared([first]), "the first member given the first input")  # it leads the group
        members.append(Polling(bootstrap, group, [first, later], [later], 50))
        wait_until(lambda: shared([first]), "the first input shared")
        input_producer(bootstrap, [NewTopic(later, 2, 1)]).close()
        # The leader knows the new input's partitions when it assigns them (else it assigns none, and rejoins
        # at once once it knows them: a second rebalance that hid the hazard now and then).
        wait_until(
            lambda: members[0].consumer.partitions_for_topic(later), "the new input known to the leader"
        )
        wait_until(
            lambda: shared([first, later]), "both inputs read, each partition by one member", timeout_s=60
        )
    finally:
        for m in members:
            m.close()


def test_a_member_takes_the_join_that_completed_between_its_polls(bootstrap: str, topic_prefix: str) -> None:
    """A second member joins a group whose leader spends most of its time between polls (a service's
    checkpoints, its other stage's poll): the leader's join completes when the other member rejoins, while it
    does not poll. kafka-python 3.0.12 threw such a join away at the next poll and sent a new JoinGroup,
    which from the leader is another rebalance, completed most likely between two of its polls again: one a
    heartbeat interval for as long as it ran, the leader never taking its assignment (its heartbeats off).
    Its next poll takes it now: the leader holds the generation the other member joined."""
    topic, group = f"{topic_prefix}.input", f"{topic_prefix}.group"
    input_producer(bootstrap, [NewTopic(topic, 6, 1)]).close()
    client = {"bootstrap_servers": bootstrap}
    leader = KafkaConsumer(
        **client, group_id=group, enable_auto_commit=False, **not_creating_topics(),
        **group_member(9_000, "eager"),  # cooperatively, the join it takes starts a second one at once
    )  # fmt: skip
    listener = RebalanceListener(logging.getLogger("tracescore"), assigned=print, revoked=print)
    inputs = AwaitedInputs(leader, [topic], listener, [], client)  # the service's stage 1, and `consume`

    def polled(timeout_ms: int) -> None:
        inputs.look()
        leader.poll(timeout_ms=timeout_ms)

    other: Polling | None = None
    try:
        wait_until(lambda: polled(200) or len(leader.assignment()) == 6, "the leader alone given all")
        other = Polling(bootstrap, group, [topic], [], 200, protocol="eager")
        joined = other.consumer.group_metadata

        def between_polls() -> bool:  # its polls start its join and never wait for it
            polled(0)
            return joined().state == MemberState.STABLE

        wait_until(between_polls, "the other member's join completed", every_s=0.5)
        generation = joined().generation_id
        polled(300)
        assert (leader.group_metadata().state, leader.group_metadata().generation_id) == (
            MemberState.STABLE,
            generation,
        ), "the leader's completed join was thrown away: it started another rebalance"
    finally:
        if other is not None:
            other.close()
        inputs.close()
        leader.close(autocommit=False)


def test_a_stage_2_member_that_led_without_its_topic_takes_the_rejoin_its_metadata_started(
    bootstrap: str, topic_prefix: str
) -> None:
    """Stage 2's member (`KeyedStage`) leads its group from metadata without the keyed topic's partitions
    (its first join answered before its own metadata update, which a loaded machine sees: the topic exists,
    created by another client) and assigns none of them; once its metadata has them, it rejoins, a rejoin
    that waits for the other instance's member and completes while it does not poll (its loop spends most
    of its time in stage 1's poll, ticks, checkpoints). kafka-python 3.0.12 waits for such a rejoin only in
    the poll that sends it: the member never took its assignment, its heartbeats stayed off, its share of
    the keyed topic was read by no one until the group dropped it after its session, and it read nothing
    of it again. Stage 1's guards (`AwaitedInputs`) are stage 2's too now: it holds its share."""
    prefix = f"{topic_prefix}-keyed"
    service = conversations(bootstrap, prefix)
    stage, keyed = service._loop.keyed, service.config.turns_topic
    group = stage.consumer.config["group_id"]

    def generation(consumer: KafkaConsumer) -> tuple[MemberState, int]:
        joined = consumer.group_metadata()
        return joined.state, joined.generation_id

    other: Polling | None = None
    try:
        stage.subscribe()  # the keyed topic not in its metadata: the stand-in for a late metadata update
        wait_until(lambda: stage.step(200) == 0 and stage.first_assigned_at is not None, "the member joined")
        other = Polling(bootstrap, group, [keyed], [], 200)  # the other instance's member, polling on its own
        both = other.consumer

        def settled() -> bool:
            stage.step(200)
            mine, theirs = generation(stage.consumer), generation(both)
            return mine == theirs and mine[0] is MemberState.STABLE

        wait_until(settled, "both members in one generation, the stage's leading it")
        assert not stage.consumer.assignment() and not both.assignment(), "no keyed topic: nothing assigned"
        input_producer(bootstrap, [NewTopic(keyed, 2, 1)]).close()
        service._loop._changelog.ensure()  # the state topic, as a start makes it
        wait_until(
            lambda: stage.consumer.partitions_for_topic(keyed), "the keyed topic in the leader's metadata"
        )
        before = generation(both)[1]

        def between_polls() -> bool:  # each poll starts or looks at its rejoin and never waits for it
            stage.step(0)
            state, at = generation(both)
            return state is MemberState.STABLE and at > before

        wait_until(between_polls, "the other member's rejoin completed", every_s=0.5)
        deadline = time.monotonic() + 10  # its next polls, as the service's loop makes them
        while generation(stage.consumer) != generation(both) and time.monotonic() < deadline:
            stage.step(200)
        assert generation(stage.consumer) == generation(both), (
            f"the stage's member {generation(stage.consumer)}, the other {generation(both)}: its rejoin "
            "never taken, its heartbeats off, the keyed topic's partitions it assigned itself read by no one"
        )
        every = {TopicPartition(keyed, p) for p in range(2)}
        mine, theirs = stage.consumer.assignment(), both.assignment()
        assert mine and theirs and not mine & theirs and mine | theirs == every, (mine, theirs)
    finally:
        if other is not None:
            other.close()
        service._loop._close(time.monotonic() + 10)


def test_a_consumer_set_up_twice_holds_its_completed_joins_once(bootstrap: str, topic_prefix: str) -> None:
    """Both set-ups of a member (stage 1's inputs, a stage subscribing again) on one consumer: its joins are
    wrapped once, so a held join is one assignment, taken by one completion."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=f"{topic_prefix}.group", **not_creating_topics()
    )
    try:
        _awaited.take_completed_joins(consumer)
        wrapped = consumer._coordinator._do_join_and_sync_async, consumer._coordinator._on_join_complete_async
        _awaited.take_completed_joins(consumer)
        assert (
            consumer._coordinator._do_join_and_sync_async,
            consumer._coordinator._on_join_complete_async,
        ) == wrapped
    finally:
        consumer.close(autocommit=False)


def alert(bootstrap: str, prefix: str) -> AlertService:
    return AlertService(
        AlertConfig(
            bootstrap_servers=bootstrap, evaluations_topic=f"{prefix}.evaluations", group_id=f"{prefix}-alert"
        ),
        [],
    )


def conversations(bootstrap: str, prefix: str) -> ConversationService:
    cfg = ConversationsConfig(
        bootstrap_servers=bootstrap, evaluations_topic=f"{prefix}.evaluations",
        conversations_topic=f"{prefix}.conversations", spans_topic="", evidence_topic="",
        group_id=f"{prefix}-conversations", tick_seconds=0.2,
    )  # fmt: skip
    return ConversationService(cfg)


def consume(bootstrap: str, prefix: str) -> EvaluationConsumer:
    settings = consumer_settings(bootstrap, prefix, idle_timeout_s=None)
    return EvaluationConsumer(settings, judge=OfflineJudge(), metrics=[Faithfulness()])


@pytest.mark.parametrize("make", [consume, alert, conversations], ids=["consume", "alert", "conversations"])
def test_a_service_stopped_while_waiting_for_its_input_closes_the_looks_client(
    bootstrap: str,
    topic_prefix: str,
    probes: Probes,
    make: Callable[[str, str], EvaluationConsumer | AlertService | ConversationService],
) -> None:
    """Each service's stop closes the client its looks share (held for the whole wait now), with its other
    clients: nothing of the service left open or running once `run()` returned."""
    service = make(bootstrap, topic_prefix)
    running = threading.Thread(target=service.run, daemon=True)
    running.start()
    try:
        wait_until(lambda: probes.looks() >= 1, "a look for the input", timeout_s=120)
    finally:
        service.stop()
        running.join(60)
    assert not running.is_alive()
    assert probes.made and all(p.closed for p in probes.made), "the looks' client left open"
    wait_until(lambda: not [t for t in threading.enumerate() if t.name == LOOKING], "no look left running")
