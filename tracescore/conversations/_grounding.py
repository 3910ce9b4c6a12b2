"""The turns `tracescore conversations` holds to ground a follow-up's claims in what earlier turns of the same
conversation retrieved: per conversation, its turns' documents (`TurnEvidence`, written by `tracescore
consume` for every turn with a conversation id, scored or not) and the faithfulness records with a claim no
document of their own supported (and their LLM companions, whose offline score follows a grounding).

Bounded, and every cut counted (`GroundingStats`):

* per conversation: `max_turns` turns (the oldest by start dropped first) and `evidence_chars` characters of
  documents (the oldest turns' documents dropped first; the turn stays known, its record then says its
  documents are no longer held);
* per instance: `max_evidence_chars` characters (documents and claims); past it the least recently active
  conversation's turns are dropped (`evidence_evicted`);
* forgotten with the conversation, `forget_seconds` after its last turn.

Each turn is saved to the state topic as its own entry (`TurnState`) when it changed, so a document is written
to the state topic once, not with every save of its conversation; the turns topic is committed no further
than the oldest change not saved yet.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import count
from typing import Any

from tracescore._service import Saved
from tracescore.conversations._chains import opened_chain
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._index import Partitions
from tracescore.conversations._stored import HeldCheck, TurnState
from tracescore.conversations._windows import is_window_start
from tracescore.model import (
    FAITHFULNESS,
    EvaluationRecord,
    GroundingDetails,
    TurnEvidence,
    Verdict,
    is_flagged,
)

__all__ = [
    "GROUNDING_DETAIL",
    "GroundingStats",
    "GroundingStore",
    "Held",
    "TurnId",
    "has_open_claims",
    "held_details",
    "keeps",
]

Key = tuple[str, str]  # (service, conversation id)
TurnId = tuple[str, str]  # (trace id, span id)
Tier = tuple[str, str, str | None]  # (metric, judge, selection)
# The record's details key this service writes: a record carrying it is a grounding revision read back.
GROUNDING_DETAIL = "earlier_turns"
_TURN_CHARS = 1_000  # what a held turn costs besides its texts, in characters
_STALE_QUEUED = 1_000  # stale recheck entries tolerated beyond twice the marked before a rebuild
_METRIC = FAITHFULNESS
# A held record's claims, cut to fit: their texts share this many characters (the re-keyed message stays
# far below Kafka's limit whatever the answer's length), each text at least `_MIN_TEXT`.
_CLAIMS_CHARS = 60_000
_MIN_TEXT = 80
_ROW_KEYS = ("claim", "verdict", "reason", "evidence", "confidence", "context_index", "evidence_source")
_TEXT_SHARE = {"claim": 0.5, "reason": 0.25, "evidence": 0.25}
_KEPT_DETAILS = ("label_rule", "capped", "question_recorded", "question_missing")
_MAX_SOURCES = 200


def has_open_claims(record: EvaluationRecord) -> bool:
    """A faithfulness record with a claim its own documents gave no evidence for."""
    claims = record.details.get("claims")
    return isinstance(claims, list) and any(
        isinstance(c, dict) and c.get("verdict") == Verdict.NO_EVIDENCE.value for c in claims
    )


def keeps(record: EvaluationRecord) -> bool:
    """Whether a turn's record is held for grounding: a faithfulness record of a conversation turn with a
    claim to judge again, or an LLM record whose offline verdict was flagged (its `offline_label` follows the
    offline record's grounding). Every other record costs nothing here."""
    if record.metric != _METRIC or record.session_id is None or record.score is None:
        return False
    if GROUNDING_DETAIL in record.details:
        return False  # our own revision, read back: the tracker counts it, nothing to judge
    if has_open_claims(record):
        return True
    offline = record.offline_score
    return offline is not None and is_flagged({"score": offline, "label": record.offline_label})


def held_details(record: EvaluationRecord) -> dict[str, Any]:
    """What the turns topic carries of a record's details for grounding: nothing for most records; the
    claims (texts cut to share `_CLAIMS_CHARS`) and label rule of one `keeps` holds; the marker of a
    grounding revision read back."""
    if GROUNDING_DETAIL in record.details:
        marker = GroundingDetails.read(record.details[GROUNDING_DETAIL])
        return {GROUNDING_DETAIL: {"status": marker.status if marker is not None else None}}
    if not keeps(record):
        return {}
    rows = [c for c in record.details["claims"] if isinstance(c, dict)]
    per_row = max(_MIN_TEXT, _CLAIMS_CHARS // max(1, len(rows)))
    cut = {key: max(_MIN_TEXT, int(per_row * share)) for key, share in _TEXT_SHARE.items()}
    claims = [
        {
            key: (row[key][: cut[key]] if key in cut and isinstance(row[key], str) else row[key])
            for key in _ROW_KEYS
            if key in row
        }
        for row in rows
    ]
    kept: dict[str, Any] = {"claims": claims}
    for key in _KEPT_DETAILS:  # small: what the revision says as the record did
        if key in record.details:
            kept[key] = record.details[key]
    sources = record.details.get("context_sources")
    if isinstance(sources, list):
        kept["context_sources"] = sources[:_MAX_SOURCES]
    return kept


@dataclass
class GroundingStats:
    evidence: int = 0  # turns' documents read
    held_records: int = 0  # records held to judge again
    counts: Counter[GroundingCount] = field(default_factory=Counter)  # outcomes and cuts, by reason


@dataclass
class Held:
    """One conversation's held turns."""

    key: Key
    partition: int
    last_arrival_ms: int
    turns: dict[TurnId, TurnState] = field(default_factory=dict)
    chars: int = 0


class GroundingStore:
    def __init__(self, config: ConversationsConfig, stats: GroundingStats) -> None:
        self.config = config
        self.stats = stats
        self._held: OrderedDict[Key, Held] = OrderedDict()  # least recently changed first
        self._partitions = Partitions()  # a revoke forgets a partition's conversations, not a pass over all
        self._chars = 0
        self._save: dict[bytes, tuple[int, TurnState | None]] = {}  # key -> (partition, state; None deletes)
        self._unsaved_from: dict[int, int] = {}  # partition -> lowest offset applied and not saved
        self._unsorted = False  # restored conversations were appended out of order
        # The conversations to look at next tick, by their place in `_held` (taken in that order): a tick
        # looks at them, not at every conversation held (issue 33: 100,000 open).
        self._rechecks: set[Key] = set()
        self._place: dict[Key, int] = {}
        self._places = count()
        # The marked ones by place, (place, key): an entry whose key is no longer marked or was placed again
        # since is dropped when met (a tick took the first marked by a pass over all marked: 100,000).
        self._queue: list[tuple[int, Key]] = []

    def __len__(self) -> int:
        return len(self._held)

    @property
    def chars(self) -> int:
        return self._chars

    def get(self, key: Key) -> Held | None:
        return self._held.get(key)

    def held(self) -> list[Held]:
        return list(self._held.values())

    def opens_chain(self, key: Key) -> bool:
        """Whether a turn held under `key` is the first of the chain of responses `key` names: its documents
        (the response that answered it, none named before it) held under the chain's id."""
        held = self._held.get(key)
        return held is not None and any(
            turn.evidence is not None and opened_chain(turn.evidence) == key[1]
            for turn in held.turns.values()
        )

    def holds_turn(self, key: Key, digest: str) -> bool:
        """Whether the conversation `key` holds the documents of a turn whose (question, answer) digest is
        `digest` (an inferred conversation's turn; a copy held where its pair's window starts is none)."""
        held = self._held.get(key)
        return held is not None and any(
            turn.evidence is not None
            and turn.evidence.turn_digest == digest
            and not is_window_start(turn.evidence)
            for turn in held.turns.values()
        )

    def open(self) -> int:
        """Conversations whose checks wait for the next tick."""
        return len(self._rechecks)

    def recheck(self, held: Held) -> None:
        """Look at `held`'s checks again at the next tick (something changed)."""
        self._rechecks.add(held.key)
        heapq.heappush(self._queue, (self._place[held.key], held.key))
        if len(self._queue) > 2 * len(self._rechecks) + _STALE_QUEUED:
            self._requeue()

    def rechecks(self, most: int) -> list[Held]:
        """The first `most` conversations to look at again, least recently changed first; no longer marked."""
        first: list[Key] = []
        while self._queue and len(first) < most:
            place, key = heapq.heappop(self._queue)
            if key in self._rechecks and self._place.get(key) == place:
                self._rechecks.discard(key)
                first.append(key)
        return [self._held[key] for key in first]

    def _requeue(self) -> None:
        """The queue rebuilt from the marked ones: its stale entries dropped, or every key placed again."""
        self._queue = [(self._place[key], key) for key in self._rechecks]
        heapq.heapify(self._queue)

    # -- apply ------------------------------------------------------------------------------------------
    def evidence(self, evidence: TurnEvidence, partition: int, offset: int, arrival_ms: int) -> bool:
        """A turn's documents, read at `offset` of the turns topic; False when they change nothing."""
        self.stats.evidence += not is_window_start(evidence)  # a copy is the documents of a turn counted
        held, turn = self._turn(
            (evidence.service_name, evidence.session_id), (evidence.trace_id, evidence.span_id), partition
        )
        if offset <= turn.through or (
            turn.evidence is not None and turn.evidence.revision > evidence.revision
        ):
            return False  # a replay, or an older reading of the turn read late
        started = evidence.span_started_at
        turn.user_id, turn.through = evidence.user_id, offset
        if started is not None:
            turn.start_at(started)
        turn.evidence = evidence
        self._changed(held, turn, offset, arrival_ms)
        return True

    def record(self, record: EvaluationRecord, partition: int, offset: int, arrival_ms: int) -> None:
        """A turn's record (with its claims when `keeps` it), read at `offset` of the turns topic."""
        key, turn_id = (record.service_name, record.session_id or ""), (record.trace_id, record.span_id)
        held = self._held.get(key)
        tier: Tier = (record.metric, record.judge, record.selection)
        known = held.turns.get(turn_id) if held is not None else None
        check = next((c for c in known.checks if _tier(c.record) == tier), None) if known else None
        if not keeps(record) and (check is None or GROUNDING_DETAIL in record.details):
            return
        held, turn = self._turn(key, turn_id, partition)
        if offset <= turn.through or (check is not None and check.record.revision > record.revision):
            return
        if check is not None and check.record == record:
            turn.through = offset  # the same record again (written twice by a crash): nothing to judge anew
            return
        turn.through = offset
        if turn.user_id is None:
            turn.user_id = record.user_id
        if turn.started is None and record.span_started_at is not None:
            turn.start_at(record.span_started_at)
        # A newer reading of the turn (late spans) replaces the record; what this service wrote before stays
        # known, so its next revision is above both.
        fresh = HeldCheck(
            record=record, revised=check.revised if check else None, digest=check.digest if check else None
        )
        turn.checks = [c for c in turn.checks if c is not check] + [fresh]
        self.stats.held_records += 1
        self._changed(held, turn, offset, arrival_ms)

    def restore(self, partition: int, state: TurnState) -> None:
        """A held turn from the state topic. One already held keeps its own, newer state."""
        held, turn = self._turn(
            (state.service, state.conversation_id), (state.trace_id, state.span_id), partition
        )
        if turn.through >= state.through and (turn.evidence is not None or turn.checks):
            return
        held.turns[(state.trace_id, state.span_id)] = state
        held.last_arrival_ms = max(held.last_arrival_ms, state.arrival_ms)
        self.recheck(held)  # what a crash left undecided is decided again
        self._unsorted = True
        self._account(held)

    def _turn(self, key: Key, turn_id: TurnId, partition: int) -> tuple[Held, TurnState]:
        held = self._held.get(key)
        if held is None:
            held = self._held[key] = Held(key, partition, last_arrival_ms=0)
            self._place[key] = next(self._places)
            self._partitions.add(partition, key)
        turn = held.turns.get(turn_id)
        if turn is None:
            turn = held.turns[turn_id] = TurnState(
                service=key[0], conversation_id=key[1], trace_id=turn_id[0], span_id=turn_id[1]
            )
        return held, turn

    def _changed(self, held: Held, turn: TurnState, offset: int, arrival_ms: int) -> None:
        turn.arrival_ms = max(turn.arrival_ms, arrival_ms)
        held.last_arrival_ms = max(held.last_arrival_ms, arrival_ms)
        self._held.move_to_end(held.key)
        self._place[held.key] = next(self._places)
        self.recheck(held)  # queued at its new place
        self._save[turn.key] = (held.partition, turn)
        self._unsaved_from[held.partition] = min(self._unsaved_from.get(held.partition, offset), offset)
        self._fit(held)

    # -- bounds -----------------------------------------------------------------------------------------
    def _fit(self, held: Held) -> None:
        """The conversation within `max_turns` and `evidence_chars`, the instance within
        `max_evidence_chars`."""
        oldest_first = sorted(held.turns.values(), key=_start)
        past_cap = max(0, len(oldest_first) - self.config.max_turns)
        for turn in oldest_first[:past_cap]:
            self._drop(held, turn)
            self.stats.counts[GroundingCount.TURNS_PAST_CAP] += 1
        kept = oldest_first[past_cap:]
        documents = sum(_document_chars(t) for t in kept)
        for turn in kept:
            if documents <= self.config.evidence_chars:
                break
            evidence = turn.evidence
            if evidence is None or not evidence.documents:
                continue
            cut = _document_chars(turn)
            turn.evidence = evidence.model_copy(
                update={
                    "documents": [],
                    "documents_dropped": evidence.documents_dropped + len(evidence.documents),
                    "chars_dropped": evidence.chars_dropped + cut,
                }
            )
            documents -= cut
            self.stats.counts[GroundingCount.DOCUMENTS_DROPPED] += len(evidence.documents)
            self._save[turn.key] = (held.partition, turn)
        self._account(held)
        while self._chars > self.config.max_evidence_chars and len(self._held) > 1:
            _, oldest = next(iter(self._held.items()))
            if oldest is held:
                break
            self.forget(oldest)
            self.stats.counts[GroundingCount.EVIDENCE_EVICTED] += 1

    def _account(self, held: Held) -> None:
        size = sum(_size(t) for t in held.turns.values())
        self._chars += size - held.chars
        held.chars = size

    def _drop(self, held: Held, turn: TurnState) -> None:
        held.turns.pop((turn.trace_id, turn.span_id), None)
        self._save[turn.key] = (held.partition, None)

    # -- forget -----------------------------------------------------------------------------------------
    def to_forget(self, now_of: Callable[[int], int]) -> list[Held]:
        """Conversations without a turn for `forget_seconds` (least recently changed first)."""
        forget_ms = self.config.forget_seconds * 1000
        if self._unsorted:
            self._held = OrderedDict(sorted(self._held.items(), key=lambda item: item[1].last_arrival_ms))
            self._place = {key: next(self._places) for key in self._held}
            self._unsorted = False
            self._requeue()
        out = []
        for held in self._held.values():
            if now_of(held.partition) - held.last_arrival_ms < forget_ms:
                break
            out.append(held)
        return out

    def forget(self, held: Held) -> None:
        """Drop a conversation's turns and delete them from the state topic."""
        for turn in list(held.turns.values()):
            self._drop(held, turn)
        if self._held.pop(held.key, None) is not None:
            del self._place[held.key]
            self._rechecks.discard(held.key)
            self._partitions.discard(held.partition, held.key)
        self._chars -= held.chars
        held.chars = 0

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        """Partitions now owned by another instance: it reads their turns back from the state topic. The cost
        of what those partitions hold, and of the changes not saved yet (a checkpoint's worth)."""
        gone = set(partitions)
        for key in self._partitions.pop(gone):
            held = self._held.pop(key)
            del self._place[key]
            self._rechecks.discard(key)
            self._chars -= held.chars
        self._save = {k: v for k, v in self._save.items() if v[0] not in gone}
        for partition in gone:
            self._unsaved_from.pop(partition, None)

    # -- state ------------------------------------------------------------------------------------------
    def changed(self, held: Held, turn: TurnState) -> None:
        """A turn's check changed (decided, written): saved at the next checkpoint."""
        self._save[turn.key] = (held.partition, turn)

    def to_save(self) -> list[Saved]:
        out: list[Saved] = [(partition, key, state) for key, (partition, state) in self._save.items()]
        self._save.clear()
        self._unsaved_from.clear()
        return out

    def everything(self) -> list[Saved]:
        self._save.clear()
        return [(h.partition, t.key, t) for h in self._held.values() for t in h.turns.values()]

    def commit_floors(self, positions: dict[int, int]) -> dict[int, int]:
        return {p: min(offset, self._unsaved_from.get(p, offset)) for p, offset in positions.items()}


def _tier(record: EvaluationRecord) -> Tier:
    return (record.metric, record.judge, record.selection)


def _start(turn: TurnState) -> tuple[int, str, str]:
    started = turn.started
    return (started if started is not None else -1, turn.trace_id, turn.span_id)


def _document_chars(turn: TurnState) -> int:
    return sum(len(d.text) for d in turn.evidence.documents) if turn.evidence is not None else 0


def _size(turn: TurnState) -> int:
    claims = sum(
        sum(
            len(str(c.get("claim", ""))) + len(str(c.get("reason", "")))
            for c in check.record.details["claims"]
        )
        for check in turn.checks
        if isinstance(check.record.details.get("claims"), list)
    )
    return _TURN_CHARS + _document_chars(turn) + claims
