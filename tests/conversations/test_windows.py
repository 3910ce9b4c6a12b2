"""The links of a sliding window, without Kafka (`Windows`): a turn whose first two resent pairs follow each
other in a known conversation continues it, whether the tail saying so came before or after it; a turn of the
chat its first pair opened stays there; one pair in common joins nothing, nor does a pair two conversations
claim; a turn no tail claims is its window's own after `quiet_seconds`; a turn held by a link dropped is never
lost; the links held are bounded."""

from __future__ import annotations

import json
from collections import Counter

from grounding_turns import evidence_of, interaction, scored

from tracescore.conversations import ConversationsConfig, GroundingCount
from tracescore.conversations._logic import EVIDENCE_HEADER
from tracescore.conversations._stored import WindowTail, encode_key
from tracescore.conversations._windows import WINDOW_DECIDED_HEADER, WINDOW_TAIL_HEADER, Windows, in_window
from tracescore.model import (
    ConversationSource,
    EvaluationRecord,
    TurnEvidence,
    history_conversation_id,
    read_evaluation_record,
)

SERVICE = "support-chat"
EVIDENCE = ((EVIDENCE_HEADER, b"1"),)
DECIDED = ((WINDOW_DECIDED_HEADER, b"1"),)
ROOT = history_conversation_id(SERVICE, None, "d1")  # the chat its first turn, d1, opened


def window(first: str) -> tuple[str, str]:
    """The link of a window whose resent history opens with the pair `first`."""
    return (SERVICE, history_conversation_id(SERVICE, None, first))


def turn(n: int, history: list[str], chat: str = "c-1") -> EvaluationRecord:
    """Turn `n`'s record as consume writes it: under the id its first resent pair names."""
    record = scored(interaction(n, conversation=chat, user=None))
    return record.model_copy(
        update={
            "session_id": window(history[0])[1],
            "conversation_source": ConversationSource.HISTORY,
            "history_turns": history,
        }
    )


def documents(n: int, history: list[str], session: str, chat: str = "c-1") -> TurnEvidence:
    return evidence_of(interaction(n, conversation=chat, user=None)).model_copy(
        update={"session_id": session, "history_turns": history, "turn_digest": f"d{n}"}
    )


def tail(following: str, root: str = ROOT) -> bytes:
    """A tail message: in `root`, the pair the link names is followed by `following`."""
    return WindowTail(next=following, root=root).model_dump_json().encode()


class Links:
    def __init__(self, **config: object) -> None:
        self.counts: Counter[GroundingCount] = Counter()
        self.held: set[tuple[tuple[str, str], str]] = set()  # (conversation, digest) whose documents are held
        cfg = ConversationsConfig(**{"quiet_seconds": 5.0, **config})  # type: ignore[arg-type]
        self.windows = Windows(cfg, self.counts, EVIDENCE, holds=lambda k, d: (k, d) in self.held)
        self.offset = 0

    def at(self) -> tuple[int, int, int]:
        self.offset += 1
        return 0, self.offset, 1_000 * self.offset

    def written(self) -> list[tuple[bytes | None, bytes, tuple[tuple[str, bytes], ...]]]:
        outputs = self.windows.outputs("turns")
        self.windows.written(outputs)
        return [(o.key, o.value, o.headers) for o in outputs]


def test_a_turn_that_resent_two_consecutive_turns_of_a_known_conversation_joins_it_before_or_after_the_tail(
) -> None:  # fmt: skip
    fourth = turn(4, ["d2", "d3"])  # the app resends its last two turns: turn 1 fell out
    before, after = Links(), Links()
    assert before.windows.tail(window("d2"), tail("d3"), *before.at())
    assert before.windows.take(window("d2"), fourth, *before.at()), "taken: written again where it joins"
    assert after.windows.take(window("d2"), fourth, *after.at())
    assert after.written() == [], "waits for a tail"
    assert after.windows.tail(window("d2"), tail("d3"), *after.at())
    for links in (before, after):
        [(key, value, headers)] = links.written()
        joined = read_evaluation_record(value)
        assert key == encode_key((SERVICE, ROOT)) and headers == DECIDED
        assert (joined.session_id, joined.conversation_source, joined.history_turns) == (
            ROOT, "history", ["d2", "d3"],
        )  # fmt: skip
        assert links.written() == [], "written once"
        # Its documents, read after: written there too, as documents.
        late = documents(4, ["d2", "d3"], window("d2")[1])
        assert links.windows.take(window("d2"), late, *links.at())
        [(key, value, headers)] = links.written()
        assert key == encode_key((SERVICE, ROOT)) and headers == (*EVIDENCE, *DECIDED)
        assert json.loads(value)["session_id"] == ROOT
        assert links.counts[GroundingCount.WINDOW_TURNS_JOINED] == 1


