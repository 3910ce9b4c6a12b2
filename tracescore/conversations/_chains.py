"""A history the model's service keeps (the OpenAI Responses API: each request names the previous response,
`previous_response_id`, and resends nothing), joined into a conversation hop by hop on the turns topic.

A follow-up knows only the response before it, never the chain's first, and the turns of a chain are traces
on any partition. Every chain turn has the id of the chain it would open, `response_chain_id` of its own
answer's response id, O(t). A first turn (naming no response) cannot be told from a one-shot: its records
name no conversation, its documents go under O(1), the chain's id C (stage 1 writes them there beside the
history conversation they may open). A follow-up's records and documents are re-keyed by stage 1 to the
link of the response it named, O(previous), where this module keeps a `LinkState`:

* the link's root, C: the link's own id when the first turn's documents are held under that key (the
  grounding store holds them, as it holds any turn's; a link is kept only where a follow-up named it, never
  for every one-shot), else from a root message another link wrote;
* root known, each follow-up waiting there is written again on the turns topic under (service, C),
  `session_id` C and `conversation_source` `response_chain`, where it is an ordinary conversation's turn
  (counted, grounded, recorded), and its own link O(t) is told C, so that the turn after it joins too.

So turn k joins after k - 2 hops. The outputs are written before the link's state (the service base), the
turns topic committed no further than the oldest unsaved change: a crash re-sends some, which stage 2 absorbs
as it absorbs stage 1's (a record or documents of a revision already applied change nothing). A turn an app
named never takes part (stage 1 routes it by its id), so a chain never merges with a named conversation.
Links are forgotten `forget_seconds` after their last change, at most `max_conversations` held.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

from tracescore._service import Output
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._links import (
    Key,
    LinkBook,
    hold_evidence,
    hold_record,
)
from tracescore.conversations._stored import ChainFollower, LinkState, encode_key, link_key
from tracescore.model import ConversationSource, EvaluationRecord, TurnEvidence, response_chain_id

__all__ = ["CHAIN_LINK_HEADER", "CHAIN_ROOT_HEADER", "Chains", "opened_chain"]

# A follow-up's record or documents at the link of the response it named (stage 1 writes them there).
CHAIN_LINK_HEADER = "tracescore.chain.link"
# A link told the id of its chain (written by the link before it, once it knew the id).
CHAIN_ROOT_HEADER = "tracescore.chain.root"
_ROOT_FIELD = "root"


def opened_chain(evidence: TurnEvidence) -> str | None:
    """The chain a first turn's documents open (a response id, none named before it), else None."""
    if evidence.response_id is None or evidence.previous_response_id is not None:
        return None
    return response_chain_id(evidence.service_name, evidence.response_id)


def root_value(root: str) -> bytes:
    return json.dumps({_ROOT_FIELD: root}).encode()


