"""One conversation as the records of its turns say, and the conversation records built from it.

A turn is one scored interaction, (trace id, span id). Per turn and tier (metric, judge, selection) only its
latest record counts: a higher `revision` (late spans changed the turn) replaces it, a lower one read late
and a replayed copy change nothing, so no turn is ever counted twice. Tiers are never mixed: the offline
judge's records, an LLM judge's uniform baseline and its targeted cascade picks each make their own record.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from statistics import NormalDist

from tracescore._plural import counted
from tracescore.model import (
    ConversationLabel,
    ConversationRecord,
    EvaluationRecord,
    MetricStatus,
    WorstTurn,
    annotator_kind,
    is_flagged,
)

__all__ = ["Conversation", "Tier", "TurnRecord", "record_digest", "wilson"]

Tier = tuple[str, str, str | None]  # (metric, judge, selection)
# One tier's latest record of one turn: (revision, status, score, label, reason, the turn's time in ms: when
# its span started, else when its record was written).
# Plain tuples: a conversation of hundreds of turns is kept small, and snapshots are JSON lists as they are.
TurnRecord = tuple[int, str, float | None, str | None, str | None, int]
_REV, _STATUS, _SCORE, _LABEL, _REASON, _AT = range(6)
_REASON_CHARS = 300  # kept of a turn's reason, for the worst turn; only for turns that did not pass


@cache
def _z(confidence: float) -> float:
    """The normal quantile of a two-sided `confidence` (one configured value: once, not per record)."""
    return NormalDist().inv_cdf(1 - (1 - confidence) / 2)


def wilson(passed: int, n: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of a share `passed / n` (two-sided `confidence`): sound on the few turns
    of a conversation, where the normal approximation leaves 0..1."""
    z = _z(confidence)
    share = passed / n
    centre = (share + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def _time(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


@dataclass(slots=True)
class Conversation:
    service: str
    conversation_id: str
    route: str  # of the first turn
    started_ms: int  # arrival of the first turn: with the id, the conversation's identity
    partition: int
    last_arrival_ms: int
    through: int = -1  # highest turns-topic offset applied; a replay at or below it changes nothing
    turns: dict[tuple[str, str], dict[Tier, TurnRecord]] = field(default_factory=dict)
    past_cap: int = 0
    emitted: dict[Tier, tuple[int, str]] = field(default_factory=dict)  # (revision, digest) last written
    pending: bool = False  # changed since its records were last written
    dirty_from: int | None = None  # lowest offset applied since the last snapshot (None: nothing is)
    dirty_since_ms: int = 0  # arrival of that change

    @property
    def key(self) -> tuple[str, str]:
        return (self.service, self.conversation_id)

    def apply(self, record: EvaluationRecord, offset: int, arrival_ms: int, max_turns: int) -> bool:
        """Take one turn record read at `offset`; True when the conversation changed."""
        if offset <= self.through:
            return False
        self.through = offset
        outcomes = self.turns.get((record.trace_id, record.span_id))
        if outcomes is None:
            if len(self.turns) >= max_turns:
                self.past_cap += 1
                return self._changed(offset, arrival_ms)
            outcomes = self.turns[(record.trace_id, record.span_id)] = {}
        tier = (record.metric, record.judge, record.selection)
        old = outcomes.get(tier)
        if old is not None and old[_REV] > record.revision:
            return False  # an older revision read late: the newer one stands
        passed = record.score is not None and not is_flagged({"score": record.score, "label": record.label})
        # Reasons are kept only where the record may show one: the worst turn, or why nothing was scored.
        reason = None if passed or not record.reason else record.reason[:_REASON_CHARS]
        new: TurnRecord = (
            record.revision,
            record.status.value,
            record.score,
            record.label,
            reason,
            _ms(record.span_started_at or record.timestamp),
        )
        if old == new:
            return False
        outcomes[tier] = new
        return self._changed(offset, arrival_ms)

    def _changed(self, offset: int, arrival_ms: int) -> bool:
        self.last_arrival_ms = max(self.last_arrival_ms, arrival_ms)
        self.pending = True
        if self.dirty_from is None:
            self.dirty_from, self.dirty_since_ms = offset, arrival_ms
        return True

    # -- records --------------------------------------------------------------------------------------
    def records(self, confidence: float, now: datetime) -> list[tuple[Tier, ConversationRecord]]:
        """One record per tier, revision 0 and unlinked (`due` gives them their revision)."""
        # One pass over the turns (the records of every evicted conversation are built at once: issue 33).
        first_at: dict[str, dict[tuple[str, str], int]] = {}  # metric -> turn -> its earliest time
        tiers_of: dict[str, set[Tier]] = {}
        for k, outcomes in self.turns.items():
            for tier, o in outcomes.items():
                firsts = first_at.setdefault(tier[0], {})
                firsts[k] = min(firsts.get(k, o[_AT]), o[_AT])
                tiers_of.setdefault(tier[0], set()).add(tier)
        out = []
        for metric in sorted(first_at):
            keys = sorted(first_at[metric], key=lambda k, at=first_at[metric]: (at[k], k))
            for tier in sorted(tiers_of[metric], key=lambda t: (t[1], t[2] or "")):
                judged = [(k, self.turns[k][tier]) for k in keys if tier in self.turns[k]]
                out.append((tier, self._record(tier, len(keys), judged, confidence, now)))
        return out

    def _record(
        self,
        tier: Tier,
        turns: int,
        judged: list[tuple[tuple[str, str], TurnRecord]],
        confidence: float,
        now: datetime,
    ) -> ConversationRecord:
        metric, judge, selection = tier
        scored = [(k, o) for k, o in judged if o[_STATUS] == MetricStatus.OK.value and o[_SCORE] is not None]
        flagged = [(k, o) for k, o in scored if is_flagged({"score": o[_SCORE], "label": o[_LABEL]})]
        passed = len(scored) - len(flagged)
        share = lower = upper = None
        worst = None
        if scored:
            share = passed / len(scored)
            lower, upper = wilson(passed, len(scored), confidence)
            # A flagged turn before any that passes (one invented claim in four scores 0.75, flagged, where
            # a partly supported answer scores 0.5 and passes), then the lowest score.
            bad = {k for k, _ in flagged}
            (trace_id, span_id), o = min(
                scored, key=lambda item: (item[0] not in bad, item[1][_SCORE] or 0.0)
            )
            worst = WorstTurn(
                trace_id=trace_id, span_id=span_id, score=o[_SCORE] or 0.0, label=o[_LABEL], reason=o[_REASON]
            )
        status = MetricStatus.OK
        if not scored:
            errors = any(o[_STATUS] == MetricStatus.ERROR.value for _, o in judged)
            status = MetricStatus.ERROR if errors else MetricStatus.NOT_APPLICABLE
        times = [o[_AT] for _, o in judged]
        return ConversationRecord(
            conversation_id=self.conversation_id,
            service_name=self.service,
            route=self.route,
            started_at=_time(self.started_ms),
            metric=metric,
            judge=judge,
            annotator_kind=annotator_kind(judge),
            selection=selection,
            turns=turns,
            turns_judged=len(judged),
            turns_scored=len(scored),
            turns_passed=passed,
            turns_flagged=len(flagged),
            complete=len(judged) == turns,
            score=share,
            share_lower=lower,
            share_upper=upper,
            confidence=confidence,
            label=None
            if not scored
            else (ConversationLabel.FLAGGED if flagged else ConversationLabel.PASSED),
            status=status,
            reason=_reason(metric, turns, len(judged), len(scored), passed, worst, status, judged),
            worst_turn=worst,
            trace_ids=[trace_id for (trace_id, _), _ in judged],
            span_ids=[span_id for (_, span_id), _ in judged],
            first_turn_at=_time(min(times)),
            last_turn_at=_time(max(times)),
            records_past_cap=self.past_cap,
            timestamp=now,
        )

    def due(
        self, confidence: float, now: datetime, found: Callable[[Tier, int], str | None] | None = None
    ) -> list[tuple[Tier, ConversationRecord, str]]:
        """The records that differ from the ones last written, with their revision, what they supersede and
        their digest (`record_digest`, computed once: a record's revision is not part of it); `written` marks
        them written. `found(tier, revision)`: the digest of that revision when it is on the topic already
        though the state does not say so (a crash came between the two): a revision is never given to two
        different records."""
        out = []
        for tier, record in self.records(confidence, now):
            digest = record_digest(record)
            last = self.emitted.get(tier)
            while found is not None:
                seen = found(tier, 0 if last is None else last[0] + 1)
                if seen is None or seen == digest:
                    break
                last = (0 if last is None else last[0] + 1, seen)
            if last is not None and last[1] == digest:
                continue
            if last is not None:  # a first record is built as revision 0, superseding none: as it is
                record = record.model_copy(update={"revision": last[0] + 1, "supersedes": last[0]})
            out.append((tier, record, digest))
        return out

    def written(self, records: list[tuple[Tier, ConversationRecord, str]]) -> None:
        """`records` (from `due`) were written: the next ones are their revisions."""
        for tier, record, digest in records:
            self.emitted[tier] = (record.revision, digest)
        self.pending = False


def record_digest(record: ConversationRecord) -> str:
    """What a record says, without when it was written or its place in the revisions."""
    content = record.model_dump_json(exclude={"timestamp", "revision", "supersedes"})
    return hashlib.blake2b(content.encode(), digest_size=8).hexdigest()


def _reason(
    metric: str,
    turns: int,
    judged: int,
    scored: int,
    passed: int,
    worst: WorstTurn | None,
    status: MetricStatus,
    outcomes: list[tuple[tuple[str, str], TurnRecord]],
) -> str:
    if status is not MetricStatus.OK:
        why = next((o[_REASON] for _, o in outcomes if o[_REASON]), None)
        return (
            f"no turn scored for {metric} ({judged} of {counted(turns, 'turn')} judged: {status.value})"
            + (f"; {why}" if why else "")
        )
    text = f"{passed} of {counted(scored, 'scored turn')} pass {metric}"
    if judged < turns:
        text += f" ({judged} of {counted(turns, 'turn')} judged by this judge)"
    if worst is not None and passed < scored:
        text += f"; worst: trace {worst.trace_id} score {worst.score:.2f} {worst.label or ''}".rstrip()
        if worst.reason:
            text += f": {worst.reason}"
    return text
