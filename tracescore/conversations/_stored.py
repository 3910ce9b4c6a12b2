"""What the state topic holds: a conversation (`ConversationState`, schema version 2: typed, versioned), a
turn held to ground a later turn's claims (`TurnState`, kind "turn", same version: its documents, and its
records with claims no document of its own supported), a link of a chain of response ids (`LinkState`, kind
"link", version 3: a release before it refuses the entry as a future version instead of misreading it), a
link of a sliding window (`WindowState`, kind "window", version 4: refused so by a release before it), the
codec that tells them apart, and the reader of version 1 (the positional JSON snapshot of earlier versions,
on the old single-partition state topic) that carries an old conversation over."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from tracescore._service import StateCodec, StateRecord, UnreadableState
from tracescore.conversations._state import Conversation, Tier, TurnRecord
from tracescore.model import EvaluationRecord, ServiceSkip, TurnEvidence

__all__ = [
    "ChainFollower",
    "ConversationCodec",
    "ConversationState",
    "HeldCheck",
    "LinkState",
    "TurnState",
    "WindowState",
    "WindowTail",
    "WindowTurn",
    "decode_key",
    "encode_key",
    "from_legacy",
    "json_bytes",
    "link_key",
    "turn_key",
    "window_key",
]


# One encoder for every key and identity: `json.dumps` with an option builds a new one per call (a key per
# turn read, per record and per state written: 100,000 open conversations, issue 33).
_JSON = json.JSONEncoder(ensure_ascii=False)


def json_bytes(values: list[Any]) -> bytes:
    """`values` as JSON (UTF-8, not escaped to ASCII): keys and identities."""
    return _JSON.encode(values).encode()


def encode_key(key: tuple[str, str]) -> bytes:
    """Kafka key of the turns and state topics: JSON, so any service or conversation id round-trips."""
    return json_bytes(list(key))


def turn_key(service: str, conversation_id: str, trace_id: str, span_id: str) -> bytes:
    """State topic key of a held turn: never a conversation's (four elements, not two)."""
    return json_bytes([service, conversation_id, trace_id, span_id])


def link_key(service: str, link_id: str) -> bytes:
    """State topic key of a chain's link: never a conversation's (three elements) nor a turn's (four)."""
    return json_bytes([service, link_id, "link"])


def window_key(service: str, window_id: str) -> bytes:
    """State topic key of a sliding window's link: never a conversation's, a turn's or a chain's link's."""
    return json_bytes([service, window_id, "window"])


def decode_key(raw: bytes) -> tuple[str, str]:
    try:
        service, conversation_id = json.loads(raw)
    except (UnicodeDecodeError, ValueError, TypeError):
        raise UnreadableState(
            ServiceSkip.INVALID_STATE, f"not a conversation key ({len(raw)} bytes)"
        ) from None
    return str(service), str(conversation_id)


class TurnOutcome(BaseModel):
    """One tier's latest record of one turn."""

    metric: str
    judge: str
    selection: str | None = None
    revision: int
    status: str
    score: float | None = None
    label: str | None = None
    reason: str | None = Field(default=None, description="Kept only for turns that did not pass.")
    at_ms: int = Field(description="The turn's time: its span's start, else when its record was written.")


class StoredTurn(BaseModel):
    trace_id: str
    span_id: str
    outcomes: list[TurnOutcome]


class Emitted(BaseModel):
    """The last record written for a tier: the next one is its revision."""

    metric: str
    judge: str
    selection: str | None = None
    revision: int
    digest: str


class ConversationState(StateRecord):
    """One conversation: its turns' outcomes and the records already written."""

    schema_version: Literal[2] = 2
    service: str
    conversation_id: str
    route: str
    started_ms: int = Field(description="Arrival of the first turn: with the id, its identity.")
    last_arrival_ms: int
    through: int = Field(default=-1, description="Highest turns-topic offset applied.")
    past_cap: int = 0
    pending: bool = Field(default=False, description="Changed since its records were last written.")
    emitted: list[Emitted] = Field(default_factory=list)
    turns: list[StoredTurn] = Field(default_factory=list)

    @classmethod
    def of(cls, c: Conversation, with_reasons: bool = True) -> ConversationState:
        return cls(
            service=c.service,
            conversation_id=c.conversation_id,
            route=c.route,
            started_ms=c.started_ms,
            last_arrival_ms=c.last_arrival_ms,
            through=c.through,
            past_cap=c.past_cap,
            pending=c.pending,
            emitted=[
                Emitted(metric=m, judge=j, selection=s, revision=rev, digest=digest)
                for (m, j, s), (rev, digest) in c.emitted.items()
            ],
            turns=[
                StoredTurn(
                    trace_id=trace_id,
                    span_id=span_id,
                    outcomes=[_outcome(t, o, with_reasons) for t, o in kept.items()],
                )
                for (trace_id, span_id), kept in c.turns.items()
            ],
        )

    def conversation(self, partition: int) -> Conversation:
        c = Conversation(
            service=self.service,
            conversation_id=self.conversation_id,
            route=self.route,
            started_ms=self.started_ms,
            partition=partition,
            last_arrival_ms=self.last_arrival_ms,
            through=self.through,
            past_cap=self.past_cap,
            pending=self.pending,
        )
        for e in self.emitted:
            c.emitted[(e.metric, e.judge, e.selection)] = (e.revision, e.digest)
        for turn in self.turns:
            c.turns[(turn.trace_id, turn.span_id)] = {
                (o.metric, o.judge, o.selection): (o.revision, o.status, o.score, o.label, o.reason, o.at_ms)
                for o in turn.outcomes
            }
        return c


