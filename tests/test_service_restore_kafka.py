"""The service base's restore (newly assigned partitions' state read back: tracescore/_service/_restore.py),
run by `tracescore conversations` in process, while the broker stops answering: a real broker paused with
SIGSTOP (it stops answering, connections stay open) at the moment the service starts reading. A stop leaves
no thread reading behind; without a stop the service says what it waits for, tries again `restore_retries`
times and exits with one line, instead of hanging without a word."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from _helpers import pause, wait_until
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.coordinator.consumer import ConsumerCoordinator
from kafka.errors import KafkaError

import tracescore._kafka
from tracescore._kafka_config import KafkaConnection
from tracescore._service import (
    OUTPUT_DIGEST_HEADER,
    OUTPUT_ID_HEADER,
    OutputLog,
    PartitionMeta,
    _changelog,
    _clock,
    _keyed,
    _overdue,
    _restore,
)
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import EvaluationRecord, MetricStatus
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer, topic_probe

pytestmark = pytest.mark.kafka

STOP_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaBroker]:
    with KafkaBroker() as own:  # its own: paused by the tests
        yield own


def paused_at_the_restore(broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The broker paused once the service reaches its first restore, before it reads anything (set then)."""
    reached = threading.Event()
    real = _keyed.crash_point

    def crash_point(name: str, before: Callable[[], object] | None = None) -> None:
        if name == "keyed.restoring" and not reached.is_set():
            pause(broker.process.pid)
            reached.set()
        real(name, before)

    monkeypatch.setattr(_keyed, "crash_point", crash_point)
    return reached


def service_threads(before: set[threading.Thread], named: str = "tracescore") -> list[threading.Thread]:
    """The threads started since `before` whose name starts with `named`: ours, and kafka-python's threads of
    the service's clients (named after their client_id)."""
    return [t for t in threading.enumerate() if t not in before and t.name.startswith(named)]


def where(thread: threading.Thread) -> str:
    """A thread that outlived the stop, and where it waits."""
    frame = sys._current_frames().get(thread.ident or 0)
    return f"{thread.name} outlived the stop:\n" + "".join(traceback.format_stack(frame)[-8:])


def started(broker: KafkaBroker, prefix: str, **settings: object) -> tuple[ConversationService, list]:  # type: ignore[type-arg]
    """An open conversation, and the service that restores it on its own thread; [what run() raised]."""
    bootstrap = broker.bootstrap_servers
    producer = input_producer(bootstrap, [f"{prefix}.evaluations"], acks="all")
    for n in range(1, 4):
        record = EvaluationRecord(
            trace_id=f"{n:032x}", span_id=f"{n:016x}", service_name="chat-api", route="/chat",
            metric="faithfulness", score=1.0, label="faithful", status=MetricStatus.OK, judge="offline",
            session_id="c-1", timestamp=datetime.now(UTC),
        )  # fmt: skip
        key, value = record.to_kafka()
        producer.send(f"{prefix}.evaluations", key=key, value=value).get(30)
    producer.close()
    cfg = ConversationsConfig(
        bootstrap_servers=bootstrap, evaluations_topic=f"{prefix}.evaluations",
        conversations_topic=f"{prefix}.conversations", turns_topic=f"{prefix}.turns",
        state_topic=f"{prefix}.state", spans_topic="", evidence_topic="", group_id=f"{prefix}.conversations",
        tick_seconds=0.2, stop_timeout_s=STOP_TIMEOUT_S, **settings,
    )  # fmt: skip
    service, raised = ConversationService(cfg), []

    def run() -> None:
        try:
            service.run()
        except Exception as exc:  # what the command line would print
            raised.append(exc)

    threading.Thread(target=run, name="test-service", daemon=True).start()
    return service, raised


def stopped_while_restoring(broker: KafkaBroker, prefix: str, before: set[threading.Thread]) -> list:  # type: ignore[type-arg]
    """The service started, then stopped once its restore's own thread reads from the paused broker (the
    service's clients' threads, named after its client_id, are there from the start); [what run() raised]."""
    service, raised = started(broker, prefix)
    wait_until(lambda: service_threads(before, "tracescore: the restore of"), "the restore's reads under way")
    runner = next(t for t in threading.enumerate() if t.name == "test-service")
    service.stop()
    runner.join(3 * (STOP_TIMEOUT_S + 5.0))
    assert not runner.is_alive(), "run() did not return"
    return raised


