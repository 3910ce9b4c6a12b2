"""`tracescore conversations` killed with SIGKILL at each step of its checkpoint (the service base's named
crash points: while reading, while writing records, while saving state, while committing), then restarted:
every conversation gets its record, whole, and no record is written twice. The kill lands exactly at the
step (a count of the point, not a time); the restart waits out the killed member's session."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from _helpers import wait_until
from _members import GuardedMember
from conversation_service import SERVICE_WAIT_S, Running, config, conversations_process, produce
from conversation_turns import turn
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from service_processes import IDLE_TIMEOUT_S, SESSION_TIMEOUT_MS

from tracescore.model import EvaluationRecord, read_conversation_record
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka

CONVERSATIONS = [f"c-{i}" for i in range(12)]
# (point, its n-th time): the step the first process dies at.
POINTS = [
    "rekey.sent:1",  # stage 1 sent the re-keyed turns, flushed and committed nothing
    "keyed.applied:1",  # stage 2 applied the first batch of turns, wrote nothing
    "shared.sent:2",  # two evaluation spans written, no record yet
    "output.sent:3",  # three conversation records written, the rest not, no state saved
    "outputs.written:1",  # every record of a checkpoint written, no state saved
    "state.sent:3",  # three conversations' states saved, the rest not
    "state.saved:2",  # the states of the written records saved, the turns not committed
]


def turns() -> list[EvaluationRecord]:
    return [
        turn(10 * i + n, 0.0 if n == 2 else 1.0, c) for i, c in enumerate(CONVERSATIONS) for n in range(1, 4)
    ]


def hold_first_group(bootstrap: str, topic_prefix: str) -> GuardedMember:
    """A member of the first group that holds the evaluations partitions and commits nothing (as a lagging
    or crashed one does): what reaches them is not re-keyed until it leaves (`close`)."""
    return hold_group(bootstrap, f"{topic_prefix}.conversations", f"{topic_prefix}.evaluations")


def hold_group(bootstrap: str, group: str, topic: str) -> GuardedMember:
    """A member of `group` given every partition of `topic`; it polls no more, so a member joining after it
    waits for it to leave (`close`)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        partition_assignment_strategy=(CooperativeStickyAssignor,),
    )
    holder = GuardedMember(consumer, topic)
    # Given them once a killed member's session ends, where one held them.
    wait_until(
        lambda: bool(holder.poll(200) or holder.assignment()),
        "the holder's assignment",
        timeout_s=SERVICE_WAIT_S,
    )
    return holder


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_step_loses_no_conversation_and_writes_no_record_twice(
    bootstrap: str, topic_prefix: str, point: str
) -> None:
    producer = input_producer(bootstrap, [f"{topic_prefix}.evaluations"], acks="all")
    for record in turns():
        key, value = record.to_kafka()
        producer.send(f"{topic_prefix}.evaluations", key=key, value=value)
    producer.flush()
    producer.close()

    killed = conversations_process(bootstrap, topic_prefix, crash_at=point)
    assert killed.wait() == -9, f"never reached {point}:\n{killed.log[-3000:]}"
    restarted = conversations_process(bootstrap, topic_prefix)
    assert restarted.wait() == 0, restarted.log[-3000:]

    written = read_topic(bootstrap, f"{topic_prefix}.conversations")
    records = [read_conversation_record(m.value) for m in written]
    copies = Counter((r.conversation_id, r.revision) for r in records)
    said = f"{copies}\nkilled:\n{killed.log[-4000:]}\nrestarted:\n{restarted.log[-4000:]}"
    assert sorted(r.conversation_id for r in records) == sorted(CONVERSATIONS), said
    assert [(r.revision, r.turns, r.turns_flagged) for r in records] == [(0, 3, 1)] * len(CONVERSATIONS), said
    # Every record's evaluation span went out (a span may go out twice: its topic is not read back).
    assert len({m.key for m in read_topic(bootstrap, f"{topic_prefix}.spans")}) == len(CONVERSATIONS)


