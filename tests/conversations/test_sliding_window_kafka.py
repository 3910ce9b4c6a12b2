"""A chat whose app resends only its last turns (a sliding window: LangChain's trim_messages, LlamaIndex's
ChatMemoryBuffer, `history[-4:]`) and names no conversation, through the real broker: an app decorated with
the tracescore SDK, `tracescore consume` with `infer_conversations`, then `tracescore conversations`.

Once turn 1 falls out of the resent history, a follow-up's inferred id (named by the first pair it resent)
is another's; a turn whose first two resent pairs are two consecutive turns of a known conversation
continues it: the chat stays one conversation, and its window turn that reuses a fact an earlier turn still
in its window retrieved is grounded in that turn. A chat of another user who opened with the same question
and answer as one of its middle turns (no user.id tells them apart: one pair in common) stays a conversation
of its own, and the window's turn that resent that pair is not counted in it.

A window fallen to one pair (LlamaIndex's token limit after a long answer) joins nothing, but each turn is
grounded in the turns it resent (their documents held also where a window starting with a follow-up's pair
is read); a pair two users' chats share (a thank-you) grounds neither."""

from __future__ import annotations

import pytest
from _helpers import consumer_settings
from conversation_service import config
from recorded_chats import chat_turns
from sdk_chats import chat_traces

from tracescore.consume import EvaluationConsumer, decode_message
from tracescore.conversations import ConversationService
from tracescore.model import ConversationRecord, EvaluationRecord, read_evaluation_record
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka

PRICES = "Aurora Basic costs 9 euros a month, billed monthly. Aurora Plus costs 19 euros a month."
SUPPORT = "Basic includes email support; phone support comes only with Plus."
WEEKEND = "Weekend support is sold as an add-on."
ADD_ON = "The weekend add-on extends support to Saturdays and Sundays and costs the same as the Basic plan."
CANCEL = "The weekend add-on can be cancelled at any time from the billing page."
STUDENTS = "Students get a discount of 20 percent on every plan."
# (question, documents, answer) per turn. Chat "window": the app resends its last two turns; its fourth turn
# (resending turns 2 and 3) prices the add-on from turn 2's retrieval, its own holding no price.
WINDOW = (
    ("Does Basic include phone support?", SUPPORT, "No. Phone support comes only with Plus."),
    ("What does the Basic plan cost?", PRICES, "The Basic plan costs 9 euros a month."),
    ("Is there support at weekends?", WEEKEND, "Weekend support is sold as an add-on."),
    ("And the weekend add-on?", ADD_ON, "The weekend add-on costs 9 euros a month."),
    (
        "Can I cancel it?",
        CANCEL,
        "Yes, the weekend add-on can be cancelled at any time from the billing page.",
    ),
)
# Chat "other": another user (no user.id either), opening with the window chat's second question and answer,
# resending its whole history.
OTHER = (
    WINDOW[1],
    ("Is there a student discount?", STUDENTS, "Students get a discount of 20 percent on every plan."),
    ("And on Plus?", STUDENTS, "Students get a discount of 20 percent on Plus too."),
)


def run(
    bootstrap: str, prefix: str, traces: list[tuple[str, int, bytes]]
) -> tuple[dict[tuple[str, int], EvaluationRecord], list[ConversationRecord], dict[str, tuple[str, int]]]:
    """Consume the turns (infer_conversations), then run the conversation service: the latest record per
    turn, the latest conversation records, and which turn each trace is."""
    producer = input_producer(bootstrap, [f"{prefix}.spans"], acks="all")
    which: dict[str, tuple[str, int]] = {}
    for chat, turn, payload in traces:
        trace_id = decode_message(payload)[0].trace_id
        which[trace_id] = (chat, turn)
        producer.send(f"{prefix}.spans", key=trace_id.encode(), value=payload)
    producer.flush()
    producer.close()
    settings = consumer_settings(
        bootstrap, prefix, conversation_evidence_topic=f"{prefix}.evidence", infer_conversations=True
    )
    EvaluationConsumer(settings, judge=OfflineJudge(), metrics=[Faithfulness()]).run()
    # A window turn waits for its tail at most quiet_seconds: long enough for the hops on two shared cores.
    cfg = config(bootstrap, prefix, spans_topic=None, quiet_seconds=5.0)
    written: list[ConversationRecord] = []
    ConversationService(cfg, on_record=written.append).run(idle_timeout_s=8)
    latest: dict[tuple[str, int], EvaluationRecord] = {}
    for message in read_topic(bootstrap, f"{prefix}.evaluations"):
        record = read_evaluation_record(message.value)
        turn = which[record.trace_id]
        if turn not in latest or latest[turn].revision < record.revision:
            latest[turn] = record
    final: dict[str, ConversationRecord] = {}
    for conversation in written:
        held = final.get(conversation.conversation_id)
        if held is None or held.revision < conversation.revision:
            final[conversation.conversation_id] = conversation
    return latest, list(final.values()), which


