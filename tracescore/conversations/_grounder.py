"""Grounding across turns, as `tracescore conversations` runs it (through `ConversationLogic`, the service
base's KeyedLogic): held turns in (`GroundingStore`), at each tick the changed conversations' checks
decided (`_regrounding`), their judges run together, and the revisions of the turns' records written to the
evaluations topic, so `tracescore tail`, `tracescore alert`, Phoenix and this service's own conversation
records count the revised verdict (each reader keeps a turn's highest revision: never a turn twice).

A revision is an output of the service base: written before the state that records it, with an id (the
turn, tier and revision) and a digest in its headers, so a crash writes none twice and loses none.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from tracescore._service import Output
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._counts import GroundingCount
from tracescore.conversations._grounding import GroundingStats, GroundingStore, Held, TurnId, has_open_claims
from tracescore.conversations._regrounding import (
    Decision,
    GroundingContext,
    context_of,
    decision_record,
    fingerprint,
    grounded_rows,
)
from tracescore.conversations._stored import HeldCheck, TurnState
from tracescore.emit import EVALUATION_SPANS_HEADER, record_span
from tracescore.export import encode_trace_messages
from tracescore.model import (
    EarlierTurn,
    EvaluationRecord,
    GroundingDetails,
    GroundingStatus,
    NotRejudgedReason,
    revision_key,
)
from tracescore.score.judges import Judge, JudgeError, OfflineJudge
from tracescore.score.metrics import Regrounded, ground_claims

__all__ = ["Grounder"]

Key = tuple[str, str]
_CONCURRENT = 8  # judge calls at once
_CONVERSATIONS_PER_TICK = 64
_SPAN_HEADERS = ((EVALUATION_SPANS_HEADER, b"1"),)


@dataclass
class _Job:
    held: Held
    turn: TurnState
    check: HeldCheck
    context: GroundingContext
    fingerprint: str
    judge: Judge


class Grounder:
    def __init__(
        self,
        config: ConversationsConfig,
        stats: GroundingStats,
        *,
        llm_judge: Judge | None,
        recorded: Callable[[Key], Sequence[tuple[TurnId, int]]],
    ) -> None:
        self.config = config
        self.stats = stats
        self.store = GroundingStore(config, stats)
        self._offline: Judge = OfflineJudge()
        self._llm = llm_judge
        self._recorded = recorded
        self._loop: asyncio.AbstractEventLoop | None = None
        self._decided: list[Decision] = []
        # Decided, not yet written: a grounded offline record's revision, for the LLM record it pairs with.
        self._pending: dict[int, EvaluationRecord] = {}
        self._writing: dict[str, tuple[Decision, EvaluationRecord]] = {}

    def open(self) -> int:
        return self.store.open() + len(self._decided)

    # -- decide -----------------------------------------------------------------------------------------
    def tick(self, now: datetime, stream_time: Callable[[int], int]) -> None:
        """Forget by the partitions' stream time (the service base's); decide the changed conversations. A
        conversation is read up when its partition's stream time passed its last change: every record and
        document written before that was applied."""
        for held in self.store.to_forget(stream_time):
            self.store.forget(held)
            self.stats.counts[GroundingCount.FORGOTTEN] += 1
        # At most this many conversations a tick, so a burst of follow-ups (an LLM judge at a few seconds a
        # call) never keeps the service from polling; the rest wait for the next tick, still open.
        changed = self.store.rechecks(_CONVERSATIONS_PER_TICK)
        if not changed:
            return
        jobs, paired = [], []
        for held in changed:
            for turn in list(held.turns.values()):
                offline = [c for c in turn.checks if c.record.annotator_kind == "CODE"]
                for check in offline:
                    jobs += self._plan(held, turn, check, now, _read_up(held, stream_time))
        self._run(jobs, now)
        jobs = []
        for held in changed:
            for turn in list(held.turns.values()):
                for check in (c for c in turn.checks if c.record.annotator_kind == "LLM"):
                    planned = self._plan(held, turn, check, now, _read_up(held, stream_time))
                    jobs += planned
                    if not planned:
                        paired.append((held, turn, check))
        self._run(jobs, now)
        for held, turn, check in paired:  # an LLM record whose offline record was grounded: its pair follows
            pair = self._pair(turn, check)
            if pair is not None and id(check) not in self._pending:
                base = check.revised if check.revised is not None else check.record
                said = GroundingDetails.read(base.details.get("earlier_turns"))  # kept: what it said before
                note = (said or GroundingDetails(status=GroundingStatus.PAIRED)).model_copy(
                    update={"offline_grounded": True}
                )
                self._decide(
                    held, turn, check, decision_record(base, now, note, offline=pair), GroundingStatus.PAIRED
                )

    def _plan(
        self, held: Held, turn: TurnState, check: HeldCheck, now: datetime, read_up: bool
    ) -> list[_Job]:
        """What to do with one check: judge it again (a job), say why it cannot be (decided now), or
        nothing."""
        if check.status == GroundingStatus.GROUNDED:
            return []
        if not has_open_claims(check.record):
            if _shadowed(check) and check.status != GroundingStatus.SUPERSEDED:
                # A newer reading of the turn with nothing to judge again, below a revision written here that
                # says otherwise: written again above it, so the newer reading stands.
                note = GroundingDetails(status=GroundingStatus.SUPERSEDED, revision_of=check.record.revision)
                self._decide(
                    held, turn, check, decision_record(check.record, now, note), GroundingStatus.SUPERSEDED
                )
            return []
        context = context_of(held, turn, self._recorded(held.key), check.record)
        stamp = fingerprint(check, turn, context)
        if stamp == check.checked:
            return []  # nothing new to judge it against
        judge = self._judge_of(check.record)
        if not context.earlier or judge is None:
            # Why it cannot be judged again is said only once everything written so far was read: an earlier
            # turn's documents, or the reason to judge it, may be on their way.
            to_say = context.without_documents if not context.earlier else len(context.earlier)
            if to_say and check.status != GroundingStatus.NOT_REJUDGED and not read_up:
                self.store.recheck(held)
                return []
            check.checked = stamp
            self.store.changed(held, turn)
        if context.other_users:
            self.stats.counts[GroundingCount.OTHER_USER_TURNS_LEFT_OUT] += context.other_users
        if context.not_in_history:
            self.stats.counts[GroundingCount.TURNS_NOT_IN_HISTORY] += context.not_in_history
        if context.pairs_shared:
            self.stats.counts[GroundingCount.WINDOW_PAIRS_SHARED] += context.pairs_shared
        if not context.earlier:
            # Earlier turns known without documents (content capture off, cut, never written): said once, not
            # guessed about. A first turn, with no earlier turn at all, has nothing to say.
            if context.without_documents and check.status != GroundingStatus.NOT_REJUDGED:
                why = (
                    f"the {context.without_documents} earlier turn(s) of this conversation have no documents "
                    "held (content capture off, documents cut or dropped past evidence_chars, or tracescore "
                    "consume not writing conversation_evidence_topic): not judged against them"
                )
                self._note(held, turn, check, now, NotRejudgedReason.NOT_CAPTURED, why, context)
            return []
        if judge is None:
            if check.status != GroundingStatus.NOT_REJUDGED:
                given = (
                    f"its LLM judge is {self._llm.name}" if self._llm is not None else "it has no LLM judge"
                )
                why = (
                    f"judged by {check.record.judge}; tracescore conversations {given} (--judge openai "
                    f"--model ...): not judged again against {len(context.earlier)} earlier turn(s)"
                )
                self._note(held, turn, check, now, NotRejudgedReason.NO_JUDGE, why, context)
            return []
        return [_Job(held, turn, check, context, stamp, judge)]

    def _judge_of(self, record: EvaluationRecord) -> Judge | None:
        if record.annotator_kind == "CODE":
            return self._offline
        return self._llm if self._llm is not None and self._llm.name == record.judge else None

    def _run(self, jobs: list[_Job], now: datetime) -> None:
        if not jobs:
            return
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        outcomes = self._loop.run_until_complete(_all(jobs))
        for job, outcome in zip(jobs, outcomes, strict=True):
            self.stats.counts[GroundingCount.REJUDGED] += 1
            job.check.checked = job.fingerprint
            pair = self._pair(job.turn, job.check)
            if isinstance(outcome, JudgeError) or outcome.result is None:
                failed = isinstance(outcome, JudgeError)
                self.stats.counts[GroundingCount.JUDGE_ERRORS if failed else GroundingCount.UNSUPPORTED] += 1
                job.check.status = GroundingStatus.ERROR if failed else GroundingStatus.UNSUPPORTED
                self.store.changed(job.held, job.turn)
                # A revision written here that still says otherwise, or an offline pair that moved.
                if _shadowed(job.check) or pair is not None:
                    note = _earlier_turns(job.check.status, job, None)
                    record = decision_record(job.check.record, now, note, offline=pair)
                    self._decide(job.held, job.turn, job.check, record, job.check.status)
                continue
            self.stats.counts[GroundingCount.GROUNDED] += 1
            rows = grounded_rows(outcome.result, outcome.grounded, job.context)
            note = _earlier_turns(GroundingStatus.GROUNDED, job, outcome)
            record = decision_record(job.check.record, now, note, outcome.result, rows, pair, outcome.usage)
            self._decide(job.held, job.turn, job.check, record, GroundingStatus.GROUNDED, job.fingerprint)

    def _note(
        self,
        held: Held,
        turn: TurnState,
        check: HeldCheck,
        now: datetime,
        why: NotRejudgedReason,
        text: str,
        context: GroundingContext,
    ) -> None:
        self.stats.counts[GroundingCount.not_rejudged(why)] += 1
        note = GroundingDetails(
            status=GroundingStatus.NOT_REJUDGED,
            why=why,
            note=text,
            revision_of=check.record.revision,
            turns_without_documents=context.without_documents,
        )
        record = decision_record(check.record, now, note, offline=self._pair(turn, check))
        self._decide(held, turn, check, record, GroundingStatus.NOT_REJUDGED)

    def _decide(
        self, held: Held, turn: TurnState, check: HeldCheck, record: EvaluationRecord, status: str,
        stamp: str | None = None,
    ) -> None:  # fmt: skip
        check.status = status
        self._pending[id(check)] = record  # an LLM record of the turn decided in this tick pairs with it
        self._decided.append(Decision(held, turn, check, record, status, stamp))
        self.store.changed(held, turn)

    def _pair(self, turn: TurnState, check: HeldCheck) -> tuple[float | None, str | None] | None:
        """For an LLM record: the offline score and label to pair with, when its offline record was grounded
        and the pair it carries (or the one written here last) is another."""
        if check.record.annotator_kind != "LLM":
            return None
        metric = check.record.metric
        offline = next(
            (c for c in turn.checks if c.record.annotator_kind == "CODE" and c.record.metric == metric), None
        )
        if offline is None or offline.status != GroundingStatus.GROUNDED:
            return None
        grounded = self._pending.get(id(offline), offline.revised)
        if grounded is None:
            return None
        pair = (grounded.score, grounded.label)
        carried = check.revised if check.revised is not None else check.record
        return None if (carried.offline_score, carried.offline_label) == pair else pair

    # -- write ------------------------------------------------------------------------------------------
    def outputs(self, found: Mapping[str, str], topic: str) -> list[Output]:
        out: list[Output] = []
        self._writing.clear()
        for decision in self._decided:
            check = decision.check
            revision = max(check.record.revision, -1 if check.written is None else check.written) + 1
            record = decision.record
            digest = _digest(record)
            while (seen := found.get(_output_id(record, revision))) is not None and seen != digest:
                revision += 1  # a crash left another record under that revision: never two of one
            record = record.model_copy(
                update={
                    "revision": revision,
                    "supersedes": revision_key(record.trace_id, record.span_id, revision - 1),
                }
            )
            identity = _output_id(record, revision)
            spans = self._spans(record, identity, digest)
            if spans:
                record = record.model_copy(update={"evaluation_span_id": spans[0][1]})
            value = record.model_dump_json().encode()
            if len(value) > self.config.max_message_bytes:
                self.stats.counts[GroundingCount.RECORD_TOO_LARGE] += 1
                continue
            self._writing[identity] = (decision, record)
            out += [output for output, _ in spans]
            out.append(Output(topic, record.trace_id.encode(), value, identity, digest))
        self._decided.clear()
        self._pending.clear()
        return out

    def _spans(self, record: EvaluationRecord, identity: str, digest: str) -> list[tuple[Output, str]]:
        """The revision's evaluation span (a child of the turn's span, as consume's), for the spans topic:
        written first, not looked for after a crash (a topic the apps share)."""
        topic = self.config.spans_topic
        if not topic:
            return []
        span = record_span(record, time.time_ns())
        span_id = format(span.context.span_id, "016x")
        return [
            (Output(topic, key, value, f"{identity}.span{n}", digest, _SPAN_HEADERS, verified=False), span_id)
            for n, (key, value) in enumerate(encode_trace_messages([span]))
        ]

    def written(self, outputs: Sequence[Output], found: Mapping[str, str]) -> list[EvaluationRecord]:
        """The revisions now on the topic; the ones written now (not found there after a crash)."""
        fresh = []
        for output in outputs:
            writing = self._writing.get(output.id)
            if writing is None:
                continue
            decision, record = writing
            decision.check.revised, decision.check.digest = record, output.digest
            self.store.changed(decision.held, decision.turn)
            if found.get(output.id) != output.digest:
                fresh.append(record)
        self._writing.clear()
        return fresh

    def forget_partitions(self, partitions: set[int]) -> None:
        self.store.forget_partitions(partitions)
        self._decided = [d for d in self._decided if d.held.partition not in partitions]
        self._pending = {id(d.check): d.record for d in self._decided}

    def close(self) -> None:
        if self._loop is not None:
            # As asyncio.run does: finalising the loop's async generators is what closes the LLM judge's
            # client (and its sockets) built for this loop.
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()
            self._loop = None


async def _all(jobs: list[_Job]) -> list[Regrounded | JudgeError]:
    gate = asyncio.Semaphore(_CONCURRENT)

    async def one(job: _Job) -> Regrounded | JudgeError:
        async with gate:
            try:
                record = job.check.record
                question = job.turn.evidence.question if job.turn.evidence is not None else None
                rule = record.details.get("label_rule")
                return await ground_claims(
                    record.details["claims"],
                    job.context.texts,
                    question,
                    job.judge,
                    str(rule) if rule else None,
                )
            except JudgeError as exc:
                return exc

    return list(await asyncio.gather(*(one(job) for job in jobs)))


def _earlier_turns(status: str, job: _Job, outcome: Regrounded | None) -> GroundingDetails:
    context = job.context
    counted = {
        "turns_without_documents": context.without_documents,
        "other_user_turns_left_out": context.other_users,
        "turns_not_in_history": context.not_in_history,
    }
    return GroundingDetails(
        status=GroundingStatus(status),
        judge=job.judge.name,
        revision_of=job.check.record.revision,
        turns=[
            EarlierTurn(
                trace_id=t.trace_id,
                turns_back=back,
                documents=len(t.evidence.documents) if t.evidence else 0,
            )
            for t, back in context.earlier
        ],
        claims_judged=outcome.judged if outcome is not None else None,
        claims_grounded=len(outcome.grounded) if outcome is not None else 0,
        **{name: n for name, n in counted.items() if n},  # only where some were
    )


def _read_up(held: Held, stream_time: Callable[[int], int]) -> bool:
    return stream_time(held.partition) > held.last_arrival_ms


def _shadowed(check: HeldCheck) -> bool:
    """A revision written here is at or above the turn's latest record and says another verdict."""
    revised = check.revised
    return (
        revised is not None
        and revised.revision >= check.record.revision
        and ((revised.score, revised.label) != (check.record.score, check.record.label))
    )


def _output_id(record: EvaluationRecord, revision: int) -> str:
    identity = [
        "turn",
        record.trace_id,
        record.span_id,
        record.metric,
        record.judge,
        record.selection,
        revision,
    ]
    return hashlib.blake2b(json.dumps(identity).encode(), digest_size=16).hexdigest()


def _digest(record: EvaluationRecord) -> str:
    """What a revision says: the same decision taken again after a crash has the same digest."""
    content = record.model_dump_json(
        exclude={"timestamp", "revision", "supersedes", "usage", "evaluation_span_id"}
    )
    return hashlib.blake2b(content.encode(), digest_size=8).hexdigest()
