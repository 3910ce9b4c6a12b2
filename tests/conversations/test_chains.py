"""The links of a chain of responses the model's service keeps, without Kafka (`Chains`): a follow-up joins
its chain whether its first turn's documents came before or after it, or its link learnt the chain's id
from the link before it; it is written once per revision, replays change nothing, a link that never learns
its chain is forgotten and counted, and the links held are bounded."""

from __future__ import annotations

import json
from collections import Counter

from grounding_turns import evidence_of, interaction, scored

from tracescore.conversations import ConversationsConfig, GroundingCount
from tracescore.conversations._chains import CHAIN_ROOT_HEADER, Chains
from tracescore.conversations._logic import EVIDENCE_HEADER
from tracescore.conversations._stored import encode_key
from tracescore.model import EvaluationRecord, read_evaluation_record, response_chain_id

SERVICE = "support-chat"
EVIDENCE = ((EVIDENCE_HEADER, b"1"),)


def follow_up(n: int, chat: str = "c-1") -> EvaluationRecord:
    """Turn `n`'s record as consume writes it: no conversation, the response before it named."""
    turn = interaction(n, conversation=chat)
    record = scored(turn)
    return record.model_copy(
        update={"session_id": None, "response_id": f"resp_{n}", "previous_response_id": f"resp_{n - 1}"}
    )


def link(n: int) -> tuple[str, str]:
    """The link turn `n` waits at: the chain its predecessor's answer would open."""
    return (SERVICE, response_chain_id(SERVICE, f"resp_{n - 1}"))


class Links:
    def __init__(self, **config: object) -> None:
        self.counts: Counter[GroundingCount] = Counter()
        self.opened: set[tuple[str, str]] = set()
        self.chains = Chains(
            ConversationsConfig(**config), self.counts, EVIDENCE, opened=self.opened.__contains__
        )  # type: ignore[arg-type]
        self.offset = 0

    def at(self) -> tuple[int, int, int]:
        self.offset += 1
        return 0, self.offset, 1_000 * self.offset

    def written(self) -> list[tuple[bytes | None, bytes, tuple[tuple[str, bytes], ...]]]:
        outputs = self.chains.outputs("turns")
        self.chains.written(outputs)
        return [(o.key, o.value, o.headers) for o in outputs]


def test_a_follow_up_joins_its_chain_whether_its_first_turn_came_before_or_after_it() -> None:
    root = link(2)[1]
    before, after = Links(), Links()
    before.opened.add(link(2))  # the first turn's documents held already
    before.chains.follower_record(link(2), follow_up(2), *before.at())
    after.chains.follower_record(link(2), follow_up(2), *after.at())
    assert after.written() == [], "waits for its first turn"
    after.opened.add(link(2))
    after.chains.opener_held(link(2))
    for links in (before, after):
        [(key, value, _), (next_key, root_message, headers)] = links.written()
        joined = read_evaluation_record(value)
        assert key == encode_key((SERVICE, root))
        assert (joined.session_id, joined.conversation_source) == (root, "response_chain")
        assert next_key == encode_key(link(3)) and json.loads(root_message) == {"root": root}
        assert headers == ((CHAIN_ROOT_HEADER, b"1"),)
        assert links.written() == [], "written once"
        assert links.counts[GroundingCount.CHAIN_TURNS_JOINED] == 1


def test_the_next_link_learns_the_chain_from_the_one_before_and_each_revision_is_written_once() -> None:
    links = Links()
    links.chains.follower_record(link(3), follow_up(3), *links.at())
    evidence = evidence_of(interaction(3)).model_copy(
        update={"session_id": link(4)[1], "response_id": "resp_3", "previous_response_id": "resp_2"}
    )
    links.chains.follower_evidence(link(3), evidence, *links.at())
    assert links.written() == []
    links.chains.rooted(link(3), "responses:first", *links.at())
    keys = [(key, headers) for key, _, headers in links.written()]
    chain = encode_key((SERVICE, "responses:first"))
    assert keys == [(chain, ()), (chain, EVIDENCE), (encode_key(link(4)), ((CHAIN_ROOT_HEADER, b"1"),))]
    # Read again (a crash re-read the turns topic), or an older revision late: nothing new.
    links.chains.follower_record(link(3), follow_up(3), *links.at())
    links.chains.follower_evidence(link(3), evidence, *links.at())
    assert links.written() == []
    # Late spans re-scored the turn: its new revision joins too.
    revised = follow_up(3).model_copy(update={"revision": 1})
    links.chains.follower_record(link(3), revised, *links.at())
    [(_, value, _)] = links.written()
    assert read_evaluation_record(value).revision == 1


def test_a_link_that_never_learns_its_chain_is_forgotten_and_counted_and_links_are_bounded() -> None:
    links = Links(forget_seconds=10.0, quiet_seconds=1.0, max_conversations=2)
    for n in (2, 3, 4):
        links.chains.follower_record(link(n), follow_up(n), *links.at())
    assert len(links.chains) == 2 and links.counts[GroundingCount.CHAIN_LINKS_EVICTED] == 1
    links.chains.tick(lambda partition: 1_000 * links.offset + 10_000)
    assert len(links.chains) == 0 and links.counts[GroundingCount.CHAIN_TURNS_NOT_JOINED] == 3
    saved = links.chains.to_save()
    assert sorted(state is None for _, _, state in saved) == [True] * 3, "their states deleted"