def test_a_restart_waiting_out_the_killed_members_session_in_the_first_group_is_not_idle(
    bootstrap: str, topic_prefix: str
) -> None:
    """A restart joins stage 1's group only once the killed member's session there ends, and its stage 2 may
    be given the turns partitions first (the killed member's session there ended sooner). Waiting to join is
    not idleness, even with an input no writer created yet (the evidence topic here): counted from the
    subscription to that one, the restart stopped idle (--idle-timeout 1) before stage 1 ever read, having
    written nothing, every conversation lost. A member holding the evaluations partitions stands in for the
    killed one's session, for as long as the test needs."""
    produce(bootstrap, f"{topic_prefix}.evaluations", list(turns()))
    holder = hold_first_group(bootstrap, topic_prefix)
    try:
        restarted = conversations_process(bootstrap, topic_prefix)
        wait_until(lambda: restarted.said(f"restored 0 keys of {topic_prefix}.turns"), "stage 2's partitions")
        time.sleep(3 * float(IDLE_TIMEOUT_S))  # three idle timeouts with stage 1 not in its group yet
    finally:
        holder.close()  # leaves: the restart's stage 1 joins, re-keys every turn
    assert restarted.wait() == 0, restarted.log[-3000:]
    records = [
        read_conversation_record(m.value) for m in read_topic(bootstrap, f"{topic_prefix}.conversations")
    ]
    assert sorted(r.conversation_id for r in records) == sorted(CONVERSATIONS), restarted.log[-3000:]


def test_a_record_written_in_the_first_checkpoint_after_a_restore_is_not_written_again_after_a_kill(
    bootstrap: str, topic_prefix: str
) -> None:
    """A partition its member restores between two ticks (a rebalance: here, the member that held the turns
    partitions leaves after the first tick): the turns are read and the conversation decided before the next
    checkpoint, so that checkpoint writes the record before the partition's meta was ever saved. Killed right
    after it, the restart must find the record: the meta (with the output marks a restore reads from) goes
    out before the partition's first output. Saved after it, the restart found no marks, did not look, and
    wrote the record a second time (and a late send of the killed member's was missed the same way)."""
    turns_topic = f"{topic_prefix}.turns"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(turns_topic, 6, 1)])  # the service's own partitions (turns_partitions)
    admin.close()
    holder = hold_group(bootstrap, f"{topic_prefix}.conversations.turns", turns_topic)
    produce(bootstrap, f"{topic_prefix}.evaluations", list(turns()[:3]))  # c-0
    killed = conversations_process(bootstrap, topic_prefix, crash_at="outputs.written:1", tick_seconds="10")
    try:
        # Its first tick is over once stage 1 has its partitions; its stage 2 waits for the holder meanwhile.
        wait_until(lambda: killed.said(f"{topic_prefix}.evaluations[0]"), "stage 1's partitions")
    finally:
        holder.close()  # leaves: the member's stage 2 gets every turns partition, restored between two ticks
    assert killed.wait() == -9, killed.log[-3000:]
    assert "restored 0 keys" in killed.log, killed.log[-3000:]
    restarted = conversations_process(bootstrap, topic_prefix)
    assert restarted.wait() == 0, restarted.log[-3000:]
    on_topic = read_topic(bootstrap, f"{topic_prefix}.conversations")
    records = [read_conversation_record(m.value) for m in on_topic]
    said = f"killed:\n{killed.log[-3000:]}\nrestarted:\n{restarted.log[-3000:]}"
    assert [(r.conversation_id, r.revision, r.turns) for r in records] == [("c-0", 0, 3)], said