def test_a_turn_of_the_chat_its_first_pair_opened_stays_there() -> None:
    """A chat that opened with d2 (another user's, no user.id): its turn resent d2 then its own turn d5, whose
    documents the chat holds. Applied there as usual, whether d5's documents came before or after it; a tail
    of another conversation through d2 does not take it. So is a turn of a long chat whose early turns were
    dropped: the chat holds the last turn it resent."""
    links = Links()
    links.windows.tail(window("d2"), tail("d3"), *links.at())
    third = turn(3, ["d2", "d5"], chat="other")
    links.held.add((window("d2"), "d5"))
    assert not links.windows.take(window("d2"), third, *links.at()), "its own: applied as usual"
    early = Links()
    assert early.windows.take(window("d2"), third, *early.at()), "held: d5's documents not read yet"
    early.held.add((window("d2"), "d5"))
    early.windows.turn_held(window("d2"), "d5")
    [(key, value, headers)] = early.written()
    assert key == encode_key(window("d2")) and headers == DECIDED, "written again where it was"
    assert read_evaluation_record(value).session_id == window("d2")[1]
    assert (
        links.counts[GroundingCount.WINDOW_TURNS_JOINED]
        == early.counts[GroundingCount.WINDOW_TURNS_JOINED]
        == 0
    )
    # A long chat resending its whole history, its early turns' documents dropped (past max_turns): the turn
    # just before this one is held, so it is the chat's own at once.
    long = Links()
    long.held.add((window("d1"), "d299"))
    assert not long.windows.take(window("d1"), turn(300, [f"d{n}" for n in range(1, 300)]), *long.at())


def test_one_pair_in_common_joins_nothing_nor_does_a_pair_two_conversations_claim() -> None:
    links = Links(quiet_seconds=5.0)
    # A greeting: a known conversation goes on from "hi" with d3; this turn resent "hi" then d7.
    links.windows.tail(window("hi"), tail("d3"), *links.at())
    greeted = turn(8, ["hi", "d7"])
    assert links.windows.take(window("hi"), greeted, *links.at())
    links.windows.tick(lambda partition: 1_000 * links.offset)  # its wait begins
    links.windows.tick(lambda partition: 1_000 * links.offset + 4_000)
    assert links.written() == [], "waits, quiet_seconds"
    links.windows.tick(lambda partition: 1_000 * links.offset + 5_000)
    [(key, _, _)] = links.written()
    assert key == encode_key(window("hi")), "no tail claimed it: its window's own"
    assert links.counts[GroundingCount.WINDOW_TURNS_APART] == 1
    # Two conversations (no user.id) both go on from d2 with d3: the turn that resent (d2, d3) joins neither.
    links.windows.tail(window("d2"), tail("d3", root="history:a"), *links.at())
    links.windows.tail(window("d2"), tail("d3", root="history:b"), *links.at())
    assert not links.windows.take(window("d2"), turn(4, ["d2", "d3"]), *links.at()), "applied as usual"
    assert links.written() == []
    assert links.counts[GroundingCount.WINDOW_TURNS_JOINED] == 0


def test_each_turn_held_in_a_conversation_says_where_a_window_from_the_turn_before_goes_on() -> None:
    links = Links()
    links.windows.announce(documents(3, ["d1", "d2"], ROOT), "turns")
    links.windows.announce(documents(2, ["d1"], ROOT), "turns")  # a window from d1 is this conversation
    links.windows.announce(documents(1, [], ROOT), "turns")
    [(key, value, headers)] = links.written()
    assert key == encode_key(window("d2")) and headers == ((WINDOW_TAIL_HEADER, b"1"),)
    assert json.loads(value) == {"next": "d3", "root": ROOT}
    assert links.written() == []


def test_only_a_turn_still_under_the_id_its_first_pair_names_is_a_windows() -> None:
    fourth = turn(4, ["d2", "d3"])
    assert in_window(window("d2"), fourth.history_turns, None)
    assert not in_window((SERVICE, ROOT), fourth.history_turns, None), "written again where it joined"
    assert not in_window(window("d2"), ["d2"], None), "a window of one pair never joins"


def test_a_turn_held_by_a_link_dropped_is_written_as_its_windows_own_and_links_are_bounded() -> None:
    links = Links(max_conversations=1, forget_seconds=60.0)
    assert links.windows.take(window("d2"), turn(4, ["d2", "d3"]), *links.at())
    links.windows.tail(window("d5"), tail("d6"), *links.at())
    assert len(links.windows) == 1 and links.counts[GroundingCount.WINDOW_LINKS_EVICTED] == 1
    [(key, _, _)] = links.written()
    assert key == encode_key(window("d2")), "never lost"
    assert links.counts[GroundingCount.WINDOW_TURNS_APART] == 1
    links.windows.tick(lambda partition: 1_000 * links.offset + 60_000)
    assert len(links.windows) == 0
    saved = links.windows.to_save()
    assert sorted(state is None for _, _, state in saved) == [True, True], "their states deleted"