def assert_fifth_and_sixth(
    latest: dict[tuple[str, int], EvaluationRecord], trace_of: dict[tuple[str, int], str]
) -> None:
    """The recorded six-turn window chats: turn 5 prices the add-on from turn 3's retrieval, turn 6 says how
    it is paid from turn 4's; each faithful one grounded by a revision naming that turn's trace, a price
    invented or restated from turn 3's wrong answer flagged."""
    for chat, grounded in (("window_faithful", (5, 6)), ("window_invented", (6,)), ("window_restated", (6,))):
        for n, earlier in ((5, 3), (6, 4)):
            record = latest[(chat, n)]
            if n not in grounded:
                assert record.label == "hallucinated", (chat, n)
                continue
            assert (record.label, record.revision) == ("faithful", 1), (chat, n)
            assert record.details["earlier_turns"]["status"] == "grounded", (chat, n)
            sources = [c.get("evidence_source") or {} for c in record.details["claims"]]
            earlier_traces = {s["trace_id"] for s in sources if "trace_id" in s}
            assert earlier_traces == {trace_of[(chat, earlier)]}, (chat, n, sources)


def test_a_chat_that_resends_only_its_last_turns_stays_one_conversation(
    bootstrap: str, topic_prefix: str
) -> None:
    latest, conversations, which = run(
        bootstrap, topic_prefix, chat_traces({"window": (2, WINDOW), "other": (0, OTHER)})
    )
    trace_of = {turn: trace for trace, turn in which.items()}
    chats = sorted(sorted(which[t] for t in record.trace_ids) for record in conversations)
    # Each chat one conversation counting its follow-ups (turn 1, told from a one-shot only later, in none).
    assert chats == [
        [("other", 2), ("other", 3)],
        [("window", 2), ("window", 3), ("window", 4), ("window", 5)],
    ], chats
    window_id = next(r.conversation_id for r in conversations if which[r.trace_ids[0]][0] == "window")
    for n in (2, 3, 4, 5):
        assert latest[("window", n)].label == "faithful", f"window turn {n}"
    fourth = latest[("window", 4)]
    assert fourth.revision == 1 and fourth.session_id == window_id, "grounded by a revision, in the chat"
    assert fourth.details["earlier_turns"]["status"] == "grounded"
    sources = {c["evidence_source"]["trace_id"] for c in fourth.details["claims"] if c.get("evidence_source")}
    assert sources == {trace_of[("window", 2)]}, "the price is turn 2's retrieval, still in the window"
    [window] = [r for r in conversations if r.conversation_id == window_id]
    assert (window.turns, window.turns_flagged) == (4, 0), window


def test_a_recorded_langchain_chat_trimmed_to_its_last_two_turns_stays_one_conversation(
    bootstrap: str, topic_prefix: str
) -> None:
    """The six-turn chat recorded from LangChain (`trim_messages` keeping the last two questions and answers,
    under OpenInference; the app names only the user), in its three endings: each chat is one conversation of
    its five follow-ups. Turn 5 prices the add-on from turn 3's retrieval, turn 6 says how it is paid from
    turn 4's, each still in its window while turn 1 is not: both are grounded by a revision naming that
    turn's trace. A price invented, or restated from turn 3's wrong answer, stays flagged."""
    turns = chat_turns("langchain_window_conversation")
    latest, conversations, which = run(bootstrap, topic_prefix, [(t.chat, t.turn, t.payload) for t in turns])
    trace_of = {turn: trace for trace, turn in which.items()}
    chats = sorted(sorted(which[t] for t in record.trace_ids) for record in conversations)
    assert chats == [[(chat, n) for n in range(2, 7)] for chat in sorted({t.chat for t in turns})], chats
    assert_fifth_and_sixth(latest, trace_of)
    flagged = {"window_faithful": 0, "window_invented": 1, "window_restated": 2}
    for record in conversations:
        chat = which[record.trace_ids[0]][0]
        assert (record.turns, record.turns_flagged) == (5, flagged[chat]), record