def test_a_restore_given_up_at_a_stop_leaves_no_thread_reading_from_a_broker_that_does_not_answer(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restore's reads run on a thread a stop gives up on; that thread went on reading until the broker
    answered again (for ever, with the broker gone), in every process that ran the service and stopped it
    (a test run, an app embedding it). Now every read looks at the stop between two polls and each broker
    call waits BROKER_WAIT_S at most: the thread ends within that, the broker still paused."""
    paused_at_the_restore(broker, monkeypatch)
    before = set(threading.enumerate())
    try:
        raised = stopped_while_restoring(broker, "restore-stop", before)
        assert not raised, raised
        for thread in service_threads(before):  # every one still there once run() returned
            # Generous: the call under way ends within BROKER_WAIT_S, then the thread looks at the stop.
            thread.join(tracescore._kafka.BROKER_WAIT_S + 10.0)
        left = service_threads(before)
        assert not left, "\n".join(where(t) for t in left)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)


def test_a_restore_given_up_as_a_stop_begins_is_a_stop_not_an_error(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stop() starts the stop's budget, which the restore gives up on, then its backstop timer, then marks the
    service stopping: a restore given up on in between (the service thread runs while the timer's thread
    starts, more often under load) came out of run() as an error, "given up on, a stop was asked for", where
    a stop returns. Here the timer's start waits for run() to end."""
    real_timer = _overdue.threading.Timer

    class SlowToStart(real_timer):  # type: ignore[misc,valid-type]
        def start(self) -> None:
            if getattr(self.function, "__name__", "") == "_exit_overdue":
                runner = next(t for t in threading.enumerate() if t.name == "test-service")
                runner.join(3 * (STOP_TIMEOUT_S + 5.0))
            super().start()

    monkeypatch.setattr(_overdue.threading, "Timer", SlowToStart)
    paused_at_the_restore(broker, monkeypatch)
    try:
        raised = stopped_while_restoring(broker, "restore-stop-begins", set(threading.enumerate()))
        assert not raised, raised
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)


