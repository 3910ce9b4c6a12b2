"""A chat that resends only its last two turns (a sliding window; no conversation named) survives `kill -9`
of `tracescore conversations` mid-join: killed after the turns were applied, after a window turn was written
again under the conversation it continues (or a tail written) but before its link's state was saved, while
saving, and after saving but before committing; then restarted. Every chat of five turns is one conversation
counting its four follow-ups once (the fourth and fifth resend only turns 2-3 and 3-4: each joins by a tail),
each fourth turn (resting on turn 2's retrieval, still in its window) gets exactly one grounded revision, none
written twice. So does a chat whose window fell to one pair (each turn resends only the one before it, as
LlamaIndex's token limit does after a long answer), killed also after stage 1 wrote a follow-up's documents
again where its pair's window starts: its fourth turn, resting on turn 3's retrieval (turn 3 a turn of another
conversation), gets exactly one grounded revision."""

from __future__ import annotations

import pytest
from conversation_service import conversations_process, killed_then_restarted, last_records
from grounding_turns import ADD_ON, PRICES, SUPPORT, evidence_of, interaction, scored
from service_processes import ServiceProcess

from tracescore.model import (
    ConversationSource,
    history_conversation_id,
)
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

CHATS = [f"chat-{i}" for i in range(4)]
SERVICE = "support-chat"
# (documents, answer) per turn; the app resends its last two turns.
TURNS = {
    1: (SUPPORT, "No. Phone support comes only with Plus."),
    2: (PRICES, "The Basic plan costs 9 euros a month."),
    3: (SUPPORT, "Phone support comes only with Plus."),
    4: (ADD_ON, "The weekend add-on costs 9 euros a month."),  # turn 2's price, turn 2 still resent
    5: (SUPPORT, "No. Phone support comes only with Plus."),
}
WINDOW = 2
POINTS = [
    "keyed.applied:2",  # documents and records applied in memory, nothing written
    "shared.sent:2",  # a window turn written again where it joins (or a tail written), its link not saved
    "outputs.written:1",  # every output of a checkpoint written, no state saved
    "state.sent:3",  # some links and held turns saved, the rest not
    "state.saved:1",  # saved, the turns topic not committed
]


# A window fallen to one pair: turn 4 resends only turn 3, whose retrieval holds its price.
ONE_PAIR = {
    1: (SUPPORT, "No. Phone support comes only with Plus."),
    2: (SUPPORT, "Phone support comes only with Plus."),
    3: (PRICES, "The Basic plan costs 9 euros a month."),
    4: (ADD_ON, "The weekend add-on costs 9 euros a month."),
}
ONE_PAIR_POINTS = [
    "rekey.sent:1",  # stage 1 wrote the documents and their copies, committed nothing
    "keyed.applied:2",  # applied in memory, nothing written
    "outputs.written:1",  # the grounded revision written, no state saved
    "state.sent:2",  # some held turns (copies among them) saved, the rest not
]


def digest(chat: str, n: int) -> str:
    return f"{chat}-turn{n}"


def conversation(chat: str) -> str:
    """The id the chat's first turn opens (and its follow-ups name while turn 1 is still resent)."""
    return history_conversation_id(SERVICE, None, digest(chat, 1))


def produce(
    bootstrap: str, prefix: str, turns: dict[int, tuple[tuple[str, ...], str]] = TURNS, window: int = WINDOW
) -> None:
    """Each turn's record and documents as consume writes them with infer_conversations: a follow-up under the
    id its first resent pair names, turn 1's records under none and its documents under the id it opens."""
    producer = input_producer(bootstrap, [f"{prefix}.evidence", f"{prefix}.evaluations"], acks="all")
    for chat in CHATS:
        for n, (documents, answer) in turns.items():
            turn = interaction(n, conversation=chat, user=None, answer=answer, documents=documents)
            history = [digest(chat, k) for k in range(max(1, n - window), n)]
            named = history_conversation_id(SERVICE, None, history[0]) if history else None
            evidence = evidence_of(turn).model_copy(
                update={
                    "session_id": named or conversation(chat),
                    "turn_digest": digest(chat, n),
                    "history_turns": history,
                }
            )
            producer.send(
                f"{prefix}.evidence",
                key=evidence.trace_id.encode(),
                value=evidence.model_dump_json().encode(),
            )
            source = ConversationSource.HISTORY if named else None
            record = scored(turn).model_copy(
                update={"session_id": named, "conversation_source": source, "history_turns": history}
            )
            key, value = record.to_kafka()
            producer.send(f"{prefix}.evaluations", key=key, value=value)
    producer.flush()
    producer.close()


