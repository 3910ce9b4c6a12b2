"""The consumer's pure step: Kafka messages in, interactions to score out, with no Kafka call.

    decode -> (dead letter | drop our own evaluation spans) -> assemble traces -> extract -> admit

A message of log records (a logs pipeline writing to the spans topic) gives GenAI events instead of spans:
they are assembled with their trace, as their span's events (`_assemble`).

Every message, span, trace and interaction is counted in `ConsumerStats`; what is not scored is a counted,
explained skip (logged once per service, scope and reason).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TypeVar

from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from tracescore import semconv
from tracescore._kafka import LogOnce
from tracescore._plural import counted
from tracescore.consume._assemble import SPAN_OBJECT_BYTES, TraceAssembler
from tracescore.consume._counts import AssemblyCount
from tracescore.consume._decode import LogEvent, LogEvents, NotOtlp, decode_message
from tracescore.consume._handover import Handover
from tracescore.consume._learn import INFER_AUTO, ChatLearner, InferConversations
from tracescore.consume._revise import Revision
from tracescore.consume._shared_policy import SharedPolicy
from tracescore.consume._status import ConsumerStats
from tracescore.emit import EVALUATION_SPANS_HEADER, EvaluationMetrics
from tracescore.extract import Found, Skip, find
from tracescore.model import DecodedSpan, Trace
from tracescore.sample import SkipReason

__all__ = ["Admitted", "DeadLetter", "Pipeline", "Taken"]

_log = logging.getLogger("tracescore.consume")
_EVALUATOR_SCOPE = semconv.EVALUATOR_SCOPE
_REASON_NAMES = {reason: reason.value for reason in SkipReason}
_REASON = itemgetter(0)
_Held = TypeVar("_Held", DecodedSpan, LogEvent)  # what a message gives: spans, or log events


@dataclass(frozen=True)
class Admitted:
    """One released trace's interactions to score, each with the metrics to run (None: all), the lowest
    offset per partition its spans were read from, and its conversation turns (`evidence`)."""

    offsets: dict[Hashable, int]
    interactions: list[tuple[Revision, tuple[str, ...] | None]]
    trace_id: str = ""
    # Its interactions with a conversation id, admitted or not: their documents go to the evidence topic.
    evidence: list[Revision] = field(default_factory=list)


@dataclass(frozen=True)
class DeadLetter:
    message: ConsumerRecord
    partition: TopicPartition
    error: NotOtlp


@dataclass
class Taken:
    """What one batch of messages gave: traces released with something to score, and dead letters."""

    admitted: list[Admitted] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


class Pipeline:
    """`policy` admits interactions (and chooses their metrics); without one every interaction is scored
    with every metric."""

    def __init__(
        self,
        assembler: TraceAssembler,
        stats: ConsumerStats,
        *,
        policy: SharedPolicy | None = None,
        metrics_out: EvaluationMetrics | None = None,
        handovers: dict[Hashable, Handover] | None = None,
        evidence: bool = False,
        infer_conversations: InferConversations = False,
        learner: ChatLearner | None = None,
    ) -> None:
        self.assembler = assembler
        self._evidence = evidence  # collect the conversation turns (an evidence topic is set)
        # A conversation no app named, read from its resent history: for every service (True), or for those
        # whose traffic showed a resent chat (auto, `_learn`).
        self._infer = infer_conversations is True
        self.learner = (learner or ChatLearner()) if infer_conversations == INFER_AUTO else None
        self.stats = stats
        # Per partition, the handover its committed offset carried: what the previous owner left unfinished.
        self.handovers: dict[Hashable, Handover] = handovers if handovers is not None else {}
        self._policy = policy
        self._metrics_out = metrics_out or EvaluationMetrics()
        # (reason, service, scope) -> interactions not scored since the last report: one metric update per
        # source and batch, not one per interaction (an OTel counter's add is costly on the unsampled path).
        self._not_scored: Counter[tuple[str, str, str]] = Counter()
        # (reason, service, scope) of each interaction the policy turned away in the batch being read.
        self._turned_away: list[tuple[str, str, str]] = []
        self._log_once = LogOnce(_log)

    def take(self, batch: Sequence[ConsumerRecord]) -> Taken:
        taken = Taken()
        released: list[Trace] = []
        stats, assembler = self.stats, self.assembler
        tp = TopicPartition("", -1)
        handovers = self.handovers
        handover: Handover | None = None
        # A partition just read again up to where its previous owner stopped: its handed-over traces go on.
        read_again: TopicPartition | None = None
        for message in batch:
            if read_again is not None:
                released += assembler.release_handed_over(read_again)
                read_again = handover = None
            stats.messages += 1
            if message.partition != tp.partition or message.topic != tp.topic:
                tp = TopicPartition(message.topic, message.partition)  # a poll's messages come by partition
                handover = handovers.get(tp) if handovers else None
            if handover is not None and message.offset + 1 >= handover.until:
                handovers.pop(tp, None)  # the last message the previous owner had read, or past it
                read_again = tp
                if message.offset >= handover.until:
                    handover = None
            if message.headers and any(key == EVALUATION_SPANS_HEADER for key, _ in message.headers):
                # Ours, read back: never decoded.
                self.stats.assembly[AssemblyCount.EVALUATION_SPAN_MESSAGES] += 1
                continue
            try:
                spans = decode_message(message.value)
            except NotOtlp as exc:
                if handover is not None:
                    # Dead-lettered by the last owner.
                    stats.assembly[AssemblyCount.HANDED_OVER_MESSAGES_SKIPPED] += 1
                    continue
                self.stats.dead_letters += 1
                self._metrics_out.dead_lettered()
                taken.dead_letters.append(DeadLetter(message, tp, exc))
                continue
            if type(spans) is LogEvents:  # log records: their GenAI events, not spans
                early = self._add_log_events(spans, message, tp, handover)
                if early:
                    released += early
                continue
            if handover is not None:
                kept = _unfinished(handover, message.offset, spans)
                if len(kept) < len(spans):
                    stats.assembly[AssemblyCount.HANDED_OVER_SPANS_SKIPPED] += len(spans) - len(kept)
                spans = kept
                if not spans:
                    continue
            stats.spans += len(spans)
            # Evaluation spans written by an older version or another producer, without our header.
            if (
                spans[0].scope_name == _EVALUATOR_SCOPE
                if len(spans) == 1
                else any(s.scope_name == _EVALUATOR_SCOPE for s in spans)
            ):
                kept = [s for s in spans if s.scope_name != _EVALUATOR_SCOPE]
                stats.assembly[AssemblyCount.EVALUATION_SPANS] += len(spans) - len(kept)
                spans = kept
            size = len(message.value) + SPAN_OBJECT_BYTES * len(spans)  # what the buffer's bounds count
            early = assembler.add(spans, tp, message.offset, size, handover is not None)
            if early:
                released += early
        if read_again is not None:
            released += assembler.release_handed_over(read_again)
        taken.admitted = self.extract_and_admit(released)
        return taken

    def _add_log_events(
        self, events: LogEvents, message: ConsumerRecord, tp: TopicPartition, handover: Handover | None
    ) -> list[Trace]:
        """Buffer a logs message's GenAI events with their traces, counting the records it skipped."""
        counts = self.stats.assembly
        if events.without_trace:
            counts[AssemblyCount.LOG_RECORDS_WITHOUT_TRACE] += events.without_trace
        if events.not_events:
            counts[AssemblyCount.LOG_RECORDS_NOT_EVENTS] += events.not_events
        kept: list[LogEvent] = events
        if handover is not None:
            kept = _unfinished(handover, message.offset, events)
            # Counted apart from spans: a rebalance's re-reading of spans is not inflated by log records.
            if len(kept) < len(events):
                counts[AssemblyCount.HANDED_OVER_LOG_EVENTS_SKIPPED] += len(events) - len(kept)
        if not kept:
            return []
        size = len(message.value) + SPAN_OBJECT_BYTES * len(kept)  # counted as spans are
        return self.assembler.add_events(kept, tp, message.offset, size, handover is not None)

    def ready(self) -> list[Admitted]:
        """Traces whose wait is over."""
        return self.extract_and_admit(self.assembler.ready())

    def flush(self) -> list[Admitted]:
        """Every buffered trace, as it is (the stream went idle)."""
        return self.extract_and_admit(self.assembler.release_all())

    def extract_and_admit(self, traces: list[Trace]) -> list[Admitted]:
        """Reads `traces`, emptying the list: each trace is let go once read, so its objects are freed while
        still in the CPU's caches, not all at the end of a batch that came a grace period ago."""
        admitted = []
        stats, revise, evidence, policy = self.stats, self.assembler.revise, self._evidence, self._policy
        infer, learner = self._infer, self.learner
        turned_away = self._turned_away
        stats.traces += len(traces)
        traces.reverse()  # popped from the end: read in the order released
        while traces:
            trace = traces.pop()
            found = find(trace)  # interactions not built yet: only those admitted are
            # A trace rebuilt by late spans: only what changed is scored again, as a revision.
            revisions, skips = revise(trace, found.found, found.skips)
            hops: list[Revision] | None = None
            for skip in skips:
                self._skip(skip)
                if skip.turn is not None and evidence and self._infers(skip.turn.span.service_name):
                    hop = _hop(skip.turn)
                    if hop is not None:
                        hops = hops or []
                        hops.append(hop)
            if not revisions:
                if hops:
                    admitted.append(Admitted(dict(trace.offsets), [], trace.trace_id, hops))
                continue
            stats.interactions += len(revisions)
            # Built for a trace with something to score or a conversation turn: most have neither.
            wanted: list[tuple[Revision, tuple[str, ...] | None]] | None = None
            turns: list[Revision] | None = None
            for revision in revisions:
                read = revision.interaction
                if read.session_id is None:
                    if infer:
                        read.infer_conversation()  # before sampling: its baseline draw follows it
                    elif learner is not None and (held := self._learn(read, revision)):
                        turns = [*(turns or []), *held]
                if evidence and (read.session_id is not None or read.opens_conversation is not None):
                    # before sampling: an unscored turn's documents count too
                    turns = turns or []
                    turns.append(revision._replace(interaction=read.interaction()))
                if read.question_missing is not None:
                    stats.without_question += 1
                if policy is None:  # every interaction, every metric
                    wanted = wanted or []
                    wanted.append((revision._replace(interaction=read.interaction()), None))
                    continue
                # The span and route decide most interactions turned away: those are never built. Not a
                # method per interaction: every one of the unsampled path comes here.
                span = read.span
                decision = policy.screen(span, read.route)
                if decision is None:
                    decision = policy.admit(read.interaction())
                skip = decision.skip
                if skip is not None:
                    # Not `skip.value`: an enum property, a Python call per interaction. Counted by the batch.
                    turned_away.append((_REASON_NAMES[skip], span.service_name, span.scope_name))
                    continue
                wanted = wanted or []
                wanted.append((revision._replace(interaction=read.interaction()), decision.metrics))
            if hops:
                turns = [*(turns or []), *hops]
            if wanted or turns:
                admitted.append(Admitted(dict(trace.offsets), wanted or [], trace.trace_id, turns or []))
        if turned_away:  # counted once per batch: a Counter's += per interaction costs the unsampled path
            stats.sampled_out += len(turned_away)
            stats.not_admitted.update(map(_REASON, turned_away))
            self._not_scored.update(turned_away)
            turned_away.clear()
        counts = self.assembler.counts
        if counts:
            stats.assembly.update(counts)
            counts.clear()
        self._report_not_scored()
        return admitted

    def _infers(self, service: str) -> bool:
        """Whether conversations no app named are inferred for `service`'s turns."""
        return self._infer or (self.learner is not None and self.learner.learned(service))

    def _learn(self, read: Found, revision: Revision) -> list[Revision]:
        """infer_conversations auto, a turn naming no conversation: inferred as with the setting on where its
        service is learned, or this turn proves it resends its chats (then the turns of it held till now are
        given back, to be written with this one's); else held, its records as with the setting off."""
        learner = self.learner
        assert learner is not None
        service = read.span.service_name
        if learner.learned(service):
            read.infer_conversation()
            return []
        resends = read.resends()  # its own digest not computed yet: a one-shot service's turns need none
        if resends is None or not learner.watches(service, resends):
            return []
        turn = read.chat_turn()
        assert turn is not None  # it resends, or not: a chat turn
        held = learner.learns(service, turn)
        if held is not None:
            self.stats.services_learned += 1
            _log.info(
                "service %s resends its chat history: inferring conversations (infer_conversations auto); "
                "the documents of %s held till now written",
                service,
                counted(len(held), "possible turn"),
            )
            read.infer_conversation()
            return held if self._evidence else []
        if self._evidence:
            learner.hold(service, turn, read, revision.revision, revision.supersedes)
        return []

    def _report_not_scored(self) -> None:
        not_scored, skipped = self._not_scored, self._metrics_out.skipped
        if not_scored:
            for (reason, service, scope), count in not_scored.items():
                skipped(reason, service, scope, count)
            not_scored.clear()

    def _skip(self, skip: Skip) -> None:
        service = skip.span.service_name if skip.span else "unknown_service"
        scope = (skip.span.scope_name or "(no scope)") if skip.span else "(no scope)"
        if skip.scored:  # scored all the same: counted apart, said once per service
            self.stats.read_partly[skip.reason] += 1
            self._metrics_out.read_partly(skip.reason, service, scope)
            self._log_once(
                (service, skip.reason),
                "scored without part of what it carried (%s) from %s: %s [logged once]",
                *(skip.reason, service, skip.detail),
            )
            return
        source = (service, scope, skip.reason)
        self.stats.skipped[skip.reason] += 1
        self.stats.skipped_by_source[source] += 1
        self._not_scored[skip.reason, service, scope] += 1
        # Once per (service, scope, reason), so a user sees at once why their traffic is not scored without a
        # line per trace; the counts carry the rest.
        logged = self._log_once(
            source,
            "not scored (%s) from %s/%s: %s [logged once]",
            *(skip.reason, service, scope, skip.detail),
            level=logging.INFO if skip.expected else logging.WARNING,
        )
        if not logged:
            _log.debug("not scored (%s): %s", skip.reason, skip.detail)


def _unfinished(handover: Handover, offset: int, held: list[_Held]) -> list[_Held]:
    """The spans (or log events) of a message read again after a rebalance whose traces the previous owner
    did not finish; the others' traces were scored (or had nothing to score): the caller counts them, not
    read."""
    return [s for s in held if handover.keeps(offset, s.trace_id)]


def _hop(read: Found) -> Revision | None:
    """An answer with nothing to judge (`Skip.turn`) in a chain of responses no app named: its documents
    (none) still written, with the response that answered it, so the chain goes on from it
    (infer_conversations: a first turn opens the chain, a follow-up tells the next)."""
    if read.session_id is None:
        read.infer_conversation()
    interaction = read.interaction()
    if interaction.session_id is not None or interaction.response_id is None:
        return None
    return Revision(interaction)
