"""`tracescore consume`'s default `infer_conversations` (auto) through the real broker, on three services of
an app decorated with the tracescore SDK that names no conversation: a chat that resends its questions and
answers, a one-shot RAG service, and a one-shot service whose prompt holds a fixed few-shot example
pair (and one of whose users asked exactly that example's question and got its answer).

Under the default, the chat service is learned from its first conversation's second turn: from then on its
follow-ups are inferred as with the setting on, and its first turns' documents, held until then, are
written, so the first conversation's third turn (pricing the add-on from turn 1's retrieval) is grounded.
The two one-shot services infer nothing and write no document. `false` and `true` (the setting as before)
are unchanged: nothing inferred or written, or every service's documents written from the start (the
few-shot service's then one conversation of all its interactions: the setting on cannot tell a fixed
prompt's pairs from a chat's)."""

from __future__ import annotations

import pytest
from _helpers import consumer_settings
from conversation_service import config
from kafka.admin import NewTopic
from sdk_chats import chat_traces

from tracescore.consume import ConsumerStats, EvaluationConsumer, decode_message
from tracescore.conversations import ConversationService
from tracescore.model import EvaluationRecord, read_evaluation_record, read_turn_evidence
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka

PRICES = "Aurora Basic costs 9 euros a month, billed monthly. Aurora Plus costs 19 euros a month."
SUPPORT = "Basic includes email support; phone support comes only with Plus."
WEEKEND = "Weekend support is sold as an add-on."
ADD_ON = "The weekend add-on extends support to Saturdays and Sundays and costs the same as the Basic plan."
STUDENTS = "Students get a discount of 20 percent on every plan."
# The chat service's chats, resending their whole history: turn 3 prices the add-on from turn 1's retrieval.
CHATS = {
    "first": (
        0,
        (
            ("What does the Basic plan cost?", PRICES, "The Basic plan costs 9 euros a month."),
            ("Is there support at weekends?", WEEKEND, "Weekend support is sold as an add-on."),
            ("And the weekend add-on?", ADD_ON, "The weekend add-on costs 9 euros a month."),
        ),
    ),
    "second": (
        0,
        (
            ("Does Basic include phone support?", SUPPORT, "No. Phone support comes only with Plus."),
            ("What does the Basic plan cost?", PRICES, "The Basic plan costs 9 euros a month."),
        ),
    ),
}
# One-shot questions (nothing resent).
QUESTIONS = {
    "prices": (None, (("What does Plus cost?", PRICES, "Aurora Plus costs 19 euros a month."),)),
    "support": (None, (("Is phone support in Basic?", SUPPORT, "No, only in Plus."),)),
    "students": (None, (("Do students pay less?", STUDENTS, "Yes, 20 percent less on every plan."),)),
}
# The few-shot prompt's example pair, before every request; its third user asks it and is answered as it is.
EXAMPLE = ("Is there a student discount?", "Students get a discount of 20 percent on every plan.")
FEW_SHOT = {**QUESTIONS, "as_the_example": (None, ((EXAMPLE[0], STUDENTS, EXAMPLE[1]),))}


@pytest.fixture(scope="module")
def traces() -> list[tuple[str, str, int, bytes]]:
    """(service, chat, turn, OTLP message) of each turn: the chats first, then the one-shot services', then
    the chat service's again (its turns after it was learned)."""
    recorded = [("chat-app", chat, n, payload) for chat, n, payload in chat_traces(CHATS, service="chat-app")]
    one_shot = chat_traces(QUESTIONS, service="one-shot-app")
    few_shot = chat_traces(FEW_SHOT, service="few-shot-app", examples=(EXAMPLE,))
    # Interleaved, as services' traffic is: a one-shot interaction between each chat turn.
    others = [("one-shot-app", *t) for t in one_shot] + [("few-shot-app", *t) for t in few_shot]
    mixed: list[tuple[str, str, int, bytes]] = []
    for n, turn in enumerate(recorded):
        mixed += [turn, *others[2 * n : 2 * n + 2]]
    return mixed + others[2 * len(recorded) :]