def run(bootstrap: str, prefix: str, crash_at: str | None = None) -> ServiceProcess:
    # A window turn waits for its tail at most quiet_seconds from when it was read: long enough for the hops
    # (turn 3 held in its conversation, its tail, turn 4 there, its tail) on two shared cores.
    return conversations_process(
        bootstrap, prefix, crash_at=crash_at, idle_timeout="3", spans=False, quiet_seconds="5"
    )


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_mid_window_loses_no_conversation_and_counts_no_turn_twice(
    bootstrap: str, topic_prefix: str, point: str
) -> None:
    produce(bootstrap, topic_prefix)
    revised = killed_then_restarted(run, bootstrap, topic_prefix, point)
    trace_of = {
        (chat, n): interaction(n, conversation=chat, user=None).span.trace_id for chat in CHATS for n in TURNS
    }
    fourth = {trace_of[(c, 4)] for c in CHATS}
    assert {r.trace_id for r in revised} == fourth and len(revised) == len(CHATS)
    assert all((r.revision, r.label) == (1, "faithful") for r in revised)
    assert all(r.details["earlier_turns"]["status"] == "grounded" for r in revised)
    by_trace = {trace: chat for (chat, _), trace in trace_of.items()}
    assert all(r.session_id == conversation(by_trace[r.trace_id]) for r in revised), (
        "in the chat it continues"
    )

    last = last_records(bootstrap, topic_prefix)
    assert sorted(last) == sorted(conversation(c) for c in CHATS), "one conversation a chat, no other"
    for chat in CHATS:
        record = last[conversation(chat)]
        follow_ups = sorted(trace_of[(chat, n)] for n in TURNS if n > 1)
        assert sorted(record.trace_ids) == follow_ups, "each follow-up once, turn 1 in none"
        assert (record.turns, record.turns_flagged, record.label) == (4, 0, "passed"), record


@pytest.mark.parametrize("point", ONE_PAIR_POINTS)
def test_a_kill_while_a_window_of_one_pair_is_grounded_writes_its_revision_once(
    bootstrap: str, topic_prefix: str, point: str
) -> None:
    produce(bootstrap, topic_prefix, ONE_PAIR, window=1)
    revised = killed_then_restarted(run, bootstrap, topic_prefix, point)
    trace_of = {
        (chat, n): interaction(n, conversation=chat, user=None).span.trace_id
        for chat in CHATS
        for n in ONE_PAIR
    }
    assert sorted(r.trace_id for r in revised) == sorted(trace_of[(c, 4)] for c in CHATS), "each once"
    for record in revised:
        chat = next(c for (c, n), t in trace_of.items() if t == record.trace_id)
        assert (record.label, record.revision) == ("faithful", 1), record
        sources = {
            c["evidence_source"]["trace_id"] for c in record.details["claims"] if c.get("evidence_source")
        }
        assert sources == {trace_of[(chat, 3)]}, "turn 3's retrieval, held where its pair's window starts"
    last = last_records(bootstrap, topic_prefix)
    expected = {
        history_conversation_id(SERVICE, None, digest(chat, n)): [trace_of[(chat, n + 1)]]
        for chat in CHATS
        for n in (1, 2, 3)
    }
    assert {c: sorted(r.trace_ids) for c, r in last.items()} == expected, "each follow-up once, in its window"
