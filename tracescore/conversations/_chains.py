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

import hashlib
import json
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence

from tracescore._service import Output, Saved
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._index import Partitions
from tracescore.conversations._stored import ChainFollower, LinkState, encode_key, json_bytes, link_key
from tracescore.model import ConversationSource, EvaluationRecord, TurnEvidence, response_chain_id

__all__ = ["CHAIN_LINK_HEADER", "CHAIN_ROOT_HEADER", "Chains", "opened_chain"]

Key = tuple[str, str]  # (service, link id)
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


def _digest(value: bytes) -> str:
    return hashlib.blake2b(value, digest_size=8).hexdigest()


def _output_id(*parts: object) -> str:
    return hashlib.blake2b(json_bytes(["chain", *parts]), digest_size=16).hexdigest()


def _record_mark(record: EvaluationRecord) -> str:
    return f"record:{record.metric}:{record.judge}:{record.selection}:{record.revision}"


def _evidence_mark(evidence: TurnEvidence) -> str:
    return f"evidence:{evidence.revision}"


class Chains:
    def __init__(
        self,
        config: ConversationsConfig,
        counts: Counter[GroundingCount],
        evidence_headers: tuple[tuple[str, bytes], ...],
        opened: Callable[[Key], bool],
    ) -> None:
        """`opened(key)`: whether the first turn of the chain `key` names is held (its documents)."""
        self.config = config
        self.counts = counts
        self._opened = opened
        self._evidence_headers = evidence_headers
        self._links: OrderedDict[Key, LinkState] = OrderedDict()  # least recently changed first
        self._partition: dict[Key, int] = {}
        self._partitions = Partitions()
        self._save: dict[Key, int] = {}  # key -> partition; a key no longer held is deleted
        self._unsaved_from: dict[int, int] = {}  # partition -> lowest offset applied and not saved
        self._due: set[Key] = set()  # links with a root and something not written yet
        self._writing: dict[str, tuple[Key, ChainFollower, str]] = {}
        self._unsorted = False  # restored links were appended out of order

    def __len__(self) -> int:
        return len(self._links)

    def get(self, key: Key) -> LinkState | None:
        return self._links.get(key)

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
        tier = (record.metric, record.judge, record.selection)
        kept = [r for r in follower.records if (r.metric, r.judge, r.selection) == tier]
        # An older revision read late, or one already written to the chain, changes nothing.
        if _record_mark(record) not in follower.sent and all(r.revision < record.revision for r in kept):
            follower.records = [r for r in follower.records if r not in kept] + [record]
        self._changed(key, link, partition, offset, at)

    def follower_evidence(
        self, key: Key, evidence: TurnEvidence, partition: int, offset: int, at: int
    ) -> None:
        link, follower = self._follower(key, evidence.trace_id, evidence.span_id, partition, offset)
        if link is None or follower is None:
            return
        follower.response_id = follower.response_id or evidence.response_id
        held = follower.evidence
        if _evidence_mark(evidence) not in follower.sent and (
            held is None or held.revision < evidence.revision
        ):
            follower.evidence = evidence
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
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = LinkState(service=key[0], link_id=key[1])
            self._partition[key] = partition
            self._partitions.add(partition, key)
        elif offset <= link.through:
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
        link.through = max(link.through, offset)
        link.arrival_ms = max(link.arrival_ms, at)
        self._links.move_to_end(key)
        self._save[key] = partition
        self._unsaved_from[partition] = min(self._unsaved_from.get(partition, offset), offset)
        if link.root is not None:
            self._due.add(key)
        while len(self._links) > self.config.max_conversations:
            oldest = next(iter(self._links))
            self._forget(oldest)
            self.counts[GroundingCount.CHAIN_LINKS_EVICTED] += 1

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
            for follower in link.followers:
                for record in follower.records:
                    joined = record.model_copy(
                        update={"session_id": root, "conversation_source": ConversationSource.RESPONSE_CHAIN}
                    )
                    out.append(self._output(topic, chain_key, joined.model_dump_json().encode(), (), key,
                                            follower, _record_mark(record), root))  # fmt: skip
                if follower.evidence is not None:
                    joined_evidence = follower.evidence.model_copy(update={"session_id": root})
                    out.append(self._output(topic, chain_key, joined_evidence.model_dump_json().encode(),
                                            self._evidence_headers, key, follower,
                                            _evidence_mark(follower.evidence), root))  # fmt: skip
                if follower.response_id is not None and not follower.root_sent:
                    next_link = encode_key((service, response_chain_id(service, follower.response_id)))
                    out.append(self._output(topic, next_link, root_value(root), ((CHAIN_ROOT_HEADER, b"1"),),
                                            key, follower, _ROOT_FIELD, root))  # fmt: skip
        self._due.clear()
        return out

    def _output(
        self, topic: str, key: bytes, value: bytes, headers: tuple[tuple[str, bytes], ...], link: Key,
        follower: ChainFollower, mark: str, root: str,
    ) -> Output:  # fmt: skip
        identity = _output_id(link[0], link[1], follower.trace_id, follower.span_id, mark, root)
        self._writing[identity] = (link, follower, mark)
        # Not looked for after a crash: one written again is absorbed where it is read (same revision).
        return Output(topic, key, value, identity, _digest(value), headers, verified=False)

    def written(self, outputs: Sequence[Output]) -> None:
        for output in outputs:
            writing = self._writing.pop(output.id, None)
            if writing is None:
                continue
            key, follower, mark = writing
            if mark == _ROOT_FIELD:
                follower.root_sent = True
            elif mark.startswith("record:"):
                if not any(m.startswith("record:") for m in follower.sent):
                    self.counts[GroundingCount.CHAIN_TURNS_JOINED] += 1
                follower.records = [r for r in follower.records if _record_mark(r) != mark]
                follower.sent.append(mark)
            else:
                if follower.evidence is not None and _evidence_mark(follower.evidence) == mark:
                    follower.evidence = None
                follower.sent.append(mark)
            if key in self._links:
                self._save[key] = self._partition[key]
        self._writing.clear()

    # -- forget -----------------------------------------------------------------------------------------
    def tick(self, now_of: Callable[[int], int]) -> None:
        """Links without a change for `forget_seconds` (by their partition's stream time) forgotten; their
        follow-ups that never learnt their chain counted."""
        forget_ms = self.config.forget_seconds * 1000
        if self._unsorted:  # sorted once after restores, not per one
            self._links = OrderedDict(sorted(self._links.items(), key=lambda item: item[1].arrival_ms))
            self._unsorted = False
        for key, link in list(self._links.items()):
            if now_of(self._partition[key]) - link.arrival_ms < forget_ms:
                break  # the rest changed later
            self._forget(key)

    def _forget(self, key: Key) -> None:
        link = self._links.pop(key)
        partition = self._partition.pop(key)
        self._partitions.discard(partition, key)
        self._due.discard(key)
        self._save[key] = partition
        if link.root is None:
            self.counts[GroundingCount.CHAIN_TURNS_NOT_JOINED] += len(link.followers)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        gone = set(partitions)
        for key in self._partitions.pop(gone):
            del self._links[key], self._partition[key]
            self._due.discard(key)
        self._save = {k: p for k, p in self._save.items() if p not in gone}
        for partition in gone:
            self._unsaved_from.pop(partition, None)

    # -- state ------------------------------------------------------------------------------------------
    def restore(self, partition: int, state: LinkState) -> None:
        key = (state.service, state.link_id)
        held = self._links.get(key)
        if held is not None and held.through >= state.through:
            return  # one already held keeps its own, newer state
        self._links[key] = state
        self._partition[key] = partition
        self._partitions.add(partition, key)
        if state.root is not None and any(
            f.records or f.evidence is not None or (f.response_id and not f.root_sent)
            for f in state.followers
        ):
            self._due.add(key)  # what a crash left unwritten is written now
        self._unsorted = True

    def restored(self) -> None:
        """After a restore: a link saved before its first turn's documents were held asks again (the held
        turns are restored in any order beside the links)."""
        for key, link in self._links.items():
            if link.root is None and self._opened(key):
                link.root = key[1]
                self._due.add(key)
                self._save[key] = self._partition[key]

    def to_save(self) -> list[Saved]:
        out: list[Saved] = [(p, link_key(*k), self._links.get(k)) for k, p in self._save.items()]
        self._save.clear()
        self._unsaved_from.clear()
        return out

    def everything(self) -> list[Saved]:
        self._save.clear()
        return [(self._partition[k], link_key(*k), link) for k, link in self._links.items()]

    def commit_floors(self, positions: dict[int, int]) -> dict[int, int]:
        return {p: min(offset, self._unsaved_from.get(p, offset)) for p, offset in positions.items()}