def consume(
    bootstrap: str, prefix: str, traces: list[tuple[str, str, int, bytes]], **settings: object
) -> tuple[ConsumerStats, dict[str, tuple[str, str, int]], list[EvaluationRecord], list[str]]:
    """Consume the turns in the order the apps made them (one partition); the stats, which turn each trace is,
    the records, and the service of each evidence message."""
    topic = f"{prefix}.spans"
    producer = input_producer(bootstrap, [NewTopic(topic, 1, 1)], acks="all")
    which: dict[str, tuple[str, str, int]] = {}
    for service, chat, turn, payload in traces:
        trace_id = decode_message(payload)[0].trace_id
        which[trace_id] = (service, chat, turn)
        producer.send(topic, key=trace_id.encode(), value=payload)
    producer.flush()
    producer.close()
    evidence_topic = f"{prefix}.evidence"
    consumer = consumer_settings(bootstrap, prefix, conversation_evidence_topic=evidence_topic, **settings)
    stats = EvaluationConsumer(consumer, judge=OfflineJudge(), metrics=[Faithfulness()]).run()
    records = [read_evaluation_record(m.value) for m in read_topic(bootstrap, f"{prefix}.evaluations")]
    evidence = [read_turn_evidence(m.value).service_name for m in read_topic(bootstrap, evidence_topic)]
    return stats, which, records, evidence


def latest_records(
    bootstrap: str, prefix: str, which: dict[str, tuple[str, str, int]]
) -> dict[tuple[str, str, int], EvaluationRecord]:
    latest: dict[tuple[str, str, int], EvaluationRecord] = {}
    for message in read_topic(bootstrap, f"{prefix}.evaluations"):
        record = read_evaluation_record(message.value)
        turn = which[record.trace_id]
        if turn not in latest or latest[turn].revision < record.revision:
            latest[turn] = record
    return latest


def test_by_default_a_chat_service_is_learned_and_its_first_conversation_grounded(
    bootstrap: str, topic_prefix: str, traces: list[tuple[str, str, int, bytes]]
) -> None:
    stats, which, records, evidence = consume(bootstrap, topic_prefix, traces)
    assert stats.services_learned == 1
    # The chat service's five turns' documents (the two held first turns, written once it was learned, and
    # its follow-ups); none of the one-shot services'.
    assert sorted(evidence) == ["chat-app"] * 5, evidence
    by_service: dict[str, set[str | None]] = {}
    for record in records:
        by_service.setdefault(which[record.trace_id][0], set()).add(record.session_id)
    assert by_service["one-shot-app"] == {None} and by_service["few-shot-app"] == {None}
    follow_ups = {which[r.trace_id][1:]: r for r in records if which[r.trace_id][0] == "chat-app"}
    assert follow_ups[("first", 1)].session_id is None, "a first turn: no record names it"
    assert all(follow_ups[turn].conversation_source == "history" for turn in (("first", 2), ("first", 3)))
    assert follow_ups[("first", 2)].session_id == follow_ups[("first", 3)].session_id
    assert follow_ups[("second", 2)].session_id not in (None, follow_ups[("first", 2)].session_id)
    ConversationService(config(bootstrap, topic_prefix, spans_topic=None)).run(idle_timeout_s=5)
    latest = latest_records(bootstrap, topic_prefix, which)
    third = latest[("chat-app", "first", 3)]
    assert (third.label, third.revision) == ("faithful", 1), "grounded by a revision"
    trace_of = {turn: trace for trace, turn in which.items()}
    sources = [c.get("evidence_source") or {} for c in third.details["claims"]]
    assert {s["trace_id"] for s in sources if "trace_id" in s} == {trace_of[("chat-app", "first", 1)]}


@pytest.mark.parametrize("infer", [False, True], ids=["false", "true"])
def test_the_setting_written_out_is_as_before(
    bootstrap: str, topic_prefix: str, traces: list[tuple[str, str, int, bytes]], infer: bool
) -> None:
    stats, which, records, evidence = consume(bootstrap, topic_prefix, traces, infer_conversations=infer)
    assert stats.services_learned == 0, "nothing learned: the setting decides"
    sessions = {which[r.trace_id]: r.session_id for r in records}
    if not infer:
        assert evidence == [] and set(sessions.values()) == {None}
        return
    # Every interaction that names none has its documents written, the one-shot services' too.
    assert sorted(evidence) == sorted(service for service, *_ in traces)
    assert sessions[("chat-app", "first", 3)] == sessions[("chat-app", "first", 2)] is not None
    assert sessions[("one-shot-app", "prices", 1)] is None
    # The fixed example pair read as a chat's first turn: every few-shot interaction in one conversation.
    few_shot = {session for (service, *_), session in sessions.items() if service == "few-shot-app"}
    assert len(few_shot) == 1 and None not in few_shot
