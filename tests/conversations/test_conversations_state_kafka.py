"""The conversations' state topic through the real broker: partitioned like the turns topic (each
conversation's state on its turns' partition number), the state topic of the earlier version carried over
once, a state of a future version or garbage counted and skipped while the service goes on, and a state
topic deleted while running recreated with nothing lost; one partitioned unlike the turns topic is a
one-line error at start."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

import pytest
from _helpers import wait_until
from conversation_service import SERVICE_WAIT_S, Running, config, conversations_process, on_topic, produce
from conversation_turns import turn
from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, NoError
from kafka.structs import OffsetAndMetadata
from service_processes import ServiceProcess

from tracescore.conversations import ConversationsConfig
from tracescore.model import EvaluationRecord
from tracescore.testing.kafka_topics import input_producer, read_topic, topic_probe

pytestmark = pytest.mark.kafka

META_KEY = b"\x00tracescore.partition"
T = TypeVar("T")


def key(conversation: str) -> bytes:
    return json.dumps(["chat-api", conversation]).encode()


def turns(conversations: list[str], base: int = 0, n: int = 3) -> list[EvaluationRecord | bytes]:
    return [turn(base + 10 * i + t, 1.0, c) for i, c in enumerate(conversations) for t in range(n)]


def create_compacted(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, partitions, 1, topic_configs={"cleanup.policy": "compact"})])
    admin.close()


def put(bootstrap: str, topic: str, messages: list[tuple[bytes, bytes, int | None]]) -> None:
    producer = input_producer(bootstrap, [topic], acks="all")
    for k, value, partition in messages:
        producer.send(topic, key=k, value=value, partition=partition).get(30)
    producer.close()


def test_each_conversation_state_sits_on_its_turns_partition_number(
    bootstrap: str, topic_prefix: str
) -> None:
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0)
    conversations = [f"c-{i}" for i in range(12)]
    produce(bootstrap, cfg.evaluations_topic, turns(conversations))
    with Running(cfg) as running:
        wait_until(
            lambda: len(running.written) == len(conversations),
            "a record for each conversation",
            timeout_s=SERVICE_WAIT_S,
        )
    turns_partition = {m.key: m.partition for m in read_topic(bootstrap, cfg.turns_topic)}
    state = read_topic(bootstrap, cfg.state_topic)
    states = [m for m in state if m.key != META_KEY]
    assert {m.key for m in states} == {key(c) for c in conversations}
    assert all(m.partition == turns_partition[m.key] for m in states)
    assert all(json.loads(m.value)["schema_version"] == 2 for m in states)
    assert {m.partition for m in state if m.key == META_KEY} == set(range(cfg.turns_partitions))


def test_the_state_topic_of_the_earlier_version_is_carried_over_once(
    bootstrap: str, topic_prefix: str
) -> None:
    old = f"{topic_prefix}.old-state"
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0, legacy_state_topic=old)
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    # What the earlier version wrote (schema 1, positional, one partition): turns 1 and 2 recorded as
    # revision 0, then turn 3 read, its record not written yet when that version stopped.
    outcome = ["faithfulness", "offline", None, 0, "ok", 1.0, "faithful", None]
    snapshot = {
        "service": "chat-api", "conversation_id": "c-1", "route": "/chat", "started_ms": now_ms - 5_000,
        "last_arrival_ms": now_ms - 3_000, "through": 2, "past_cap": 0, "pending": True,
        "emitted": [["faithfulness", "offline", None, 0, "8b1f6f8ef7b7a3e0"]],
        "turns": [[f"{n:032x}", f"{n:016x}", [[*outcome, now_ms - 5_000 + n]]] for n in (1, 2, 3)],
    }  # fmt: skip
    create_compacted(bootstrap, old, 1)
    put(bootstrap, old, [(key("c-1"), json.dumps(snapshot).encode(), None)])
    # It read the turns topic in the same group and committed its offsets (plain ones: it had no meta).
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(cfg.turns_topic, cfg.turns_partitions, 1)])
    offsets = {
        TopicPartition(cfg.turns_topic, p): OffsetAndMetadata(0, "", -1) for p in range(cfg.turns_partitions)
    }
    group = f"{cfg.group_id}.turns"
    wait_until(lambda: committed_all(admin, group, offsets), "the earlier version's commits")
    admin.close()
    with Running(cfg) as first:
        wait_until(lambda: len(first.written) == 1, "the first run's record", timeout_s=SERVICE_WAIT_S)
    [record] = first.written
    assert (record.conversation_id, record.revision, record.supersedes, record.turns) == ("c-1", 1, 0, 3)
    assert first.service.stats.state["migrated"] == 1

    # Read once: what the old topic holds now is never read again; c-1 comes from the new state topic.
    put(bootstrap, old, [(key("c-2"), b"not a snapshot", None)])
    produce(bootstrap, cfg.evaluations_topic, turns(["c-3"], base=100))
    with Running(cfg) as second:
        wait_until(lambda: len(second.written) == 1, "the second run's record", timeout_s=SERVICE_WAIT_S)
    assert second.written[0].conversation_id == "c-3"
    assert second.service.stats.state["migrated"] == 0
    assert second.service.stats.state["restored"] >= 1
    assert "invalid_state" not in second.service.stats.skipped


def test_a_future_version_or_garbage_state_is_counted_and_the_service_goes_on(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0)
    create_compacted(bootstrap, cfg.state_topic, cfg.turns_partitions)
    future = {"schema_version": 3, "service": "chat-api", "conversation_id": "c-1", "shape": "of tomorrow"}
    put(
        bootstrap,
        cfg.state_topic,
        [(key("c-1"), json.dumps(future).encode(), 0), (key("c-2"), b"\x00garbage", 1)],
    )
    produce(bootstrap, cfg.evaluations_topic, turns(["c-1", "c-2"]))
    with Running(cfg) as running:
        wait_until(lambda: len(running.written) == 2, "2 records", timeout_s=SERVICE_WAIT_S)
    assert sorted(r.conversation_id for r in running.written) == ["c-1", "c-2"]
    skipped = running.service.stats.skipped
    assert (skipped["future_state_version"], skipped["invalid_state"]) == (1, 1)
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "written by a newer tracescore" in said and "not JSON" in said


def test_a_state_topic_deleted_while_running_is_recreated_and_nothing_is_lost(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0)
    first_six = [f"a-{i}" for i in range(6)]
    produce(bootstrap, cfg.evaluations_topic, turns(first_six))
    with Running(cfg) as running:
        wait_until(lambda: len(running.written) == 6, "6 records", timeout_s=SERVICE_WAIT_S)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.delete_topics([cfg.state_topic])
        admin.close()
        wait_recreated(bootstrap, cfg, caplog)
        produce(bootstrap, cfg.evaluations_topic, [turn(1000, 0.0, "a-0"), *turns(["b-0"], base=2000)])
        wait_until(lambda: len(running.written) == 8, "8 records", timeout_s=SERVICE_WAIT_S)
    assert running.service.stats.state["recreated"] == 1
    assert sorted((r.conversation_id, r.revision) for r in running.written[6:]) == [("a-0", 1), ("b-0", 0)]

    # A restart reads the recreated topic: every conversation's state came back, so later turns revise.
    produce(bootstrap, cfg.evaluations_topic, [turn(3000, 0.0, "a-5"), turn(3001, 0.0, "b-0")])
    with Running(cfg) as restarted:
        wait_until(
            lambda: len(restarted.written) == 2, "the restarted service's 2 records", timeout_s=SERVICE_WAIT_S
        )
    assert sorted((r.conversation_id, r.revision, r.turns) for r in restarted.written) == [
        ("a-5", 1, 4),
        ("b-0", 1, 4),
    ]


def wait_recreated(
    bootstrap: str, cfg: ConversationsConfig, caplog: pytest.LogCaptureFixture, timeout_s: float = 120.0
) -> None:
    """Until the service said it found the topic deleted and made the topic again. Its word, not a probe's
    look for the topic gone then back: the service looks every 5 s, and on a loaded machine its look can
    find the topic gone and make it again before a probe started after the deletion ever sees it gone."""
    said = f"the state topic {cfg.state_topic} was deleted while running: recreating it"
    wait_until(
        lambda: any(said in r.getMessage() for r in caplog.records),
        "the service's word that it recreates the deleted state topic",
        timeout_s=timeout_s,
    )
    # A probe that made the topic would find it back whether or not the service recreated it.
    probe = topic_probe(bootstrap)
    try:
        wait_until(
            lambda: (
                cfg.state_topic in probe.topics()
                and len(probe.partitions_for_topic(cfg.state_topic) or ()) == cfg.turns_partitions
            ),
            "the state topic again, with the turns topic's partitions",
            timeout_s=timeout_s,
        )
    finally:
        probe.close()


def test_a_record_is_not_written_again_after_the_state_topic_was_deleted_and_the_service_killed(
    bootstrap: str, topic_prefix: str
) -> None:
    """The state topic deleted while the service runs, right after it wrote a record (before the state that
    records it was saved), and the service killed before it looked for the topic again: the restart finds no
    meta for the turns partition, but an offset the group committed after saving one (at its first
    checkpoint, before the turn came), so it knows the state was lost and looks for what was written from the
    conversations topic's log start. It took the partition for one used for the first time (nothing written,
    nothing to look for), read the turn again and wrote the record a second time."""
    cfg = config(bootstrap, topic_prefix, turns_partitions=1, max_turns=1)  # one turn: full, decided at once
    settings = {"turns_partitions": "1", "max_turns": "1"}
    killed = conversations_process(
        bootstrap, topic_prefix, pause_at="outputs.written:1", idle_timeout=None, spans=False, evidence=False,
        **settings,
    )  # fmt: skip
    try:
        wait_until(
            lambda: committed(bootstrap, cfg) == {0: 0}, "the first checkpoint's commit", SERVICE_WAIT_S
        )
        produce(bootstrap, cfg.evaluations_topic, [turn(1, 1.0, "c-0")])
        wait_until(killed.paused, "c-0's record written, its state not saved", SERVICE_WAIT_S)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.delete_topics([cfg.state_topic])
        admin.close()
        probe = topic_probe(bootstrap)
        try:
            wait_until(lambda: cfg.state_topic not in probe.topics(), "the state topic deleted")
        finally:
            probe.close()
    finally:
        killed.process.kill()
    assert killed.wait() == -9, killed.log[-3000:]
    assert [r.conversation_id for r in on_topic(bootstrap, cfg)] == ["c-0"]

    restarted = conversations_process(bootstrap, topic_prefix, spans=False, evidence=False, **settings)
    assert restarted.wait() == 0, restarted.log[-3000:]
    said = f"killed:\n{killed.log[-3000:]}\nrestarted:\n{restarted.log[-3000:]}"
    assert [(r.conversation_id, r.revision, r.turns) for r in on_topic(bootstrap, cfg)] == [("c-0", 0, 1)], (
        said
    )
    assert f"the state topic {cfg.state_topic} has no meta for partition(s) 0 of {cfg.turns_topic}" in said
    assert f"looked for on {cfg.conversations_topic} from the log start" in said


def committed(bootstrap: str, cfg: ConversationsConfig) -> dict[int, int]:
    """The offsets stage 2's group committed on the turns topic (none while its coordinator is not known)."""
    group = f"{cfg.group_id}.turns"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = retriable(lambda: admin.list_group_offsets([group]).get(group)) or {}
    finally:
        admin.close()
    return {tp.partition: at.offset for tp, at in offsets.items() if tp.topic == cfg.turns_topic}