def test_a_restore_that_gets_no_answer_says_so_tries_again_and_exits_with_one_line(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without a stop, a restore from a broker that stopped answering waited for ever and said nothing: the
    service looked alive and did nothing. Now each wait is bounded, each failed try is a warning that names
    what it reads, and after `restore_retries` more tries the service ends with one line (status 1 from the
    command line; a restarted pod restores again, nothing applied or committed before)."""
    for module in (tracescore._kafka, _restore):  # a shorter wait, for the test's time only
        monkeypatch.setattr(module, "BROKER_WAIT_S", 2.0, raising=False)
    reached = paused_at_the_restore(broker, monkeypatch)
    caplog.set_level(logging.WARNING, logger="tracescore")
    try:
        _, raised = started(broker, "restore-hang", restore_retries=1)
        assert reached.wait(120), "never restored"
        wait_until(lambda: raised, "the service to give up the restore")
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    [error] = raised
    assert isinstance(error, _restore.RestoreFailed), repr(error)
    assert "could not restore restore-hang.state[" in str(error), error
    assert "2 tries" in str(error) and "restore_retries=1" in str(error), error
    tries = [r.getMessage() for r in caplog.records if "try 1 of 2 failed" in r.getMessage()]
    assert len(tries) == 1 and tries[0].startswith("restoring restore-hang.state["), caplog.text


def paused_at_the_look_for(
    topic: str, broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, connected: bool = False
) -> threading.Event:
    """The broker paused once a client of the state topics' (its probes) first looks for `topic`
    (`topic_partitions`; set then): a metadata request the broker will not answer. `connected`: the
    client's connection to the broker made first (a look at the topic), so that only the request's own
    timeout can end it (a new connection's setup gives up after kafka-python's 10 s)."""
    reached = threading.Event()
    look = _changelog.topic_partitions

    def paused_at_the_look(client: KafkaConsumer, topics: Sequence[str], *args: Any) -> Any:
        if topic in topics and not reached.is_set():
            if connected:
                look(client, [topic])
            pause(broker.process.pid)
            reached.set()
        return look(client, topics, *args)

    monkeypatch.setattr(_changelog, "topic_partitions", paused_at_the_look)
    return reached


def test_a_look_for_the_old_state_topic_that_gets_no_answer_is_tried_again_and_exits_with_one_line(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """On a partition's first use the restore looks for the old single-partition state topic
    (legacy_state_topic) to carry its state over. That look had no limit of ours: a broker that stopped
    answering held it for kafka-python's own timeouts (its bootstrap's 30 s, its request's), which a stop did
    not cut short either, and the warning said only "Request timed out", not what was read. Now it is bounded
    like the restore's reads: BROKER_WAIT_S (or a stop), a warning per failed try naming the look, then one
    line."""
    for module in (tracescore._kafka, _restore, _changelog):  # a shorter wait, for the test's time only
        monkeypatch.setattr(module, "BROKER_WAIT_S", 2.0, raising=False)
    old = "legacy-look.old-state"
    reached = paused_at_the_look_for(old, broker, monkeypatch)
    caplog.set_level(logging.WARNING, logger="tracescore")
    try:
        _, raised = started(broker, "legacy-look", restore_retries=1, legacy_state_topic=old)
        assert reached.wait(120), "never looked for the old state topic"
        wait_until(lambda: raised, "the service to give up the restore", timeout_s=60.0)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    [error] = raised
    assert isinstance(error, _restore.RestoreFailed), repr(error)
    assert "could not restore legacy-look.state[" in str(error) and "2 tries" in str(error), error
    [said] = [r.getMessage() for r in caplog.records if "try 1 of 2 failed" in r.getMessage()]
    assert said.startswith("restoring legacy-look.state[") and f"a look for the old state topic {old}" in said


def test_a_stop_during_the_look_for_the_old_state_topic_ends_the_look_with_the_stop(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The look for the old state topic runs on a thread a stop gives up on, on a client of its own made on
    that thread, which the stop did not close: the service exited within its budget all the same (nothing
    waits for that thread), but the look went on until its request timed out (BROKER_WAIT_S), the broker
    gone, a thread left in every process that ran the service and stopped it. Now its client is closed by
    the stop, like the other clients made on such threads: the look ends with the stop. Its own wait is
    made far longer than the test's here, so only the stop can end it."""
    monkeypatch.setattr(_changelog, "BROKER_WAIT_S", 120.0)  # the look's request timeout
    old = "legacy-stop.old-state"
    reached = paused_at_the_look_for(old, broker, monkeypatch, connected=True)
    caplog.set_level(logging.WARNING, logger="tracescore")
    before = set(threading.enumerate())
    try:
        service, raised = started(broker, "legacy-stop", legacy_state_topic=old)
        assert reached.wait(120), "never looked for the old state topic"
        looks = wait_until(
            lambda: service_threads(before, f"tracescore: a look for the old state topic {old}"), "the look"
        )
        runner = next(t for t in threading.enumerate() if t.name == "test-service")
        asked = time.monotonic()
        service.stop()
        runner.join(3 * (STOP_TIMEOUT_S + 5.0))
        took = time.monotonic() - asked
        assert not runner.is_alive(), "run() did not return"
        assert not raised, raised
        # stop_timeout_s (the clients closed within it: _loop._CLOSE_S), and a margin for a loaded machine
        assert took < STOP_TIMEOUT_S + 1.5, f"the stop took {took:.1f}s"
        [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stopping within")]
        assert "the restore of " in said and "given up on" in said, said
        for look in looks:  # the broker still paused: only the stop can have ended it
            look.join(10.0)
        left = [t for t in looks if t.is_alive()]
        assert not left, "\n".join(where(t) for t in left)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)


def test_a_restore_reads_its_partitions_committed_offsets_in_one_request(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restore asked the group's coordinator for one partition's committed offset at a time (the
    consumer's `committed`): as many round trips as partitions assigned (6 here) before any was restored.
    The coordinator's real fetch is watched, not replaced: each of the restore's asks, and what it asked."""
    asked: list[list[int]] = []
    restored: list[list[int]] = []
    real_fetch = ConsumerCoordinator.fetch_committed_offsets
    real_read = _restore.RestoreReader.read

    def fetch(self: ConsumerCoordinator, partitions: Any, timeout_ms: Any = None) -> Any:
        if threading.current_thread().name.startswith("tracescore: the restore of"):
            asked.append(sorted(tp.partition for tp in partitions))
        return real_fetch(self, partitions, timeout_ms=timeout_ms)

    def read(self: _restore.RestoreReader, assigned: Any, rewind_ms: Any) -> Any:
        back = real_read(self, assigned, rewind_ms)
        restored.append(sorted(tp.partition for tp in assigned))
        return back

    monkeypatch.setattr(ConsumerCoordinator, "fetch_committed_offsets", fetch)
    monkeypatch.setattr(_restore.RestoreReader, "read", read)
    service, raised = started(broker, "restore-one-fetch")
    try:
        wait_until(lambda: restored, "the first restore")
    finally:
        service.stop()
    runner = next(t for t in threading.enumerate() if t.name == "test-service")
    runner.join(3 * (STOP_TIMEOUT_S + 5.0))
    assert not raised, raised
    assert restored[0] == list(range(6)), restored
    assert asked[: len(restored)] == restored, f"restored {restored}; asked for the offsets of {asked}"


def test_a_restore_reads_a_partition_added_to_an_output_topic_since_its_clients_learnt_the_topic(
    bootstrap: str, topic_prefix: str
) -> None:
    """An output topic given a partition while the service runs (here the evaluations topic, which
    `tracescore conversations` with grounding writes revised turn records to), and its previous owner wrote
    a revision there before a crash: the restore's log starts came from stage 2's cached metadata, refreshed
    only every metadata_max_age_ms (5 minutes), which lacked the new partition. Its outputs were never read,
    and the decision they carried was written again."""
    source, state, output = (f"{topic_prefix}.{name}" for name in ("turns", "changelog", "evaluations"))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(source, 1, 1), NewTopic(output, 1, 1)])
    connection = KafkaConnection(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    changelog = _changelog.Changelog(connection, state, source)
    outputs = OutputLog(connection, producer, [output])
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"{topic_prefix}.turns")
    try:
        changelog.ensure()
        # The partition's meta marks the one partition the output topic had when its state was saved.
        assert changelog.delivered([changelog.write_meta(0, PartitionMeta(outputs={output: {0: 0}}))]) == []
        # Both clients a restore may use have learnt the topic already (the cache a running service holds).
        assert consumer.partitions_for_topic(output) == {0} and outputs.ends() == {output: {0: 0}}
        admin.create_partitions({output: NewPartitions(2)})
        wait_until(lambda: len(topic_probe_partitions(bootstrap, output)) == 2, "the output's new partition")
        headers = [(OUTPUT_ID_HEADER, b"revised-1"), (OUTPUT_DIGEST_HEADER, b"d1")]
        producer.send(output, key=b"k", value=b"v", headers=headers, partition=1).get(30)
        reader = _restore.RestoreReader(
            connection, consumer, changelog, outputs, None, lambda: False, 0, logging.getLogger("test")
        )
        back = reader.read([TopicPartition(source, 0)], None)
    finally:
        consumer.close()
        outputs.close()
        changelog.close()
        producer.close()
        admin.close()
    assert back.since == {0: {output: {0: 0, 1: 0}}}, "the new partition is looked at from its log start"
    assert back.found == {"revised-1": "d1"}, (
        "what the previous owner wrote there is known: not written again"
    )


def topic_probe_partitions(bootstrap: str, topic: str) -> set[int]:
    """`topic`'s partitions as a new client sees them."""
    probe = topic_probe(bootstrap)
    try:
        return probe.partitions_for_topic(topic) or set()
    finally:
        probe.close()


def test_a_look_for_the_state_topic_given_up_on_ends_its_thread_within_one_broker_wait(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look for the state topic (before each checkpoint's writes, and at startup) runs on a thread of its
    own, given up on after BROKER_WAIT_S. The look itself waited kafka-python's request timeout (30 s): a
    broker that stopped answering kept that thread, its metadata request in flight, long past the give-up
    (one more such thread for every client whose look was given up on). Now the state topic's probe waits
    BROKER_WAIT_S per request too."""
    monkeypatch.setattr(_changelog, "BROKER_WAIT_S", 2.0)  # a shorter wait, for the test's time only
    bootstrap = broker.bootstrap_servers
    source, state = "look-ends.turns", "look-ends.state"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(source, 1, 1)])
    admin.close()
    changelog = _changelog.Changelog(KafkaConnection(bootstrap_servers=bootstrap), state, source)
    before = set(threading.enumerate())
    try:
        assert changelog.ensure() == 1
        pause(broker.process.pid)
        with pytest.raises(KafkaError):  # the probe's request timed out, or the look was given up on
            changelog.check()
        looks = service_threads(before, f"tracescore: a look for the state topic {state}")
        wait_until(lambda: not any(t.is_alive() for t in looks), "the look's thread to end", timeout_s=15)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
        changelog.close()


def test_the_stream_times_update_given_up_at_a_stop_ends_its_thread_within_one_broker_wait(
    broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream time's update (each tick, on a thread of its own a stop gives up on) makes its clients on
    that thread the first time. They connected with kafka-python's default waits, and the stop closed only
    clients made already: a broker that did not answer kept the update connecting 30 s past the stop (then
    its admin client 30 s more), a thread a stop left behind. Now they connect within BROKER_WAIT_S, and one
    made while the stop came is closed as soon as made: the thread ends within one broker wait."""
    monkeypatch.setattr(_clock, "BROKER_WAIT_S", 2.0)  # a shorter wait, for the test's time only
    stopping = threading.Event()
    clock = _clock.StreamClock(
        KafkaConnection(bootstrap_servers=broker.bootstrap_servers), "clock-ends", ["clock-ends.evaluations"],
        "clock-ends.keyed", lambda: datetime.now(UTC), stopping=stopping.is_set,
    )  # fmt: skip
    before = set(threading.enumerate())
    pause(broker.process.pid)
    try:
        ticking = threading.Thread(target=lambda: clock.tick(lambda: {0: None})(0), daemon=True)
        ticking.start()  # the service's thread: its tick waits for the update
        update = wait_until(
            lambda: service_threads(before, "tracescore: the stream time's update"), "the update under way"
        )
        stopping.set()  # the service's stop: the tick gives the update up, then the clients are closed
        ticking.join(10)
        clock.close()
        wait_until(lambda: not any(t.is_alive() for t in update), "the update's thread to end", timeout_s=15)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
