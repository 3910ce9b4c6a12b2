"""The Kafka service base of `tracescore alert` and `tracescore conversations` (tracescore/_service): a
rebalance reads back only the assigned partitions of the state topic; a state topic partitioned unlike its
source is refused in one line, a deleted one is noticed; outputs are found again by their ids; a crash point
kills the process exactly at its n-th pass. The services' own tests run all of it end to end."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime

import pytest
from _helpers import pause, wait_until
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import InconsistentGroupProtocolError, KafkaConnectionError, KafkaError, KafkaTimeoutError

import tracescore._kafka
from tracescore._kafka_config import KafkaConnection
from tracescore._service import (
    CRASH_ENV,
    OUTPUT_DIGEST_HEADER,
    OUTPUT_ID_HEADER,
    PAUSE_ENV,
    BoundedCall,
    Changelog,
    ChangelogError,
    Output,
    OutputLog,
    PartitionMeta,
    StopBudget,
    StreamTime,
    _group_check,
)
from tracescore._service._bounded import poll_or_nothing
from tracescore._service._found import FoundOutputs
from tracescore._service._group_check import GroupCheck
from tracescore._service._keyed import KeyedStage
from tracescore._service._outputs import close_shares
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic


def create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()


@pytest.mark.kafka
def test_a_restore_reads_only_the_assigned_partitions_last_value_per_key(
    bootstrap: str, topic_prefix: str
) -> None:
    source, state = f"{topic_prefix}.keyed", f"{topic_prefix}.state"
    create(bootstrap, source, 4)
    changelog = Changelog(KafkaConnection(bootstrap_servers=bootstrap), state, source)
    try:
        assert changelog.ensure() == 4
        for partition in range(4):
            changelog.write(partition, b"k%d" % partition, b"old")
            changelog.write(partition, b"k%d" % partition, b"new")
        changelog.write(2, b"gone", b"x")
        changelog.write(2, b"gone", None)
        changelog.write_meta(2, PartitionMeta(migrated_from="old.topic"))
        changelog.flush()
        read = changelog.read([1, 2])
    finally:
        changelog.close()
    assert sorted(read) == [1, 2], "partitions 0 and 3 belong to another instance: not read"
    assert read[1].values == {b"k1": b"new"} and read[1].meta is None
    assert read[2].values == {b"k2": b"new", b"gone": None}
    assert read[2].meta is not None and read[2].meta.migrated_from == "old.topic"


@pytest.mark.kafka
def test_a_state_topic_unlike_its_source_is_refused_and_a_deleted_one_noticed(
    bootstrap: str, topic_prefix: str
) -> None:
    source, state = f"{topic_prefix}.keyed", f"{topic_prefix}.state"
    create(bootstrap, source, 3)
    create(bootstrap, state, 1)
    changelog = Changelog(KafkaConnection(bootstrap_servers=bootstrap), state, source)
    try:
        with pytest.raises(
            ChangelogError, match=r"has 1 partition\(s\), its source .* 3: .*legacy_state_topic"
        ):
            changelog.ensure()
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.delete_topics([state])
        admin.close()
        deadline = time.monotonic() + 60
        while changelog.check():  # the broker deletes in the background
            assert time.monotonic() < deadline, "the topic was never deleted"
            time.sleep(0.2)
        changelog.recreate()
        assert changelog.check() is True
    finally:
        changelog.close()


@pytest.mark.kafka
def test_outputs_written_after_a_mark_are_found_by_their_id(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.records"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for n in range(3):
        headers = [(OUTPUT_ID_HEADER, f"id-{n}".encode()), (OUTPUT_DIGEST_HEADER, f"d{n}".encode())]
        producer.send(topic, key=b"k", value=b"v", headers=headers, partition=0).get(30)
    log = OutputLog(KafkaConnection(bootstrap_servers=bootstrap), producer, [topic])
    try:
        assert log.find({topic: {0: 1}}) == {"id-1": "d1", "id-2": "d2"}
        assert log.find({"another.topic": {0: 0}}) == {}, "only the verified topics are read back"
    finally:
        log.close()
        producer.close()


@pytest.mark.kafka
def test_a_look_holds_at_most_its_limit_of_ids_the_newest_and_reads_a_partition_without_a_mark_from_its_start(
    bootstrap: str, topic_prefix: str
) -> None:
    """A meta without a mark for a verified topic partition (its writer never learnt that end) is looked at
    from the log start, not skipped; a look from there may find many: it holds the newest `limit` ids (the
    outputs a crash left are the newest), never every message it reads."""
    topic, other = f"{topic_prefix}.records", f"{topic_prefix}.revisions"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for n in range(5):
        headers = [(OUTPUT_ID_HEADER, f"id-{n}".encode()), (OUTPUT_DIGEST_HEADER, f"d{n}".encode())]
        producer.send(topic, key=b"k", value=b"v", headers=headers, partition=0).get(30)
        producer.send(topic, key=b"k", value=b"not ours", partition=0).get(30)  # no id: read, not held
    log = OutputLog(KafkaConnection(bootstrap_servers=bootstrap), producer, [topic, other])
    try:
        starts = {topic: {0: 0, 1: 0}, other: {0: 3}, "shared.spans": {0: 0}}
        since = log.since({topic: {1: 4}, "shared.spans": {0: 9}}, starts)
        assert since == {topic: {0: 0, 1: 4}, other: {0: 3}}, "no mark: from the log start"
        assert log.find({topic: {0: 0}}, limit=2) == {"id-3": "d3", "id-4": "d4"}
    finally:
        log.close()
        producer.close()


def produced(producer: KafkaProducer, topic: str, names: range, partition: int = 0) -> None:
    for n in names:
        headers = [(OUTPUT_ID_HEADER, f"id-{n}".encode()), (OUTPUT_DIGEST_HEADER, f"d{n}".encode())]
        producer.send(topic, key=b"k", value=b"v", headers=headers, partition=partition).get(30)


@pytest.mark.kafka
def test_looks_again_on_several_topics_reuse_one_reader_and_find_what_was_appended_since(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a restore's window is open, the output topics are looked at again before each write: every
    topic is read in one read, by a reader kept from one look to the next (a new client per topic and look
    connected and learnt the metadata anew each time), which still finds what was appended since."""
    opened: list[KafkaConsumer] = []

    class Counted(KafkaConsumer):  # type: ignore[misc]
        def __init__(self, **config: object) -> None:
            super().__init__(**config)
            opened.append(self)

    topic, other = f"{topic_prefix}.records", f"{topic_prefix}.revisions"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    produced(producer, topic, range(2))
    produced(producer, other, range(10, 12))
    monkeypatch.setattr(tracescore._kafka, "KafkaConsumer", Counted)
    log = OutputLog(KafkaConnection(bootstrap_servers=bootstrap), producer, [topic, other])
    try:
        assert log.find({topic: {0: 0}, other: {0: 0}}) == {f"id-{n}": f"d{n}" for n in (0, 1, 10, 11)}
        produced(producer, other, range(12, 13))
        assert log.find({topic: {0: 2}, other: {0: 2}}) == {"id-12": "d12"}
        assert log.find({topic: {0: 1}, other: {0: 3}}) == {"id-1": "d1"}
        assert len(opened) == 1, "one reader for every topic and look"
    finally:
        log.close()
        producer.close()