def test_a_record_written_at_a_stop_before_any_look_at_the_outputs_is_not_written_again_after_a_kill(
    bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    """As above, but the stop (SIGTERM) comes in the checkpoint that would write the record, at its look for
    the state topic: the closing checkpoint writes it, and the partition's first meta before it, with the
    output marks known without asking the broker (none: nothing had asked where the conversations topic
    ends). Killed right after the record, the restart must still look for it: a meta without marks for an
    output topic means "look from its start", not "nothing to look for" (it wrote the record twice)."""
    turns_topic = f"{topic_prefix}.turns"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(turns_topic, 6, 1)])
    admin.close()
    holder = hold_group(bootstrap, f"{topic_prefix}.conversations.turns", turns_topic)
    produce(bootstrap, f"{topic_prefix}.evaluations", list(turns()[:3]))  # c-0
    alive = tmp_path / "alive"  # touched at the start of every pass of the service loop
    killed = conversations_process(
        bootstrap,
        topic_prefix,
        crash_at="outputs.written:1",
        pause_at="state_topic.look:1",  # in the first checkpoint with partitions: it decided c-0
        tick_seconds="10",
        health_file=str(alive),
    )
    try:
        # The loop's first pass ticks at once: once a later pass started, the next tick is 10 s away.
        wait_until(alive.exists, "the loop's first pass", timeout_s=SERVICE_WAIT_S)
        alive.unlink()
        wait_until(alive.exists, "a later pass of the loop", timeout_s=SERVICE_WAIT_S)
    finally:
        holder.close()  # stage 2 restores every turns partition between two ticks, reads c-0's turns
    wait_until(killed.paused, "the first checkpoint's look for the state topic", SERVICE_WAIT_S)
    killed.process.send_signal(signal.SIGTERM)  # handled as it goes on: the look ends the checkpoint
    killed.resume()
    assert killed.wait() == -9, f"the closing checkpoint wrote no record:\n{killed.log[-3000:]}"
    restarted = conversations_process(bootstrap, topic_prefix)
    assert restarted.wait() == 0, restarted.log[-3000:]
    on_topic = read_topic(bootstrap, f"{topic_prefix}.conversations")
    records = [read_conversation_record(m.value) for m in on_topic]
    said = f"killed:\n{killed.log[-3000:]}\nrestarted:\n{restarted.log[-3000:]}"
    assert [(r.conversation_id, r.revision, r.turns) for r in records] == [("c-0", 0, 3)], said


def test_a_record_a_kill_left_unsaved_is_not_written_again_while_the_first_group_holds_turns_back(
    bootstrap: str, topic_prefix: str
) -> None:
    """Killed once its records were written, before the state saying so: the restart finds them on the topic.
    Here the first group is held back meanwhile (a member that holds the evaluations partitions and does not
    commit, as a lagging or crashed one does), so the restart reads its turns partitions to their end long
    before their stream time lets it decide the conversation again: what it found must still be known then
    (it was forgotten once the partitions were read to their end, and the record written twice)."""
    producer = input_producer(bootstrap, [f"{topic_prefix}.evaluations"], acks="all")
    evaluations = f"{topic_prefix}.evaluations"
    for record in turns()[:3]:  # c-0
        key, value = record.to_kafka()
        producer.send(evaluations, key=key, value=value)
    producer.flush()
    killed = conversations_process(bootstrap, topic_prefix, crash_at="outputs.written:1")
    assert killed.wait() == -9, killed.log[-3000:]
    [written] = read_topic(bootstrap, f"{topic_prefix}.conversations")

    holder = hold_first_group(bootstrap, topic_prefix)
    key, value = turn(500, 1.0, "c-later").to_kafka()  # in the first group, not re-keyed while held
    producer.send(evaluations, key=key, value=value)
    producer.close()
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0, session_timeout_ms=SESSION_TIMEOUT_MS)
    with Running(cfg) as restarted:
        wait_until(
            lambda: restarted.service.stats.turn_records == 3,
            "c-0's 3 turns read again",
            timeout_s=SERVICE_WAIT_S,
        )  # c-0's turns read again, to their end
        time.sleep(1.0)  # ticks with the partitions read to their end and no stream time yet
        assert not restarted.written, "nothing is decided while the first group holds turns back"
        holder.close()  # leaves the group: the restart's first stage re-keys the held turn, the time moves on
        wait_until(
            lambda: "c-later" in {r.conversation_id for r in restarted.written},
            "c-later's record",
            timeout_s=SERVICE_WAIT_S,
        )
    on_topic = read_topic(bootstrap, f"{topic_prefix}.conversations")
    records = [read_conversation_record(m.value) for m in on_topic]
    assert [(r.conversation_id, r.revision, r.turns) for r in records] == [("c-0", 0, 3), ("c-later", 0, 1)]
    assert read_conversation_record(written.value).conversation_id == "c-0"
    assert restarted.service.stats.state["recovered"] == 1, "found written, marked written"