def committed_all(
    admin: KafkaAdminClient, group: str, offsets: dict[TopicPartition, OffsetAndMetadata]
) -> bool:
    """`offsets` committed in `group`; False where the broker said to try again."""
    errors = retriable(lambda: admin.alter_group_offsets(group, offsets))
    return errors is not None and set(errors.values()) == {NoError}


def retriable(call: Callable[[], T]) -> T | None:
    """`call()`, or None where the broker said to try again (a group's coordinator not elected yet)."""
    try:
        return call()
    except KafkaError as exc:
        if not exc.retriable:
            raise
        return None


def test_a_state_topic_partitioned_unlike_the_turns_topic_stops_the_service_with_one_line(
    bootstrap: str, topic_prefix: str
) -> None:
    """The state topic of an earlier version (one partition) named as `state_topic`: a conversation's state
    could not sit on its turns' partition number."""
    cfg = config(bootstrap, topic_prefix)
    create_compacted(bootstrap, cfg.state_topic, 1)
    args = [
        "--bootstrap-servers",
        bootstrap,
        "--evaluations-topic",
        cfg.evaluations_topic,
        "--idle-timeout",
        "1",
    ]
    env = {
        "TRACESCORE_CONVERSATIONS_STATE_TOPIC": cfg.state_topic,
        "TRACESCORE_CONVERSATIONS_TURNS_TOPIC": cfg.turns_topic,
        "TRACESCORE_CONVERSATIONS_EVIDENCE_TOPIC": cfg.evidence_topic or "",
    }
    process = ServiceProcess("conversations", args, env)
    assert process.wait() == 1
    [error] = [line for line in process.log.splitlines() if line.startswith("Error:")]
    assert f"the state topic {cfg.state_topic} has 1 partition(s), its source {cfg.turns_topic} 6" in error
    assert "legacy_state_topic" in error
    assert "Traceback" not in process.log
