"""Deciding a held turn again: its claims without evidence judged against its own documents and what the
same user's earlier turns of the conversation retrieved, and the revision of its record that says what came
of it (`details.earlier_turns`; each grounded claim's `evidence_source` names the earlier turn's trace).

* The judge is the record's own tier's: the offline judge for offline records; for an LLM record, the LLM
  judge `tracescore conversations` was given when it is the same one, else the record says so.
* A claim is judged again only when what it would be judged against changed (a fingerprint of the turns and
  their readings), so a turn is never judged twice against the same documents.
* An earlier answer is no evidence: only documents are (an earlier turn's claim was supported by its
  documents, which are here; a restated hallucination has none behind it).
* Revisions: above both the turn's latest record and the last one written here, so a newer reading of the
  turn (late spans) and a grounding never share a number. A grounding that supports nothing writes nothing,
  unless a revision written here must be superseded; a turn that could not be judged again (no documents
  recorded for its earlier turns, no LLM judge) says so once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tracescore.conversations._grounding import Held, TurnId
from tracescore.conversations._stored import HeldCheck, TurnState
from tracescore.conversations._windows import is_window_start
from tracescore.emit import explanation
from tracescore.model import (
    ContextSourceKind,
    ConversationSource,
    EvaluationRecord,
    EvidenceDocument,
    GroundingDetails,
    MetricResult,
    Usage,
)

__all__ = ["Decision", "GroundingContext", "context_of", "decision_record", "fingerprint"]

_WORD = re.compile(r"\w+")
_CLAIM_QUOTED = 120


@dataclass(frozen=True)
class Source:
    """An earlier turn's document in the context judged: where to say a claim's evidence came from."""

    trace_id: str
    turns_back: int
    document: EvidenceDocument

    def described(self) -> dict[str, Any]:
        return {
            "kind": ContextSourceKind.EARLIER_TURN.value,
            "trace_id": self.trace_id,
            "span_id": self.document.span_id,
            "turns_back": self.turns_back,
            "retrieved_as": self.document.kind,
        }


@dataclass
class GroundingContext:
    """What a held turn's claims are judged against: its own documents, then the same user's earlier turns'
    (most recent first), each text once; `sources[i]` is None for the turn's own document i."""

    texts: list[str] = field(default_factory=list)
    sources: list[Source | None] = field(default_factory=list)
    earlier: list[tuple[TurnState, int]] = field(default_factory=list)  # (turn, turns back) with documents
    without_documents: int = 0  # earlier turns known with no document held (not recorded, or dropped)
    other_users: int = 0  # earlier turns of another user.id under this conversation id: never used
    not_in_history: int = 0  # an inferred conversation's earlier turns this turn's history does not hold
    # Copies of follow-ups held where their pair's window starts, left out: another turn of that pair is held
    # there (two chats share it: a "thanks" -> "You're welcome!").
    pairs_shared: int = 0
    unordered: bool = False  # the turn has no start time: nothing is known to be earlier


def context_of(
    held: Held,
    turn: TurnState,
    recorded_earlier: Sequence[tuple[TurnId, int]],
    record: EvaluationRecord | None = None,
) -> GroundingContext:
    """`recorded_earlier`: the conversation's turns known by their records (the tracker's), with their start,
    so an earlier turn whose documents never arrived is counted, not guessed about. In a conversation
    inferred from the resent history (`record`'s `conversation_source`), only the earlier turns whose
    (question, answer) the record's history holds: two chats that opened alike share the id, not their
    later turns."""
    context = GroundingContext()
    seen: set[str] = set()
    if turn.evidence is not None:
        for document in turn.evidence.documents:
            if document.text not in seen:
                seen.add(document.text)
                context.texts.append(document.text)
                context.sources.append(None)
    start = turn.started
    if start is None:
        context.unordered = True
        return context
    # In microseconds: two turns of a fast app (or a script) often start within one millisecond.
    before = [
        t for t in held.turns.values() if t is not turn and (at := t.started) is not None and at < start
    ]
    mine = sorted((t for t in before if t.user_id == turn.user_id), key=_started, reverse=True)
    context.other_users = len(before) - len(mine)
    if record is not None and record.conversation_source == ConversationSource.HISTORY:
        resent = set(record.history_turns)
        kept = [t for t in mine if t.evidence is None or t.evidence.turn_digest in resent]
        context.not_in_history = len(mine) - len(kept)
        # A follow-up's documents held where its pair's window starts count only as the one turn of that pair
        # held here: a pair two chats share is no evidence of whose chat this is.
        pairs = Counter(t.evidence.turn_digest for t in kept if t.evidence is not None)
        mine = [t for t in kept if not (is_window_start(t.evidence) and pairs[_digest(t)] > 1)]
        context.pairs_shared = len(kept) - len(mine)
    for back, earlier in enumerate(mine, start=1):
        documents = earlier.evidence.documents if earlier.evidence is not None else []
        if not documents:
            context.without_documents += 1
            continue
        context.earlier.append((earlier, back))
        for document in documents:
            if document.text not in seen:
                seen.add(document.text)
                context.texts.append(document.text)
                context.sources.append(Source(earlier.trace_id, back, document))
    held_ids = {(t.trace_id, t.span_id) for t in held.turns.values()}
    context.without_documents += sum(
        1 for turn_id, at in recorded_earlier if at < start // 1000 and turn_id not in held_ids
    )
    return context


