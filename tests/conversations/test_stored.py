"""A conversation's state as the state topic holds it: typed and versioned (schema 2), the snapshot earlier
versions wrote (unversioned, positional) carried over, anything else refused with a reason; and a record
revision found already written after a crash is never given to another record."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from conversation_turns import T0, ms, turn

from tracescore.conversations import Conversation, ConversationsConfig, ConversationTracker
from tracescore.conversations._logic import ConversationLogic
from tracescore.conversations._state import record_digest
from tracescore.conversations._stored import (
    ChainFollower,
    ConversationCodec,
    ConversationState,
    LinkState,
    WindowState,
    WindowTail,
    WindowTurn,
    from_legacy,
)

# Written by `Conversation.snapshot()` of the version before schema 2 (tracescore.conversations.state):
# turns 1 and 2 were written as revision 0, then turn 3 arrived.
LEGACY = json.dumps(
    {
        "service": "chat-api", "conversation_id": "c-1", "route": "/chat", "started_ms": 1767268800000,
        "last_arrival_ms": 1767268802000, "through": 2, "past_cap": 0, "pending": True,
        "emitted": [["faithfulness", "offline", None, 0, "5e1a9fbba91c0955"]],
        "turns": [
            ["00000000000000000000000000000001", "0000000000000001",
             [["faithfulness", "offline", None, 0, "ok", 1.0, "faithful", None, 1767268801000]]],
            ["00000000000000000000000000000002", "0000000000000002",
             [["faithfulness", "offline", None, 0, "ok", 0.0, "hallucinated",
               "turn 2: claim without evidence", 1767268802000]]],
            ["00000000000000000000000000000003", "0000000000000003",
             [["faithfulness", "offline", None, 0, "ok", 1.0, "faithful", None, 1767268803000]]],
        ],
    }
).encode()  # fmt: skip
CODEC = ConversationLogic.codec


def conversation_of(turns: list[tuple[int, float]]) -> Conversation:
    t = ConversationTracker(ConversationsConfig())
    for offset, (n, score) in enumerate(turns):
        t.apply(turn(n, score), 0, offset, ms(T0) + offset * 1000)
    found = t.get(("chat-api", "c-1"))
    assert found is not None
    return found


def test_a_conversation_round_trips_through_its_typed_versioned_state() -> None:
    conversation = conversation_of([(1, 1.0), (2, 0.0)])
    conversation.written(conversation.due(0.95, T0))
    raw = CODEC.encode(ConversationState.of(conversation))
    assert json.loads(raw)["schema_version"] == 2
    restored = CODEC.decode(raw).conversation(partition=3)
    assert restored.records(0.95, T0) == conversation.records(0.95, T0)
    assert (restored.emitted, restored.through, restored.partition) == (conversation.emitted, 1, 3)
    assert restored.due(0.95, T0) == [], "what was written is known: nothing is due again"


def test_the_unversioned_snapshot_of_the_earlier_version_is_carried_over() -> None:
    restored = from_legacy(LEGACY).conversation(partition=0)
    # The same conversation fed turn by turn today: the same records, and the same revision comes next.
    today = conversation_of([(1, 1.0), (2, 0.0)])
    today.written(today.due(0.95, T0))
    today.apply(turn(3, 1.0), 2, ms(T0) + 2000, 200)
    assert restored.records(0.95, T0) == today.records(0.95, T0)
    [(_, revised, _)] = restored.due(0.95, T0)
    assert (revised.revision, revised.supersedes, revised.turns) == (1, 0, 3)
    assert restored.turns[("0" * 31 + "2", "0" * 15 + "2")][("faithfulness", "offline", None)][4] == (
        "turn 2: claim without evidence"
    )


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"schema_version": 3, "anything": "else"}', "future_state_version"),
        (b'{"schema_version": 1}', "old_state_version"),
        (LEGACY, "invalid_state"),  # unversioned: only read from the old state topic
        (b"\x00\xff garbage", "invalid_state"),
        (b'{"schema_version": 2, "service": "s"}', "invalid_state"),
        (b"[1, 2]", "invalid_state"),
    ],
)
def test_a_state_of_another_version_or_garbage_is_refused_with_its_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(ValueError) as refused:
        CODEC.decode(raw)
    assert refused.value.reason == reason  # type: ignore[attr-defined]
    assert "\n" not in refused.value.detail  # type: ignore[attr-defined]


def test_a_field_added_by_a_newer_version_within_schema_2_is_ignored() -> None:
    data = json.loads(CODEC.encode(ConversationState.of(conversation_of([(1, 1.0)]))))
    data["a_field_of_tomorrow"] = {"x": 1}
    assert CODEC.decode(json.dumps(data).encode()).conversation_id == "c-1"


def test_a_revision_already_on_the_topic_is_never_given_to_another_record() -> None:
    """After a crash between writing records and saving the state: revision 0 is on the topic."""
    conversation = conversation_of([(1, 1.0), (2, 0.0)])
    [(tier, first, digest)] = conversation.due(0.95, T0)
    assert digest == record_digest(first), "the digest of what the record says, whatever its revision"
    same = {(tier, 0): digest}
    # The same record found: it is due as revision 0 (written already: marked, not written again).
    [(_, again, _)] = conversation.due(0.95, T0, lambda t, r: same.get((t, r)))
    assert again.revision == 0
    # A later turn changed it: revision 0 on the topic says the older content, so this one is revision 1.
    conversation.apply(turn(3, 1.0, at=T0 + timedelta(days=1)), 2, ms(T0) + 5000, 200)
    [(_, revised, _)] = conversation.due(0.95, T0, lambda t, r: same.get((t, r)))
    assert (revised.revision, revised.supersedes) == (1, 0)


def test_a_chains_link_round_trips_and_a_release_before_links_refuses_it_as_a_future_version() -> None:
    """A link of a chain of responses (`LinkState`, kind link) is version 3: this release reads it back and
    refuses a later one; a release before links, whose codec knows conversations of version 2 only, refuses it
    as written by a newer tracescore instead of misreading it as a conversation."""
    link = LinkState(
        service="s", link_id="responses:0", root="responses:1",
        followers=[ChainFollower(trace_id="t" * 32, span_id="s" * 16, response_id="resp_2", sent=["root"])],
    )  # fmt: skip
    raw = CODEC.encode(link)
    assert CODEC.decode(raw) == link
    future = json.loads(raw) | {"schema_version": 4}
    with pytest.raises(ValueError) as refused:
        CODEC.decode(json.dumps(future).encode())
    assert refused.value.reason == "future_state_version"  # type: ignore[attr-defined]
    # A release before links reads every entry not of kind "turn" as a conversation, of version 2.
    as_a_conversation = {k: v for k, v in json.loads(raw).items() if k != "kind"}
    with pytest.raises(ValueError) as before_links:
        CODEC.decode(json.dumps(as_a_conversation).encode())
    assert before_links.value.reason == "future_state_version"  # type: ignore[attr-defined]


def test_a_windows_link_round_trips_and_a_release_before_windows_refuses_it_as_a_future_version() -> None:
    """A link of a sliding window (`WindowState`, kind window) is version 4: this release reads it back and
    refuses a later one; a release before windows (its codec knows turns and chain links, and reads any other
    kind as a conversation of version 2) refuses it as written by a newer tracescore, not misread."""
    link = WindowState(
        service="s", window_id="history:0", tails=[WindowTail(next="d2", root="history:1")],
        turns=[WindowTurn(trace_id="t" * 32, span_id="s" * 16, next="d2", last="d3", root="history:1")],
    )  # fmt: skip
    raw = CODEC.encode(link)
    assert CODEC.decode(raw) == link
    later = json.dumps(json.loads(raw) | {"schema_version": 5}).encode()
    before_windows = ConversationCodec()
    del before_windows._kinds["window"]
    assert [refusal(CODEC, later), refusal(before_windows, raw)] == ["future_state_version"] * 2


def refusal(codec: ConversationCodec, raw: bytes) -> str:
    """Why `codec` refuses `raw`."""
    with pytest.raises(ValueError) as refused:
        codec.decode(raw)
    return str(refused.value.reason)  # type: ignore[attr-defined]