def test_a_recorded_llamaindex_chat_whose_token_window_fell_to_one_pair_is_grounded_in_its_turns(
    bootstrap: str, topic_prefix: str
) -> None:
    """The six-turn chat recorded from LlamaIndex's context chat engine, its `ChatMemoryBuffer` keeping what
    fits a token limit (the app names only the user): after the Plus plan's long answer, turns 3 and 4 each
    resend only the turn before them. One pair never joins (it is not distinctive), so each chat is three
    conversations: turn 2 (turn 1's), turn 3 (the one turn 2's pair opens) and turns 4 to 6 (turn 3's
    pair's). Each follow-up's documents are held also where its own pair's window starts, so every turn is
    grounded in the turns its history holds: turn 5's price is turn 3's retrieval (turn 3 a turn of another
    conversation), turn 6's billing turn 4's; both grounded by a revision naming that turn's trace. Invented
    and restated prices stay flagged."""
    turns = chat_turns("llamaindex_window_conversation")
    latest, conversations, which = run(bootstrap, topic_prefix, [(t.chat, t.turn, t.payload) for t in turns])
    trace_of = {turn: trace for trace, turn in which.items()}
    chats = sorted(sorted(which[t] for t in record.trace_ids) for record in conversations)
    expected = [
        [(chat, n) for n in ns] for chat in sorted({t.chat for t in turns}) for ns in ((2,), (3,), (4, 5, 6))
    ]
    assert chats == sorted(expected), chats
    assert_fifth_and_sixth(latest, trace_of)
    # Per chat, the conversations' flagged turns by their first turn: restated turn 3 is one of its own.
    flagged = {"window_faithful": {}, "window_invented": {4: 1}, "window_restated": {3: 1, 4: 1}}
    for record in conversations:
        chat, first = min(which[t] for t in record.trace_ids)
        assert record.turns_flagged == flagged[chat].get(first, 0), record


# Two users (no user.id either) of an app whose window falls to one pair (each follow-up resends only the turn
# before it, as LlamaIndex's token limit does after a long answer): both thank it and get the same reply, the
# app's retrieval for the thanks following each chat's topic. Each third turn says what the add-on costs,
# which only the first user's thanks retrieved.
THANKS = ("Thanks!", ADD_ON, "You're welcome!")
COSTS = ("And the weekend add-on?", WEEKEND, "The weekend add-on costs the same as the Basic plan.")
FIRST_USER = (WINDOW[1], THANKS, COSTS)
SECOND_USER = (OTHER[1], ("Thanks!", STUDENTS, "You're welcome!"), COSTS)


def test_two_chats_that_share_a_thank_you_are_never_grounded_in_each_others_documents(
    bootstrap: str, topic_prefix: str
) -> None:
    """A turn that resent only the turn before it is grounded in that turn's documents, held where a window
    starting with its pair is read: the first user's third turn, in its thanks' retrieval. The second user's
    third turn resent the same pair (the same thanks and reply): two turns of that pair are held there, so
    neither counts, and its price, which only the other user's thanks retrieved, stays flagged. Each chat's
    own conversation holds only its own turns; the two third turns share the id their one resent pair names,
    as two chats that open with the same pair do."""
    traces = chat_traces({"first": ([0, 1, 1], FIRST_USER), "second": ([0, 1, 1], SECOND_USER)})
    latest, conversations, which = run(bootstrap, topic_prefix, traces)
    trace_of = {turn: trace for trace, turn in which.items()}
    chats = sorted(sorted(which[t] for t in record.trace_ids) for record in conversations)
    assert chats == [[("first", 2)], [("first", 3), ("second", 3)], [("second", 2)]], chats
    first = latest[("first", 3)]
    assert (first.label, first.revision) == ("faithful", 1), first
    sources = {c["evidence_source"]["trace_id"] for c in first.details["claims"] if c.get("evidence_source")}
    assert sources == {trace_of[("first", 2)]}, "the price is the first user's thanks' retrieval"
    second = latest[("second", 3)]
    assert second.label == "hallucinated", "never grounded in the other user's documents"