@pytest.mark.kafka
def test_a_look_while_another_threads_look_holds_the_kept_reader_reads_with_its_own(
    bootstrap: str, topic_prefix: str
) -> None:
    """A restore given up on for a stop may still read on its thread (one broker wait at most) while the
    service looks again or closes: the kept reader is never used by two looks at once, and one still reading
    when the log is closed is closed as its look ends."""
    topic = f"{topic_prefix}.records"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    produced(producer, topic, range(3))
    log = OutputLog(KafkaConnection(bootstrap_servers=bootstrap), producer, [topic])
    inside, go_on, results = threading.Event(), threading.Event(), []

    def held_up() -> bool:
        inside.set()
        go_on.wait(30)
        return False

    first = threading.Thread(target=lambda: results.append(log.find({topic: {0: 0}}, give_up=held_up)))
    first.start()
    try:
        assert inside.wait(30)
        assert log.find({topic: {0: 1}}) == {"id-1": "d1", "id-2": "d2"}, "read by a reader of its own"
        log.close()
        assert log.find({topic: {0: 2}}) == {"id-2": "d2"}, "closed: a look still reads, by its own reader"
    finally:
        go_on.set()
        first.join(30)
        log.close()
        producer.close()
    assert results == [{"id-0": "d0", "id-1": "d1", "id-2": "d2"}]


