"""A chain of responses the model's service keeps (the Responses API's previous_response_id) survives
`kill -9` of `tracescore conversations` mid-chain: killed after the turns were applied, after a follow-up
was written again under its chain (or its next link told the chain's id) but before the link's state was
saved, while saving, and after saving but before committing; then restarted. Every chain of four turns is
one conversation counting its follow-ups once (the fourth joins after two hops), each third turn (resting on
turn 1's retrieval, its trace naming only turn 2's response) gets exactly one grounded revision, none written
twice."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conversation_service import conversations_process, killed_then_restarted, last_records
from grounding_turns import evidence_of, interaction, scored
from service_processes import ServiceProcess

from tracescore.model import (
    Interaction,
    response_chain_id,
)
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

CHATS = [f"chat-{i}" for i in range(4)]
TURNS = (1, 2, 3, 4)  # the fourth asks again what the second did, answered from its own retrieval
POINTS = [
    "keyed.applied:2",  # documents and records applied in memory, nothing written
    "shared.sent:2",  # a follow-up written again under its chain (or a link told it), the link not saved
    "outputs.written:1",  # every output of a checkpoint written, no state saved
    "state.sent:3",  # some links and held turns saved, the rest not
    "state.saved:1",  # saved, the turns topic not committed
]


def chain_turn(n: int, chat: str) -> Interaction:
    """Turn `n` of `chat` as extract reads it where the app named no conversation and the service keeps the
    history: its own response id, and the one before it (none for turn 1)."""
    turn = interaction(n, conversation=chat, user=None)
    previous = f"resp_{chat}_{n - 1}" if n > 1 else None
    return replace(turn, session_id=None, response_id=f"resp_{chat}_{n}", previous_response_id=previous)


def produce(bootstrap: str, prefix: str) -> None:
    producer = input_producer(bootstrap, [f"{prefix}.evidence", f"{prefix}.evaluations"], acks="all")
    for chat in CHATS:
        for n in TURNS:
            turn = chain_turn(n, chat)
            # As consume writes them: a first turn's documents under the history conversation it may open,
            # a follow-up's under the chain its answer would open.
            opens = (
                f"history:{chat}" if n == 1 else response_chain_id(turn.span.service_name, f"resp_{chat}_{n}")
            )
            evidence = evidence_of(turn).model_copy(
                update={
                    "session_id": opens,
                    "response_id": turn.response_id,
                    "previous_response_id": turn.previous_response_id,
                }
            )
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
def test_a_kill_mid_chain_loses_no_conversation_and_counts_no_turn_twice(
    bootstrap: str, topic_prefix: str, point: str
) -> None:
    produce(bootstrap, topic_prefix)
    revised = killed_then_restarted(run, bootstrap, topic_prefix, point)
    third = {chain_turn(3, c).span.trace_id for c in CHATS}
    assert {r.trace_id for r in revised} == third and len(revised) == len(CHATS)
    assert all((r.revision, r.label) == (1, "faithful") for r in revised)
    assert all(r.details["earlier_turns"]["status"] == "grounded" for r in revised)
    assert all(r.conversation_source == "response_chain" for r in revised)

    last = last_records(bootstrap, topic_prefix)
    service = chain_turn(1, CHATS[0]).span.service_name
    assert sorted(last) == sorted(response_chain_id(service, f"resp_{c}_1") for c in CHATS)
    follow_ups = {c: sorted(chain_turn(n, c).span.trace_id for n in TURNS[1:]) for c in CHATS}
    for chat in CHATS:
        record = last[response_chain_id(service, f"resp_{chat}_1")]
        assert sorted(record.trace_ids) == follow_ups[chat], "each follow-up once, turn 1 in none"
        assert (record.turns, record.turns_flagged, record.label) == (3, 0, "passed"), record