def test_a_record_a_kill_left_unsaved_is_revised_not_written_again_when_a_turn_comes_after_the_restart(
    bootstrap: str, topic_prefix: str
) -> None:
    """Killed once c-0's record (2 turns) was written, before the state saying so; its third turn comes
    after the restart restored the partition, so the conversation is decided again only a quiet period after
    the restart's stream time passed the restore: what the restart found on the topic must still be known
    then. The new record is revision 1 of the one the killed process wrote, never a second revision 0 (it
    was forgotten once the stream time passed the restore: under load, a turn's grounded revision re-keyed
    by the restart had the same effect)."""
    evaluations = f"{topic_prefix}.evaluations"
    produce(bootstrap, evaluations, turns()[:2])  # c-0's turns 1 and 2
    killed = conversations_process(
        bootstrap, topic_prefix, crash_at="outputs.written:1", spans=False, evidence=False
    )
    assert killed.wait() == -9, killed.log[-3000:]
    [written] = [
        read_conversation_record(m.value) for m in read_topic(bootstrap, f"{topic_prefix}.conversations")
    ]
    assert (written.conversation_id, written.revision, written.turns) == ("c-0", 0, 2)

    holder = hold_first_group(bootstrap, topic_prefix)
    produce(bootstrap, evaluations, turns()[2:3])  # c-0's turn 3: held in the first group
    cfg = config(bootstrap, topic_prefix, quiet_seconds=3.0, spans_topic=None, evidence_topic=None)
    with Running(cfg) as restarted:
        wait_until(
            lambda: restarted.service.stats.turn_records == 2,
            "turns 1 and 2 read again",
            timeout_s=SERVICE_WAIT_S,
        )  # restored, turns 1 and 2 read again
        holder.close()  # the turn is re-keyed after the restore
        wait_until(
            lambda: bool(restarted.written), "a record from the restarted service", timeout_s=SERVICE_WAIT_S
        )
    records = [read_conversation_record(m.value) for m in read_topic(bootstrap, cfg.conversations_topic)]
    assert [(r.conversation_id, r.revision, r.supersedes, r.turns) for r in records] == [
        ("c-0", 0, None, 2),
        ("c-0", 1, 0, 3),
    ]


def test_a_second_kill_while_the_restart_holds_what_it_found_writes_no_record_twice(
    bootstrap: str, topic_prefix: str
) -> None:
    """Killed once c-0's record was written, before the state saying so; the restart holds what it found on
    the topic while c-0 waits for its quiet period, decides c-1 meanwhile (full at max_turns: due at once),
    saves its state and is killed again right after that save. The second restart must still find c-0's
    record: the restart's saves kept the output marks of its restore while it held what it found (they moved
    past c-0's record, and the second restart wrote c-0 again)."""
    settings = {"turns_partitions": "1", "max_turns": "3"}  # c-0 and c-1 on one turns partition
    evaluations = f"{topic_prefix}.evaluations"
    produce(bootstrap, evaluations, turns()[:2])  # c-0's turns 1 and 2
    first = conversations_process(
        bootstrap, topic_prefix, crash_at="outputs.written:1", spans=False, evidence=False, **settings
    )
    assert first.wait() == -9, first.log[-3000:]
    produce(bootstrap, evaluations, [turn(100 + n, 1.0, "c-1") for n in range(3)])
    # c-0 waits far longer for its quiet period than the restart lives: what it found stays held.
    second = conversations_process(
        bootstrap, topic_prefix, crash_at="state.saved:1", quiet_seconds="600", spans=False, evidence=False,
        **settings,
    )  # fmt: skip
    assert second.wait() == -9, second.log[-3000:]
    conversations = f"{topic_prefix}.conversations"
    assert [
        read_conversation_record(m.value).conversation_id for m in read_topic(bootstrap, conversations)
    ] == [
        "c-0",
        "c-1",
    ], "c-1 written, and the restart killed after saving its state"

    third = conversations_process(bootstrap, topic_prefix, spans=False, evidence=False, **settings)
    assert third.wait() == 0, third.log[-3000:]
    records = [read_conversation_record(m.value) for m in read_topic(bootstrap, conversations)]
    assert [(r.conversation_id, r.revision, r.turns) for r in records] == [("c-0", 0, 2), ("c-1", 0, 3)]