@pytest.mark.kafka
def test_a_look_again_before_a_write_asks_the_broker_for_the_topics_ends_once(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a restore's window is open, each write looks on the output topics again first: it asked for
    their ends twice, on two clients (the ends where the next look starts, then the look's own), a round
    trip more before every write of the window. Once now, and what the previous owner wrote after the
    restore is still found and not written again."""
    topic = f"{topic_prefix}.records"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    produced(producer, topic, range(2))
    connection = KafkaConnection(bootstrap_servers=bootstrap)
    log = OutputLog(connection, producer, [topic])
    written: list[list[str]] = []

    class Logic:
        def written(self, outputs: list[Output], found: dict[str, str]) -> None:
            written.append([o.id for o in outputs if found.get(o.id) != o.digest])

    stage = KeyedStage(
        log=logging.getLogger("test"), connection=connection, consumer=None, topic=topic,  # type: ignore[arg-type]
        changelog=None, outputs=log, logic=Logic(), counts=Counter(), legacy_topic=None,  # type: ignore[arg-type]
        clock=lambda: datetime.now(UTC), restore_retries=0,
    )  # fmt: skip
    stage._found.add({0: {topic: {0: 0}}}, {"id-0": "d0"}, restored_at=0)  # the restore found id-0
    produced(producer, topic, range(2, 3))  # the previous owner's send, appended after the restore read
    asked: list[object] = []
    real = KafkaConsumer.end_offsets

    def end_offsets(self: KafkaConsumer, partitions: object, timeout_ms: object = None) -> object:
        asked.append(partitions)
        return real(self, partitions, timeout_ms=timeout_ms)

    monkeypatch.setattr(KafkaConsumer, "end_offsets", end_offsets)
    again = [Output(topic, b"k", b"v", f"id-{n}", f"d{n}") for n in (0, 2, 5)]
    try:
        stage.write(again, {"id-0": "d0"}, lambda: None)
    finally:
        log.close()
        producer.close()
    assert len(asked) == 1, f"the ends asked for {len(asked)} times: {asked}"
    assert len(read_topic(bootstrap, topic)) == 4, "id-5 alone written"
    assert written == [["id-5"]]


def test_found_outputs_hold_their_partitions_output_marks_back_until_released() -> None:
    """A partition's meta keeps the marks its restore read from while what that found is held: killed again
    meanwhile, the next restart reads the same outputs again."""
    found = FoundOutputs()
    found.add({0: {"records": {0: 5, 1: 7}}}, {"rec-1": "d1"}, restored_at=1_000)
    ends = {"records": {0: 9, 1: 7, 2: 4}, "revisions": {0: 3}}
    assert found.marks(0, ends) == {"records": {0: 5, 1: 7, 2: 4}, "revisions": {0: 3}}
    assert found.marks(1, ends) == ends, "a partition that found nothing saves the ends"
    assert found.ids() == {"rec-1": "d1"}
    found.release(lambda partition, restored_at: restored_at < 1_000)
    assert found.ids() == {"rec-1": "d1"}, "still undecided: held"
    found.release(lambda partition, restored_at: partition == 0)
    assert found.ids() == {} and found.marks(0, ends) == ends


def test_a_look_again_reads_what_was_appended_since_the_restore_or_the_look_before_and_holds_it() -> None:
    """A send the previous owner gave up on may land after the restore read the topics: each look before a
    write reads from where the one before ended (the ends read just before it), never from past a mark."""
    found = FoundOutputs()
    found.add(
        {0: {"records": {0: 5, 1: 7}}, 1: {"records": {0: 6, 1: 2}}}, {"rec-1": "d1"}, restored_at=1_000
    )
    reads: list[dict[str, dict[int, int]]] = []

    def find(since: dict[str, dict[int, int]]) -> tuple[dict[str, str], dict[str, dict[int, int]]]:
        reads.append(since)
        if len(reads) == 1:
            return {"late": "d2"}, {"records": {0: 9}}
        return {}, {"records": {0: 8, 1: 3}}

    assert found.look_again(find) == {"rec-1": "d1", "late": "d2"}
    found.look_again(find)
    assert reads == [{"records": {0: 5, 1: 2}}, {"records": {0: 9, 1: 2}}], "from the lowest mark, then on"
    found.release(lambda partition, restored_at: partition == 1)
    # One table for every held partition: an id names one decision, another partition's only says written.
    assert found.ids() == {"rec-1": "d1", "late": "d2"}, "partition 0 still waits: what was found is held"
    assert found.marks(0, {"records": {0: 20, 1: 20}}) == {"records": {0: 5, 1: 7}}, (
        "a kill now reads it again"
    )


def test_a_crash_point_kills_the_process_at_its_nth_pass_and_nowhere_else() -> None:
    script = (
        "from tracescore._service import crash_point\n"
        "for n in range(1, 4):\n"
        "    crash_point('other.point')\n"
        "    print(n, flush=True)\n"
        "    crash_point('state.saved')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, CRASH_ENV: "state.saved:2"},
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout.split()) == (-9, ["1", "2"])
    unarmed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert (unarmed.returncode, unarmed.stdout.split()) == (0, ["1", "2", "3"])


def test_a_bounded_call_is_given_up_on_at_a_stop_or_its_timeout_and_never_runs_twice_at_once() -> None:
    answer, calls = threading.Event(), []

    def look() -> str:
        calls.append(1)
        answer.wait()  # a broker that does not answer
        return "topics"

    bounded = BoundedCall(look, "a look")
    with pytest.raises(KafkaTimeoutError, match=r"a look: no answer within 0.3s"):
        bounded(timeout_s=0.3)
    with pytest.raises(KafkaTimeoutError, match="a look: given up on, a stop was asked for"):
        bounded(stopping=lambda: True)
    answer.set()
    assert bounded() == "topics"
    assert len(calls) == 1, "the call given up on was waited for again, not started twice"
    assert bounded() == "topics" and len(calls) == 2


def test_a_bounded_call_asked_for_once_a_stop_came_is_not_started() -> None:
    """A call started after the stop (a client made, its first connection waiting BROKER_WAIT_S for a broker
    that does not answer) outlived the stop by that wait, on its thread: it is not started."""
    started = threading.Event()
    with pytest.raises(KafkaTimeoutError, match="a look: not started, a stop was asked for"):
        BoundedCall(started.set, "a look")(stopping=lambda: True)
    assert not started.wait(1.0), "the call started after the stop"


def test_creating_the_state_topic_at_startup_is_given_up_on_at_a_stop_or_when_the_broker_does_not_answer(
    topic_prefix: str,
) -> None:
    """Its metadata looks take no timeout (kafka-python's 30 s, again and again): a stop during a startup with
    the broker paused waited for them, past its budget."""
    stop = threading.Event()
    with KafkaBroker() as broker:  # its own: this test pauses it
        create(broker.bootstrap_servers, f"{topic_prefix}.keyed", 2)
        connection = KafkaConnection(bootstrap_servers=broker.bootstrap_servers)
        state, keyed = f"{topic_prefix}.state", f"{topic_prefix}.keyed"
        changelog = Changelog(connection, state, keyed, stopping=stop.is_set)
        pause(broker.process.pid)
        try:
            with pytest.raises(KafkaTimeoutError, match=r"the state topic .*: no answer within 0.5s"):
                changelog.ensure(timeout_s=0.5)
            stop.set()
            with pytest.raises(KafkaTimeoutError, match=r"the state topic .*: given up on, a stop was asked"):
                changelog.ensure(timeout_s=600)
        finally:
            os.kill(broker.process.pid, signal.SIGCONT)
            changelog.close(1.0)


def test_a_stop_budget_is_shared_by_its_steps_and_names_what_a_step_waits_on() -> None:
    now = [100.0]
    budget = StopBudget(20.0, clock=lambda: now[0])
    assert budget.until(10.0) == 10.0 and budget.deadline is None, "no stop yet: a step's own limit"
    budget.start()
    now[0] += 15.0
    budget.start()  # a second signal: the budget still counts from the first
    assert budget.until(10.0) == 5.0 and budget.until(10.0, keep_s=2.0) == 3.0
    with budget.waiting("the sinks (delivering 1 notification(s))"):
        assert budget.waiting_on == "the sinks (delivering 1 notification(s))"
    assert budget.waiting_on == "the broker"
    now[0] += 60.0
    assert budget.until(10.0) == 0.0


def test_closes_share_what_is_left_of_the_stop_so_the_first_to_wait_does_not_take_the_others_time() -> None:
    deadline = time.monotonic() + 3.0
    shares = close_shares(deadline, 3)
    assert 0.9 < next(shares) <= 1.0, "a third of what is left"
    assert 1.4 < next(shares) <= 1.5, "the first returned at once: half of what is left"
    time.sleep(0.3)
    assert 2.5 < next(shares) < 2.71, "the last takes all that is left"
    assert min(close_shares(time.monotonic() - 1.0, 2)) > 0, "a deadline passed still gives each close a try"


def test_a_poll_the_broker_does_not_answer_is_an_empty_one_and_a_lasting_error_is_raised() -> None:
    class Polling:  # kafka-python raises these from poll (the coordinator's lookup, the group's join)
        def __init__(self, error: Exception) -> None:
            self.error = error

        def poll(self, timeout_ms: int) -> dict[TopicPartition, list[object]]:
            raise self.error

    refused = Polling(KafkaConnectionError("111 ECONNREFUSED"))
    assert poll_or_nothing(refused, 10) == {}  # type: ignore[arg-type]
    with pytest.raises(InconsistentGroupProtocolError):
        poll_or_nothing(Polling(InconsistentGroupProtocolError()), 10)  # type: ignore[arg-type]


def test_a_pause_point_stops_the_process_each_time_from_its_nth_pass() -> None:
    script = (
        "from tracescore._service import crash_point\n"
        "for n in range(1, 4):\n"
        "    crash_point('state_topic.look')\n"
        "    print(n, flush=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, PAUSE_ENV)}
    process = subprocess.Popen(
        [sys.executable, "-c", script], env={**env, PAUSE_ENV: "state_topic.look:2"}, stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    printed = []
    try:
        for expected in ("1", "2"):
            printed.append(process.stdout.readline().decode().strip())  # printed, then stopped at the next
            _, status = os.waitpid(process.pid, os.WUNTRACED)
            assert os.WIFSTOPPED(status), f"not stopped after {expected}"
            process.send_signal(signal.SIGCONT)
        printed.append(process.stdout.readline().decode().strip())
    finally:
        process.kill()
        process.wait()
    assert printed == ["1", "2", "3"]


def test_the_stream_time_waits_for_input_still_in_stage_1_and_for_a_lagging_partition() -> None:
    p0, p1 = TopicPartition("evaluations", 0), TopicPartition("evaluations", 1)
    time = StreamTime()
    time.input_ends(1_000, {p0: 5, p1: 3})
    time.input_ends(2_000, {p0: 5, p1: 4})
    # p1's record 3 is still in stage 1 (a member that crashed keeps the partition until its session ends).
    assert time.committed({p0: 5, p1: 3}) is True and time.input_ms == 1_000
    time.keyed_ends({0: 10})
    assert time.of(0, 10) == 1_000, "read up: what arrived before 1 s is applied"
    assert time.committed({p0: 5, p1: 3}) is False and time.input_ms == 1_000, "waits for record 3"
    assert time.committed({p0: 5, p1: 4}) is True and time.input_ms == 2_000
    time.keyed_ends({0: 12})
    assert time.of(0, 11) == 1_000, "behind the keyed end: the last end passed, never back in time"
    assert time.of(0, 12) == 2_000
    assert time.of(1, None) == 0, "a partition nothing is known of: no time yet"


def test_the_stream_time_behind_the_keyed_end_is_never_the_newest_record_read() -> None:
    """Issue 33: a conversation's first turn re-keyed at once, its next two held in stage 1 by a rebalance and
    re-keyed 6 s later after another conversation's turn. A member reading the partition has read the first
    turn and the other conversation's; the two turns still unread reached the input 6 s before the newest
    record read was re-keyed: the partition has no stream time until they are read (the newest record's time
    said the conversation was quiet, and it was written with one turn of three, then again)."""
    evaluations = TopicPartition("evaluations", 0)
    time = StreamTime()
    time.input_ends(7_000, {evaluations: 4})
    assert time.committed({evaluations: 4}) and time.input_ms == 7_000  # stage 1 re-keyed all four
    time.keyed_ends({0: 4})
    assert time.of(0, 2) == 0, "offsets 2 and 3 unread: nothing is known to be applied"
    assert time.of(0, 4) == 7_000
    # Revoked and assigned again between two ticks: restored, read again from the committed offset 1.
    assert time.of(0, 1) == 0, "read again from before the end it passed: no time until it passes it again"
    assert time.of(0, 4) == 7_000


def test_clients_tried_again_while_no_broker_answers_leave_no_thread_behind(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-python 3.0.12 starts a client's IO thread in its constructor, before its first connection: one
    that fails raises with no object to close, and the thread stayed, idle, for the process's life. The
    services make some clients at their first use, and try again at each use while that fails (the look at
    stage 1's group after each change, the state topics' readers at each restore's try): with the broker
    away from before that first use, one more thread at every try, for as long as it stayed away (8 tries
    here: 8 threads). Now each one's network client is closed when its constructor fails."""
    for module in (_group_check, tracescore._kafka):  # their clients' first connection, for the test's time
        monkeypatch.setattr(module, "BROKER_WAIT_S", 0.3)
    connection = KafkaConnection(bootstrap_servers=f"127.0.0.1:{closed_port}")
    look = GroupCheck(connection, "no-broker", "tracescore alert", stopping=lambda: False)
    before = threading.active_count()
    for _ in range(4):
        look.changed([])
        look()  # its admin client fails to connect: said at debug level, looked at again later
        with pytest.raises(KafkaError):
            tracescore._kafka.log_reader(connection)  # a restore's reader (the old state topic's probe too)
    # The looks' own threads (BoundedCall's) end with their calls: kafka-python's, left behind, never did.
    wait_until(lambda: threading.active_count() <= before, f"back to {before} threads", timeout_s=15)
