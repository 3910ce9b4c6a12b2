"""`tracescore conversations` killed with SIGKILL at each step of its checkpoint (the service base's named
crash points: while reading, while writing records, while saving state, while committing), then restarted:
every conversation gets its record, whole, and no record is written twice. The kill lands exactly at the
step (a count of the point, not a time); the restart waits out the killed member's session."""

from __future__ import annotations

from collections import Counter

import pytest
from conversation_turns import read_topic, turn
from kafka import KafkaProducer
from service_processes import IDLE_TIMEOUT_S, SESSION_TIMEOUT_MS, ServiceProcess

from tracescore.model import EvaluationRecord, read_conversation_record

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


def run(bootstrap: str, prefix: str, crash_at: str | None = None) -> ServiceProcess:
    args = [
        *("--bootstrap-servers", bootstrap, "--evaluations-topic", f"{prefix}.evaluations"),
        *("--conversations-topic", f"{prefix}.conversations", "--group-id", f"{prefix}.conversations"),
        *("--quiet-seconds", "1"),
        *(() if crash_at else ("--idle-timeout", IDLE_TIMEOUT_S)),
    ]
    env = {
        "TRACESCORE_CONVERSATIONS_TURNS_TOPIC": f"{prefix}.turns",
        "TRACESCORE_CONVERSATIONS_STATE_TOPIC": f"{prefix}.state",
        "TRACESCORE_CONVERSATIONS_SPANS_TOPIC": f"{prefix}.spans",
        "TRACESCORE_CONVERSATIONS_EVIDENCE_TOPIC": f"{prefix}.evidence",
        "TRACESCORE_CONVERSATIONS_TICK_SECONDS": "0.2",
        "TRACESCORE_CONVERSATIONS_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
    }
    return ServiceProcess("conversations", args, env, crash_at)


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_step_loses_no_conversation_and_writes_no_record_twice(
    bootstrap: str, topic_prefix: str, point: str
) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for record in turns():
        key, value = record.to_kafka()
        producer.send(f"{topic_prefix}.evaluations", key=key, value=value)
    producer.flush()
    producer.close()

    killed = run(bootstrap, topic_prefix, crash_at=point)
    assert killed.wait() == -9, f"never reached {point}:\n{killed.log[-3000:]}"
    restarted = run(bootstrap, topic_prefix)
    assert restarted.wait() == 0, restarted.log[-3000:]

    written = read_topic(bootstrap, f"{topic_prefix}.conversations")
    records = [read_conversation_record(m.value) for m in written]
    copies = Counter((r.conversation_id, r.revision) for r in records)
    assert sorted(r.conversation_id for r in records) == sorted(CONVERSATIONS), copies
    assert [(r.revision, r.turns, r.turns_flagged) for r in records] == [(0, 3, 1)] * len(CONVERSATIONS)
    # Every record's evaluation span went out (a span may go out twice: its topic is not read back).
    assert len({m.key for m in read_topic(bootstrap, f"{topic_prefix}.spans")}) == len(CONVERSATIONS)
