"""Grounding across turns survives `kill -9` at each of its steps: `tracescore conversations` killed (the
service base's named crash points) after the turns' documents and records were applied but not saved,
after a grounded revision was sent but not the state that records it, while the held turns were being
saved, and after they were saved but not committed; then restarted. Every follow-up resting on turn 1's
retrieval gets exactly one grounded revision on the evaluations topic, none written twice, and its
conversation's last record counts it as passed."""

from __future__ import annotations

import pytest
from conversation_service import conversations_process, killed_then_restarted, last_records
from grounding_turns import evidence_of, interaction, scored
from service_processes import ServiceProcess

from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

CONVERSATIONS = [f"chat-{i}" for i in range(6)]
POINTS = [
    "keyed.applied:1",  # documents and records applied in memory, nothing written
    "state.saved:1",  # the held turns saved, the turns topic not committed, nothing decided yet
    "output.sent:2",  # two grounded revisions written, the rest not, their state not saved
    "outputs.written:1",  # every revision of a checkpoint written, no state saved
    "state.sent:4",  # some held turns saved after the revisions, the rest not
]


def produce(bootstrap: str, prefix: str) -> None:
    producer = input_producer(bootstrap, [f"{prefix}.evidence", f"{prefix}.evaluations"], acks="all")
    for conversation in CONVERSATIONS:
        for n in (1, 2, 3):
            turn = interaction(n, conversation=conversation)
            evidence = evidence_of(turn)
            producer.send(
                f"{prefix}.evidence",
                key=evidence.trace_id.encode(),
                value=evidence.model_dump_json().encode(),
            )
            key, value = scored(turn).to_kafka()
            producer.send(f"{prefix}.evaluations", key=key, value=value)
    producer.flush()
    producer.close()


def run(bootstrap: str, prefix: str, crash_at: str | None = None) -> ServiceProcess:
    return conversations_process(bootstrap, prefix, crash_at=crash_at, idle_timeout="3", spans=False)


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_grounding_step_loses_no_revision_and_writes_none_twice(
    bootstrap: str, topic_prefix: str, point: str
) -> None:
    produce(bootstrap, topic_prefix)
    revised = killed_then_restarted(run, bootstrap, topic_prefix, point)
    third = {interaction(3, conversation=c).span.trace_id for c in CONVERSATIONS}
    assert {r.trace_id for r in revised} == third and len(revised) == len(CONVERSATIONS)
    assert all((r.revision, r.label) == (1, "faithful") for r in revised)
    assert all(r.details["earlier_turns"]["status"] == "grounded" for r in revised)

    last = last_records(bootstrap, topic_prefix)
    assert sorted(last) == sorted(CONVERSATIONS)
    assert all((r.turns, r.turns_flagged, r.label) == (3, 0, "passed") for r in last.values()), last