def _outcome(tier: Tier, o: TurnRecord, with_reason: bool) -> TurnOutcome:
    metric, judge, selection = tier
    revision, status, score, label, reason, at_ms = o
    return TurnOutcome(
        metric=metric, judge=judge, selection=selection, revision=revision, status=status, score=score,
        label=label, reason=reason if with_reason else None, at_ms=at_ms,
    )  # fmt: skip


def from_legacy(value: bytes) -> ConversationState:
    """A snapshot of the old state topic (schema 1: positional JSON lists, no version field)."""
    try:
        data: dict[str, Any] = json.loads(value)
        return ConversationState(
            service=str(data["service"]),
            conversation_id=str(data["conversation_id"]),
            route=str(data["route"]),
            started_ms=int(data["started_ms"]),
            last_arrival_ms=int(data["last_arrival_ms"]),
            through=int(data["through"]),
            past_cap=int(data["past_cap"]),
            pending=bool(data["pending"]),
            emitted=[
                Emitted(metric=m, judge=j, selection=s, revision=int(rev), digest=str(digest))
                for m, j, s, rev, digest in data["emitted"]
            ],
            turns=[
                StoredTurn(
                    trace_id=str(trace_id),
                    span_id=str(span_id),
                    outcomes=[
                        _outcome((m, j, s), (int(rev), str(status), score, label, reason, int(at)), True)
                        for m, j, s, rev, status, score, label, reason, at in outcomes
                    ],
                )
                for trace_id, span_id, outcomes in data["turns"]
            ],
        )
    except (KeyError, TypeError, ValueError) as exc:  # ValidationError too
        detail = f"not a conversation snapshot of an earlier version: {type(exc).__name__}: {exc}"
        raise UnreadableState(ServiceSkip.INVALID_STATE, detail.splitlines()[0][:200]) from None


class HeldCheck(BaseModel):
    """One tier's latest record of a held turn (its claims in `details`), and what grounding made of it."""

    record: EvaluationRecord
    checked: str | None = Field(default=None, description="Fingerprint of the documents last judged against.")
    status: str | None = Field(
        default=None, description="A GroundingStatus value (a str: state a newer version wrote still reads)."
    )
    note: str | None = Field(default=None, description="Why it was not judged again (not_rejudged).")
    revised: EvaluationRecord | None = Field(default=None, description="The last revision written here.")
    digest: str | None = Field(default=None, description="What that revision says (its output digest).")

    @property
    def written(self) -> int | None:
        return None if self.revised is None else self.revised.revision


class TurnState(StateRecord):
    """A turn of a conversation held for grounding: written once per change (its documents are big), deleted
    when the conversation is forgotten or past the bounds."""

    schema_version: Literal[2] = 2
    kind: Literal["turn"] = "turn"
    service: str
    conversation_id: str
    trace_id: str
    span_id: str
    user_id: str | None = None
    started_ms: int | None = Field(default=None, description="When the turn started: what orders turns.")
    started_us: int | None = Field(
        default=None,
        description="The same in microseconds: what orders turns started within one millisecond (none in a "
        "state an earlier release wrote: started_ms then).",
    )
    through: int = Field(default=-1, description="Highest turns-topic offset applied.")
    arrival_ms: int = Field(default=0, description="When its last change reached the turns topic.")
    evidence: TurnEvidence | None = Field(default=None, description="Its documents, cut to the bounds.")
    checks: list[HeldCheck] = Field(default_factory=list)

    @property
    def key(self) -> bytes:
        return turn_key(self.service, self.conversation_id, self.trace_id, self.span_id)

    @property
    def started(self) -> int | None:
        """When the turn started, in microseconds: what orders a conversation's turns."""
        if self.started_us is not None:
            return self.started_us
        return None if self.started_ms is None else self.started_ms * 1000

    def start_at(self, at: datetime) -> None:
        """The turn's start, from its span's start time."""
        self.started_us = round(at.timestamp() * 1_000_000)
        self.started_ms = self.started_us // 1000