class Chains(LinkBook[LinkState]):
    ID_PREFIX = "chain"

    def __init__(
        self,
        config: ConversationsConfig,
        counts: Counter[GroundingCount],
        evidence_headers: tuple[tuple[str, bytes], ...],
        opened: Callable[[Key], bool],
    ) -> None:
        """`opened(key)`: whether the first turn of the chain `key` names is held (its documents)."""
        super().__init__(config, counts, GroundingCount.CHAIN_LINKS_EVICTED)
        self._opened = opened
        self._evidence_headers = evidence_headers
        self._due: set[Key] = set()  # links with a root and something not written yet

    def open(self) -> int:
        return len(self._due)

    # -- apply ------------------------------------------------------------------------------------------
    def follower_record(
        self, key: Key, record: EvaluationRecord, partition: int, offset: int, at: int
    ) -> None:
        link, follower = self._follower(key, record.trace_id, record.span_id, partition, offset)
        if link is None or follower is None:
            return
        follower.response_id = follower.response_id or record.response_id
        hold_record(follower, record)  # an older revision read late, or one written already: nothing
        self._changed(key, link, partition, offset, at)

    def follower_evidence(
        self, key: Key, evidence: TurnEvidence, partition: int, offset: int, at: int
    ) -> None:
        link, follower = self._follower(key, evidence.trace_id, evidence.span_id, partition, offset)
        if link is None or follower is None:
            return
        follower.response_id = follower.response_id or evidence.response_id
        hold_evidence(follower, evidence)
        self._changed(key, link, partition, offset, at)

    def rooted(self, key: Key, root: str, partition: int, offset: int, at: int) -> None:
        """The chain's id for the link `key`, from a root message."""
        link = self._link(key, partition, offset)
        if link is None:
            return
        if link.root is None:
            link.root = root
        self._changed(key, link, partition, offset, at)

    def opener_held(self, key: Key) -> None:
        """A first turn's documents now held under `key`: the follow-ups waiting there, if any, join."""
        link = self._links.get(key)
        if link is not None and link.root is None:
            link.root = key[1]
            self._due.add(key)
            self._save[key] = self._partition[key]

    def root_message(self, key: Key, value: bytes | None, partition: int, offset: int, at: int) -> bool:
        """A root message read: False when it is not one this service writes."""
        try:
            root = json.loads(value or b"")[_ROOT_FIELD]
        except (ValueError, TypeError, KeyError):
            return False
        if not isinstance(root, str):
            return False
        self.rooted(key, root, partition, offset, at)
        return True

    def _link(self, key: Key, partition: int, offset: int) -> LinkState | None:
        link = self._held(key, partition, lambda: LinkState(service=key[0], link_id=key[1]))
        if offset <= link.through:
            return None  # a replay: in the saved state already
        return link

    def _follower(
        self, key: Key, trace_id: str, span_id: str, partition: int, offset: int
    ) -> tuple[LinkState | None, ChainFollower | None]:
        link = self._link(key, partition, offset)
        if link is None:
            return None, None
        follower = next((f for f in link.followers if (f.trace_id, f.span_id) == (trace_id, span_id)), None)
        if follower is None:
            if len(link.followers) >= self.config.max_turns:
                return link, None  # a response named by more follow-ups than a conversation holds turns
            follower = ChainFollower(trace_id=trace_id, span_id=span_id)
            link.followers.append(follower)
        if link.root is None and self._opened(key):
            link.root = key[1]  # the first turn is the one that answered with the response named
        return link, follower

    def _changed(self, key: Key, link: LinkState, partition: int, offset: int, at: int) -> None:
        if link.root is not None:
            self._due.add(key)
        super()._changed(key, link, partition, offset, at)

    # -- write ------------------------------------------------------------------------------------------
    def outputs(self, topic: str) -> list[Output]:
        """The follow-ups of links whose chain is known, written again under it; their own links told it."""
        out: list[Output] = []
        self._writing.clear()
        for key in sorted(self._due, key=lambda k: self._links[k].arrival_ms if k in self._links else 0):
            link = self._links.get(key)
            if link is None or link.root is None:
                continue
            service, root = key[0], link.root
            chain_key = encode_key((service, root))
            joined = {"session_id": root, "conversation_source": ConversationSource.RESPONSE_CHAIN}
            for follower in link.followers:
                out += self._held_outputs(
                    topic, chain_key, key, follower, root, joined, (), self._evidence_headers
                )
                if follower.response_id is not None and not follower.root_sent:
                    next_link = encode_key((service, response_chain_id(service, follower.response_id)))
                    out.append(self._output(topic, next_link, root_value(root), ((CHAIN_ROOT_HEADER, b"1"),),
                                            key, follower, _ROOT_FIELD, root))  # fmt: skip
        self._due.clear()
        return out

    def _sent(self, holder: ChainFollower, mark: str) -> None:
        if mark == _ROOT_FIELD:
            holder.root_sent = True
            return
        if mark.startswith("record:") and not any(m.startswith("record:") for m in holder.sent):
            self.counts[GroundingCount.CHAIN_TURNS_JOINED] += 1
        super()._sent(holder, mark)

    # -- forget -----------------------------------------------------------------------------------------
    def _forgotten(self, key: Key, link: LinkState) -> None:
        self._due.discard(key)
        if link.root is None:
            self.counts[GroundingCount.CHAIN_TURNS_NOT_JOINED] += len(link.followers)

    def _dropped(self, key: Key) -> None:
        self._due.discard(key)

    # -- state ------------------------------------------------------------------------------------------
    def restore(self, partition: int, state: LinkState) -> None:
        key = (state.service, state.link_id)
        if not self._restore(key, partition, state):
            return
        if state.root is not None and any(
            f.records or f.evidence is not None or (f.response_id and not f.root_sent)
            for f in state.followers
        ):
            self._due.add(key)  # what a crash left unwritten is written now

    def restored(self) -> None:
        """After a restore: a link saved before its first turn's documents were held asks again (the held
        turns are restored in any order beside the links)."""
        for key, link in self._links.items():
            if link.root is None and self._opened(key):
                link.root = key[1]
                self._due.add(key)
                self._save[key] = self._partition[key]

    def _state_key(self, key: Key) -> bytes:
        return link_key(*key)
