"""`tracescore conversations`: evaluation records -> one record per conversation when it goes quiet.

    tracescore.evaluations --(group G, keyed by trace id)--> re-keyed by (service, conversation id)
        --> tracescore.conversations.turns --(group G.turns)--> ConversationTracker
                                                                  |          |
                       tracescore.conversations (records) <------+          v  each conversation, on its
                       spans topic, Phoenix sessions, metrics          tracescore.conversations.changelog
                                                                          partition (compacted)

The turns and state topics are group G's own (named above for the default G, tracescore-conversations;
another G's are G.turns and G.turns.changelog: ConversationsConfig; never `tracescore alert`'s).

Evaluation records are keyed by trace id, so a conversation's turns are spread over every partition. The
first stage writes them again (what a conversation needs of them: no details) keyed by conversation, so
with several instances each owns whole conversations. The service base (tracescore/_service) does the
Kafka part: a conversation's state sits on the state topic partition of its turns, so a rebalance reads back
only the assigned partitions; records are written, then the state that records their revisions, then the
turns topic is committed. A crash anywhere loses no conversation and writes no record twice (docs,
Contributing, Architecture).

Grounding across turns: the first stage also re-keys the turns' documents (`tracescore.conversations.
evidence`, written by `tracescore consume`) onto the turns topic, so a conversation's documents and records
meet on one partition, in one instance, whatever the two topics' partition counts; a turn's claim no document
of its own supported is judged again against the same user's earlier turns' (`Grounder`), and the turn's
record revised on the evaluations topic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from kafka.consumer.fetcher import ConsumerRecord

from tracescore._kafka import LogOnce
from tracescore._kafka_config import KafkaConnection
from tracescore._service import Forward, LoopService, ServiceLoop, ServiceTopics, StateCount
from tracescore.conversations._chains import CHAIN_LINK_HEADER, opened_chain
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._grounder import Grounder
from tracescore.conversations._grounding import held_details
from tracescore.conversations._logic import EVIDENCE_HEADER, ConversationLogic, ConversationStats, Written
from tracescore.conversations._skips import SKIP_REASONS, ConversationSkip
from tracescore.conversations._stored import encode_key
from tracescore.conversations._tracker import ConversationTracker, key_of
from tracescore.conversations._windows import WINDOW_START_HEADER, window_start
from tracescore.emit import ConversationMetrics, PhoenixAnnotations
from tracescore.model import (
    ConversationRecord,
    EvaluationRecord,
    ServiceSkip,
    TurnEvidence,
    UnreadableRecord,
    read_evaluation_record,
    read_turn_evidence,
    response_chain_id,
)
from tracescore.score.judges import Judge

__all__ = ["ConversationService", "ConversationStats", "rekeyed"]

_log = logging.getLogger("tracescore.conversations")
Clock = Callable[[], datetime]
_TURN_REASON_CHARS = 1_000
_EVIDENCE_HEADERS = ((EVIDENCE_HEADER, b"1"),)
_LINK_HEADERS = ((CHAIN_LINK_HEADER, b"1"),)
_LINK_EVIDENCE_HEADERS = (*_EVIDENCE_HEADERS, *_LINK_HEADERS)
_WINDOW_START_HEADERS = (*_EVIDENCE_HEADERS, (WINDOW_START_HEADER, b"1"))


def rekeyed(record: EvaluationRecord, grounding: bool) -> bytes:
    """A turn's record as the turns topic carries it: without its details and usage, its reason cut short;
    with grounding, the claims of one held to be judged again (`held_details`)."""
    slim = record.slim(_TURN_REASON_CHARS)
    if grounding and (details := held_details(record)):
        slim = slim.model_copy(update={"details": details})
    return slim.model_dump_json().encode()


class ConversationService(LoopService):
    def __init__(
        self,
        config: ConversationsConfig,
        *,
        kafka: KafkaConnection | None = None,
        clock: Clock = lambda: datetime.now(UTC),
        phoenix: PhoenixAnnotations | None = None,
        metrics: ConversationMetrics | None = None,
        on_record: Callable[[ConversationRecord], None] | None = None,
        llm_judge: Judge | None = None,
        on_revision: Callable[[EvaluationRecord], None] | None = None,
    ) -> None:
        """`llm_judge` judges again the LLM records of turns whose claims an earlier turn may support (the
        offline judge those of the offline judge); `on_revision` sees each turn record revised."""
        self.config = config
        self.tracker = ConversationTracker(config)
        self.stats = ConversationStats()
        self._on_revision = on_revision
        self._phoenix = phoenix
        self._metrics = metrics or ConversationMetrics(skip_reasons=SKIP_REASONS)
        self._on_record = on_record
        self._warn_once = LogOnce(_log)
        self.connection = kafka or KafkaConnection(bootstrap_servers=config.bootstrap_servers)
        c = config
        self._grounder = None
        if c.evidence_topic is not None:
            self._grounder = Grounder(
                c, self.stats.grounding, llm_judge=llm_judge, recorded=self.tracker.turns_of
            )
        self._logic = ConversationLogic(
            config, self.tracker, self.stats, skip=self._skip, on_written=self._written, clock=clock,
            grounder=self._grounder,
        )  # fmt: skip
        grounding = [c.evaluations_topic] if c.evidence_topic is not None else []
        topics = ServiceTopics(
            inputs=[c.evaluations_topic, *([c.evidence_topic] if c.evidence_topic else [])],
            keyed=c.turns_topic,
            keyed_partitions=c.turns_partitions,
            state=c.state_topic,
            legacy_state=c.legacy_state_topic,
            outputs=[c.conversations_topic, *([c.spans_topic] if c.spans_topic else [])],
            # A turn's revised record: looked for on the evaluations topic after a crash, never written twice.
            verified=[c.conversations_topic, *grounding],
        )
        # Closed last, within the stop's budget like the clients: the judge's client may wait on a peer gone.
        also_close: list[tuple[str, Callable[[float], None]]] = []
        if (grounder := self._grounder) is not None:
            also_close.append(("closing the grounder's judge client", lambda _timeout_s: grounder.close()))
        if phoenix is not None:
            also_close.append(("closing the Phoenix sink", phoenix.close))
        # BrokerUnreachable (one line) when no broker answers within the connect timeout.
        self._loop = ServiceLoop(
            c,
            log=_log,
            connection=self.connection,
            service="tracescore conversations",
            stage="turns",
            topics=topics,
            forward=self._forward,
            logic=self._logic,  # its `skip` counts the records the loop skips too (oversized)
            state=self.stats.state,
            open_keys=self._open,
            clock=clock,
            checkpoint_every_batch=False,
            also_close=also_close,
        )

    def run(self, idle_timeout_s: float | None = None) -> ConversationStats:
        """Until stopped, or `idle_timeout_s` without a record (counted from the first assignment) with
        everything read and nothing left to write."""
        self._loop.run(idle_timeout_s)  # closes the grounder and Phoenix sink last, in the stop's budget
        return self.stats

    def _open(self) -> int:
        """Nonzero while a conversation or a held turn waits to be written (an idle stop waits for none)."""
        if self.tracker.any_open():
            return 1
        if self._grounder is None:
            return 0
        links = [self._logic.chains, self._logic.windows]
        return self._grounder.open() + sum(held.open() for held in links if held is not None)

    # -- stage 1: re-key by conversation ----------------------------------------------------------------
    def _forward(self, message: ConsumerRecord) -> Forward | list[Forward] | None:
        if message.topic == self.config.evidence_topic:
            return self._forward_evidence(message)
        record = self._parse(message.value)
        if record is None:
            return None
        key = key_of(record)
        if key is None and record.previous_response_id is not None and self._grounder is not None:
            # A follow-up of a history the model's service keeps: to the link of the response it named.
            link = response_chain_id(record.service_name, record.previous_response_id)
            linked = rekeyed(record.model_copy(update={"session_id": link}), grounding=True)
            return Forward(encode_key((record.service_name, link)), linked, _LINK_HEADERS)
        if key is None:
            self._skip(
                ConversationSkip.NO_CONVERSATION,
                "its interaction carries no session.id / conversation id (name one on a span around each "
                "turn: with the SDK, tracescore.attributes(session_id=...); or let tracescore consume infer "
                "it from a resent history: infer_conversations)",
            )
            return None
        return Forward(encode_key(key), rekeyed(record, grounding=self._grounder is not None))

    def _forward_evidence(self, message: ConsumerRecord) -> list[Forward] | None:
        try:
            evidence = read_turn_evidence(message.value)
        except UnreadableRecord as unreadable:
            self._skip(ConversationSkip.INVALID_EVIDENCE, unreadable.detail)
            return None
        service, previous = evidence.service_name, evidence.previous_response_id
        if previous is not None:  # a follow-up's documents: to the link of the response it named
            link = encode_key((service, response_chain_id(service, previous)))
            return [Forward(link, self._fitted(evidence, message.value), _LINK_EVIDENCE_HEADERS)]
        forwards = [Forward(encode_key((service, evidence.session_id)), self._fitted(evidence, message.value),
                            _EVIDENCE_HEADERS)]  # fmt: skip
        chain = opened_chain(evidence)
        if chain is not None and chain != evidence.session_id:
            # A first turn may open a chain of responses too (beside the history conversation it may open).
            opened = evidence.model_copy(update={"session_id": chain})
            value = self._fitted(opened, opened.model_dump_json().encode())
            forwards.append(Forward(encode_key((service, chain)), value, _EVIDENCE_HEADERS))
        start = window_start(evidence)
        if start is not None:
            # A follow-up's documents, held also where a window starting with its own pair is read: a chat
            # whose resent history falls to that one pair is grounded in them there (`_windows`).
            copy = evidence.model_copy(update={"session_id": start})
            value = self._fitted(copy, copy.model_dump_json().encode())
            forwards.append(Forward(encode_key((service, start)), value, _WINDOW_START_HEADERS))
        return forwards

    def _fitted(self, evidence: TurnEvidence, value: bytes) -> bytes:
        """`value`, the evidence's, cut to fit the state and turns topics (a writer other than tracescore
        consume may write more)."""
        if len(value) > self.config.max_message_bytes:  # not written by tracescore consume: cut to fit
            kept, left = [], self.config.evidence_chars
            for document in evidence.documents:
                kept.append(document.model_copy(update={"text": document.text[:left]}))
                left -= len(kept[-1].text)
                if left <= 0:
                    break
            value = (
                evidence.model_copy(update={"documents": kept, "question": None}).model_dump_json().encode()
            )
        return value

    def _parse(self, value: bytes | None) -> EvaluationRecord | None:
        try:
            return read_evaluation_record(value)
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return None

    def _skip(self, reason: ServiceSkip | ConversationSkip, detail: str, count: int = 1) -> None:
        self.stats.skipped[reason] += count
        self._metrics.skipped(reason.value, count)  # the plain string: the exporters' label value
        # A turn without a conversation id is normal (a one-shot question): said once, not warned about.
        level = logging.INFO if reason == ConversationSkip.NO_CONVERSATION else logging.WARNING
        self._warn_once(
            reason, "skipped a record (%s): %s; further ones are only counted", reason, detail, level=level
        )

    # -- stage 2's outputs ------------------------------------------------------------------------------
    def _written(self, done: Written) -> None:
        self.stats.state[StateCount.RECOVERED] += done.found
        for revised in done.revised:
            if self._on_revision is not None:
                self._on_revision(revised)
        if self._phoenix is not None and done.revised:
            self._phoenix.send(done.revised)  # the span annotation of the turn, overwritten
        if done.evicted:
            self._metrics.skipped(ConversationSkip.EVICTED.value, done.evicted)
        for record in done.records:
            self.stats.records += 1
            self.stats.revisions += record.revision > 0
            self._metrics.recorded(record)
            if self._on_record is not None:
                self._on_record(record)
        if self._phoenix is not None and done.records:
            self._phoenix.send_sessions(done.records)