class ChainFollower(BaseModel):
    """A follow-up waiting at the link of the response it named: its latest records and documents not written
    to its chain yet, and what was."""

    trace_id: str
    span_id: str
    response_id: str | None = Field(default=None, description="Its own answer's: the next link.")
    records: list[EvaluationRecord] = Field(default_factory=list, description="Latest per tier, not written.")
    evidence: TurnEvidence | None = Field(default=None, description="Its latest documents, not written.")
    sent: list[str] = Field(default_factory=list, description="What was written to the chain (`sent_mark`).")
    root_sent: bool = Field(default=False, description="Its own link was told the chain's id.")


class LinkState(StateRecord):
    """A link of a chain of response ids (the key of the response a follow-up named): the chain's id once
    known, and the follow-ups that named it."""

    schema_version: Literal[3] = 3
    kind: Literal["link"] = "link"
    service: str
    link_id: str = Field(description="response_chain_id of the response named: the key of the link.")
    root: str | None = Field(default=None, description="The chain's conversation id, once known.")
    through: int = Field(default=-1, description="Highest turns-topic offset applied.")
    arrival_ms: int = Field(default=0, description="When its last change reached the turns topic.")
    followers: list[ChainFollower] = Field(default_factory=list)

    @property
    def key(self) -> bytes:
        return link_key(self.service, self.link_id)


class WindowTail(BaseModel):
    """A known conversation whose turn the window's key names is followed there by the turn `next`."""

    next: str = Field(description="The digest of the turn after it, in that conversation.")
    root: str = Field(description="That conversation's id.")


class WindowTurn(BaseModel):
    """A turn whose resent history opens with the window's pair: held until it is known whose turn it is, then
    written again there (`root`: a known conversation it continues; `own`: the window's own conversation)."""

    trace_id: str
    span_id: str
    next: str = Field(description="The second pair its prompt resent: what a tail must be followed by.")
    last: str = Field(description="The last pair its prompt resent: the turn just before it.")
    waits_from_ms: int = Field(
        default=0,
        description="The stream time its wait began (0: not begun; a restart begins it again): past "
        "quiet_seconds undecided, it is the window's own.",
    )
    root: str | None = Field(default=None, description="The conversation it continues, once decided.")
    own: bool = Field(default=False, description="Decided: a turn of the window's own conversation.")
    records: list[EvaluationRecord] = Field(default_factory=list, description="Latest per tier, not written.")
    evidence: TurnEvidence | None = Field(default=None, description="Its latest documents, not written.")
    sent: list[str] = Field(default_factory=list, description="What was written where it was decided.")

    @property
    def decided(self) -> bool:
        return self.own or self.root is not None


class WindowState(StateRecord):
    """A link of a sliding window (the key of the conversation a resent history's first pair would open):
    the known conversations that turn continues in, and the turns held there until decided."""

    schema_version: Literal[4] = 4
    kind: Literal["window"] = "window"
    service: str
    window_id: str = Field(description="history_conversation_id of the pair: the key of the link.")
    tails: list[WindowTail] = Field(default_factory=list)
    turns: list[WindowTurn] = Field(default_factory=list)
    through: int = Field(default=-1, description="Highest turns-topic offset applied.")
    arrival_ms: int = Field(default=0, description="When its last change reached the turns topic.")

    @property
    def key(self) -> bytes:
        return window_key(self.service, self.window_id)


class ConversationCodec(StateCodec[Any]):
    """The values of the state topic, told apart by `kind`; each refused as `StateCodec` refuses."""

    def __init__(self) -> None:
        super().__init__(ConversationState)
        self._kinds: dict[str, StateCodec[Any]] = {
            "turn": StateCodec(TurnState),
            "link": StateCodec(LinkState),
            "window": StateCodec(WindowState),
        }

    def decode(self, raw: bytes) -> ConversationState | TurnState | LinkState | WindowState:
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            data = None
        kind = data.get("kind") if isinstance(data, dict) else None
        codec = self._kinds.get(kind) if isinstance(kind, str) else None
        return codec.decode(raw) if codec is not None else super().decode(raw)