def fingerprint(check: HeldCheck, turn: TurnState, context: GroundingContext) -> str:
    """What a check would be judged against: the record, the turn's documents and the earlier turns used."""
    used = [
        (
            t.trace_id,
            t.span_id,
            t.evidence.revision if t.evidence else -1,
            len(t.evidence.documents) if t.evidence else 0,
        )
        for t, _ in context.earlier
    ]
    own = turn.evidence.revision if turn.evidence is not None else -1
    seen = [
        check.record.revision,
        check.record.judge,
        own,
        len(context.texts),
        used,
        context.without_documents,
    ]
    # Named conversations keep the fingerprints they had before turns were left out by history.
    left_out = [context.not_in_history] if context.not_in_history else []
    raw = json.dumps([*seen, context.other_users, *left_out])
    return hashlib.blake2b(raw.encode(), digest_size=12).hexdigest()


@dataclass
class Decision:
    """One tier of one held turn, decided: its record's revision waits to be written."""

    held: Held
    turn: TurnState
    check: HeldCheck
    record: EvaluationRecord  # revision and supersedes set when written
    status: str
    fingerprint: str | None = None
    note: str | None = None


def grounded_rows(
    result: MetricResult, grounded: Mapping[int, list[int]], context: GroundingContext
) -> list[dict[str, Any]]:
    """The result's claim rows, each grounded one with the earlier turn its evidence came from."""
    rows = [dict(row) for row in result.details.get("claims", [])]
    for index, located in grounded.items():
        source = next((s for i in located if (s := context.sources[i]) is not None), None)
        if source is None:  # the judge quoted the turn's own words, or loosely: the closest earlier document
            source = _closest(str(rows[index].get("claim", "")), context)
        rows[index]["context_index"] = None  # not a document of the record's own contexts
        rows[index]["evidence_source"] = (
            source.described() if source is not None else {"kind": ContextSourceKind.EARLIER_TURN.value}
        )
    return rows


def _closest(claim: str, context: GroundingContext) -> Source | None:
    words = set(_WORD.findall(claim.casefold()))
    best, best_shared = None, -1
    for text, source in zip(context.texts, context.sources, strict=True):
        if source is None:
            continue
        shared = len(words & set(_WORD.findall(text.casefold())))
        if shared > best_shared:
            best, best_shared = source, shared
    return best


def decision_record(
    base: EvaluationRecord,
    now: datetime,
    earlier_turns: GroundingDetails,
    result: MetricResult | None = None,
    rows: list[dict[str, Any]] | None = None,
    offline: tuple[float | None, str | None] | None = None,
    usage: Usage | None = None,
) -> EvaluationRecord:
    """The next revision of `base` (a turn's record, or the revision written here last): with `result` (a
    grounding) its score, label, claims and reason; else the same verdict with `earlier_turns` saying why;
    `offline` the offline score and label it pairs with (an LLM record whose offline record was grounded)."""
    details = dict(base.details)
    update: dict[str, Any] = {"timestamp": now, "evaluation_span_id": None, "usage": usage or Usage()}
    if result is not None and rows is not None:
        details.update(result.details)
        details["claims"] = rows
        where = "; ".join(w for w in (_where(r) for r in rows) if w)
        reason = explanation(result.model_copy(update={"details": {"claims": rows}})) or ""
        reason += f" Grounded in earlier turns of the conversation: {where}."
        update.update({"score": result.score, "label": result.label, "reason": reason})
    if offline is not None:
        update["offline_score"], update["offline_label"] = offline
    # Written as the model dumps it (fields set only), in the details' own key order.
    update["details"] = {
        **details,
        "earlier_turns": earlier_turns.model_dump(mode="json", exclude_unset=True),
    }
    return base.model_copy(update=update)


def _where(row: Mapping[str, Any]) -> str | None:
    source = row.get("evidence_source")
    if not isinstance(source, dict) or "trace_id" not in source:
        return None
    back = source["turns_back"]
    claim = _clip(str(row.get("claim", "")))
    return f"{claim} (trace {source['trace_id']}, {back} turn{'s' * (back != 1)} back)"


def _digest(turn: TurnState) -> str | None:
    return turn.evidence.turn_digest if turn.evidence is not None else None


def _started(turn: TurnState) -> int:
    return turn.started or 0


def _clip(text: str) -> str:
    return repr(text if len(text) <= _CLAIM_QUOTED else text[: _CLAIM_QUOTED - 1] + "…")
