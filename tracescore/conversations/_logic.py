"""What `tracescore conversations` does with its keys (the service base's `KeyedLogic`): turn records into
conversations, quiet conversations into records, and which conversation states to save when; with grounding
across turns (`Grounder`), turns' documents and open claims into revisions of the turns' records.

A conversation's state is saved when its records are written (their revisions and digests with it), when it
is forgotten or evicted (deleted), and, for one that never goes quiet, after `quiet_seconds` of changes; a
held turn (`TurnState`) at the checkpoint after it changed. The turns topic is committed no further than the
oldest change not saved yet.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kafka.consumer.fetcher import ConsumerRecord

from tracescore._service import Output, Saved, StateCount, StateRecord, UnreadableState
from tracescore.conversations._chains import CHAIN_LINK_HEADER, CHAIN_ROOT_HEADER, Chains, opened_chain
from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._grounder import Grounder
from tracescore.conversations._grounding import GroundingStats
from tracescore.conversations._skips import ConversationSkip
from tracescore.conversations._state import Conversation, Tier
from tracescore.conversations._stored import (
    ConversationCodec,
    ConversationState,
    LinkState,
    TurnState,
    WindowState,
    decode_key,
    encode_key,
    from_legacy,
    json_bytes,
)
from tracescore.conversations._tracker import ConversationTracker, Key
from tracescore.conversations._windows import (
    WINDOW_DECIDED_HEADER,
    WINDOW_START_HEADER,
    WINDOW_TAIL_HEADER,
    Windows,
    in_window,
)
from tracescore.emit import EVALUATION_SPANS_HEADER, conversation_span
from tracescore.export import encode_trace_messages
from tracescore.model import (
    ConversationRecord,
    EvaluationRecord,
    ServiceSkip,
    TurnEvidence,
    UnreadableRecord,
    read_evaluation_record,
    read_turn_evidence,
)

__all__ = ["EVIDENCE_HEADER", "ConversationLogic", "ConversationStats", "Written", "output_id"]

_log = logging.getLogger("tracescore.conversations")
_SPAN_HEADERS = ((EVALUATION_SPANS_HEADER, b"1"),)
# Marks a turn's documents on the turns topic (re-keyed from the evidence topic beside the records).
EVIDENCE_HEADER = "tracescore.turn.evidence"


def output_id(conversation: Conversation, tier: Tier, revision: int) -> str:
    """The identity of one revision of one conversation's record (its header on the conversations topic)."""
    identity = [conversation.service, conversation.conversation_id, conversation.started_ms, *tier, revision]
    return hashlib.blake2b(json_bytes(identity), digest_size=16).hexdigest()


@dataclass
class ConversationStats:
    turn_records: int = 0  # read from the turns topic
    records: int = 0  # conversation records written
    revisions: int = 0  # of which revised an earlier one
    evicted: int = 0  # written early and forgotten past max_conversations
    forgotten: int = 0  # silent for forget_seconds
    skipped: Counter[ServiceSkip | ConversationSkip] = field(default_factory=Counter)  # by reason
    # state topic: conversations restored, carried over from the old state topic (migrated), the topic
    # recreated after it was deleted; records found already written after a crash, not written again
    # (recovered)
    state: Counter[StateCount] = field(default_factory=Counter)
    grounding: GroundingStats = field(default_factory=GroundingStats)
    turns_revised: int = 0  # turns' records revised (grounded in earlier turns, or saying why not)


@dataclass
class Written:
    """What one checkpoint wrote, for the service's stats, metrics and callbacks."""

    records: list[ConversationRecord] = field(default_factory=list)  # written now
    found: int = 0  # already on the topic after a crash, not written again
    evicted: int = 0  # written early and forgotten past max_conversations
    revised: list[EvaluationRecord] = field(default_factory=list)  # turns' records revised, written now


class ConversationLogic:
    codec = ConversationCodec()

    def __init__(
        self,
        config: ConversationsConfig,
        tracker: ConversationTracker,
        stats: ConversationStats,
        *,
        skip: Callable[..., None],  # (reason, detail, count=1)
        on_written: Callable[[Written], None],
        clock: Callable[[], datetime],
        grounder: Grounder | None = None,
    ) -> None:
        self.config = config
        self.grounder = grounder
        self.tracker = tracker
        self.stats = stats
        self._skip = skip
        self._on_written = on_written
        self._clock = clock
        self._writing: list[Conversation] = []  # quiet or evicted: their records are due
        self._evicting: set[Key] = set()
        self._save: dict[Key, int] = {}  # key -> partition; a key no longer held is deleted
        self._decided: dict[str, tuple[Conversation, Tier, ConversationRecord]] = {}
        self._stale: dict[bytes, int] = {}  # held turns and links on the state topic with grounding off
        # A history the model's service keeps, joined from its response ids (grounding on: its first turn is
        # known by its documents).
        self.chains: Chains | None = None
        # A chat that resends only its last turns, kept one conversation (grounding on: its turns are known
        # by their documents).
        self.windows: Windows | None = None
        if grounder is not None:
            self.chains = Chains(
                config, grounder.stats.counts, ((EVIDENCE_HEADER, b"1"),), opened=grounder.store.opens_chain
            )
            self.windows = Windows(
                config, grounder.stats.counts, ((EVIDENCE_HEADER, b"1"),), holds=grounder.store.holds_turn
            )
        self._now = clock()

    # -- restore ----------------------------------------------------------------------------------------
    def restore(
        self,
        partition: int,
        key: bytes,
        state: ConversationState | TurnState | LinkState | WindowState,
        migrated: bool,
    ) -> None:
        for kind, links, what in (
            (WindowState, self.windows, "a window's"),
            (LinkState, self.chains, "a chain's"),
        ):
            if not isinstance(state, kind):
                continue
            if key != state.key:
                self._skip(ServiceSkip.INVALID_STATE, f"{what} link under another key ({len(key)} bytes)")
            elif links is not None:
                links.restore(partition, state)
            else:
                self._stale[key] = partition
            return
        if isinstance(state, TurnState):
            if key != state.key:
                self._skip(ServiceSkip.INVALID_STATE, f"a held turn under another key ({len(key)} bytes)")
            elif self.grounder is not None:
                self.grounder.store.restore(partition, state)
            else:
                self._stale[key] = partition  # grounding turned off: delete what it held
            return
        if decode_key(key) != (state.service, state.conversation_id):
            self._skip(
                ServiceSkip.INVALID_STATE, f"a state under another conversation's key ({len(key)} bytes)"
            )
            return
        conversation = state.conversation(partition)
        self.tracker.restore([conversation])
        if migrated:
            self._save[conversation.key] = partition

    def restored(self) -> None:
        # The tracker orders what it restored when it next needs the order.
        if self.chains is not None:
            self.chains.restored()
        if self.windows is not None:
            self.windows.restored()

    def legacy(self, key: bytes, value: bytes) -> ConversationState:
        return from_legacy(value)

    def rewind_ms(self) -> int | None:
        return None  # a conversation's state holds its turns: nothing before the commit is read again

    # -- process ----------------------------------------------------------------------------------------
    def apply(self, message: ConsumerRecord, replay: bool) -> None:
        # The message's own time (CreateTime, set by stage 1); a broker that gives none: now.
        arrival = message.timestamp if message.timestamp and message.timestamp > 0 else _ms(self._clock())
        headers = {key for key, _ in message.headers} if message.headers else set()
        where = (message.partition, message.offset, arrival)
        chains, windows = self.chains, self.windows
        if WINDOW_TAIL_HEADER in headers:
            tail = self._link_of(message)
            if windows is not None and tail is not None and not windows.tail(tail, message.value, *where):
                self._skip(ServiceSkip.INVALID_RECORD, "a window's tail message tracescore did not write")
            return
        # A turn whose resent history may be a sliding window's, read where its first pair names: decided by
        # `Windows` (written again where it was, or applied here as usual).
        # A follow-up's documents held where its own pair's window starts: for grounding only (no turn of that
        # conversation, no tail, no join decided by it).
        start = WINDOW_START_HEADER in headers
        windowed = windows is not None and WINDOW_DECIDED_HEADER not in headers and not start
        if CHAIN_ROOT_HEADER in headers:
            link = self._link_of(message)
            if (
                chains is not None
                and link is not None
                and not chains.root_message(link, message.value, *where)
            ):
                self._skip(ServiceSkip.INVALID_RECORD, "a chain's root message tracescore did not write")
            return
        linked = self._link_of(message) if CHAIN_LINK_HEADER in headers and chains is not None else None
        if EVIDENCE_HEADER in headers:
            if self.grounder is not None:
                try:
                    evidence = read_turn_evidence(message.value)
                except UnreadableRecord as unreadable:
                    self._skip(ConversationSkip.INVALID_EVIDENCE, unreadable.detail)
                    return
                if chains is not None and linked is not None:
                    chains.follower_evidence(linked, evidence, *where)
                    return
                key = (evidence.service_name, evidence.session_id)
                if windowed and self._window_took(key, evidence, where):
                    return
                taken = self.grounder.store.evidence(evidence, *where)
                chain = opened_chain(evidence)
                if chains is not None and chain is not None and chain == evidence.session_id:
                    chains.opener_held((evidence.service_name, chain))  # the chain's first turn
                if windows is not None and taken and not start:  # not a replay: which follows which, once
                    windows.turn_held(key, evidence.turn_digest)
                    windows.announce(evidence, self.config.turns_topic)
            return
        try:
            record: EvaluationRecord = read_evaluation_record(message.value)
        except UnreadableRecord as unreadable:
            self._skip(unreadable.reason, unreadable.detail)
            return
        if chains is not None and linked is not None:
            chains.follower_record(linked, record, *where)
            return
        key = (record.service_name, record.session_id or "")
        if windowed and self._window_took(key, record, where):
            return
        self.stats.turn_records += 1
        self.tracker.apply(record, message.partition, message.offset, arrival)
        if self.grounder is not None:
            self.grounder.store.record(record, message.partition, message.offset, arrival)
        past_cap = self.tracker.counts.pop(ConversationSkip.RECORDS_PAST_CAP, 0)
        if past_cap:
            self._skip(
                ConversationSkip.RECORDS_PAST_CAP,
                "a session id shared by more turns than max_turns",
                past_cap,
            )

    def _window_took(
        self, key: Key, item: EvaluationRecord | TurnEvidence, where: tuple[int, int, int]
    ) -> bool:
        """Whether a turn's record or documents read at `key` is a sliding window's, taken by `Windows`."""
        windows = self.windows
        return (
            windows is not None
            and in_window(key, item.history_turns, item.user_id)
            and windows.take(key, item, *where)
        )

    def _link_of(self, message: ConsumerRecord) -> Key | None:
        try:
            return decode_key(message.key or b"")
        except UnreadableState as unreadable:
            self._skip(ServiceSkip.INVALID_RECORD, f"a chain's message under {unreadable.detail}")
            return None

    def tick(self, now: datetime, stream_time: Callable[[int], int]) -> None:
        # Quiet, forgotten or due for a checkpoint by the partition's stream time, not the wall clock: a turn
        # still held back in stage 1 (a rebalance, a crashed member's partitions) is not silence.
        self._now = now
        evicted = self.tracker.over_capacity()
        self._evicting = {c.key for c in evicted}
        self._writing = [c for c in self.tracker.quiet(stream_time) if c.key not in self._evicting] + evicted
        for conversation in self.tracker.to_checkpoint(stream_time):
            self._save[conversation.key] = conversation.partition
        for conversation in self.tracker.to_forget(stream_time):
            self.tracker.forget(conversation)
            self._save[conversation.key] = conversation.partition
            self.stats.forgotten += 1
        if self.grounder is not None:
            self.grounder.tick(now, stream_time)
        if self.chains is not None:
            self.chains.tick(stream_time)
        if self.windows is not None:
            self.windows.tick(stream_time)

    # -- outputs ----------------------------------------------------------------------------------------
    def outputs(self, found: Mapping[str, str]) -> list[Output]:
        out: list[Output] = []
        self._decided.clear()
        for conversation in self._writing:
            if not conversation.pending:
                continue

            def seen(tier: Tier, revision: int, c: Conversation = conversation) -> str | None:
                return found.get(output_id(c, tier, revision))

            # Nothing found on the topic (no crash came between a write and its state): no identity to ask.
            asked = seen if found else None
            for tier, record, digest in conversation.due(self.config.confidence, self._now, asked):
                out.extend(self._outputs_of(conversation, tier, record, digest))
        if self.grounder is not None:
            out.extend(self.grounder.outputs(found, self.config.evaluations_topic))
        if self.chains is not None:
            out.extend(self.chains.outputs(self.config.turns_topic))
        if self.windows is not None:
            out.extend(self.windows.outputs(self.config.turns_topic))
        return out

    def _outputs_of(
        self, conversation: Conversation, tier: Tier, record: ConversationRecord, digest: str
    ) -> list[Output]:
        identity = output_id(conversation, tier, record.revision)
        self._decided[identity] = (conversation, tier, record)
        outputs = []
        span = conversation_span(record, start_ns=time.time_ns()) if self.config.spans_topic else None
        if span is not None and self.config.spans_topic is not None:
            for n, (key, value) in enumerate(encode_trace_messages([span])):
                outputs.append(
                    Output(
                        self.config.spans_topic,
                        key,
                        value,
                        f"{identity}.span{n}",
                        digest,
                        _SPAN_HEADERS,
                        verified=False,
                    )
                )
        value = record.model_dump_json().encode()
        key = encode_key(conversation.key)
        outputs.append(Output(self.config.conversations_topic, key, value, identity, digest))
        return outputs

    def written(self, outputs: Sequence[Output], found: Mapping[str, str]) -> None:
        done = Written()
        for output in outputs:
            decided = self._decided.get(output.id)
            if decided is None:
                continue  # a span: its record says the rest
            conversation, tier, record = decided
            conversation.written([(tier, record, output.digest)])
            self._save[conversation.key] = conversation.partition
            if found.get(output.id) == output.digest:
                done.found += 1
            else:
                done.records.append(record)
        if self.grounder is not None:
            done.revised = self.grounder.written(outputs, found)
            self.stats.turns_revised += len(done.revised)
        if self.chains is not None:
            self.chains.written(outputs)
        if self.windows is not None:
            self.windows.written(outputs)
        for conversation in self._writing:
            if conversation.key in self._evicting:
                self.tracker.forget(conversation)
                self._save[conversation.key] = conversation.partition
                self.stats.evicted += 1
                done.evicted += 1
        self._writing, self._evicting = [], set()
        self._decided.clear()
        self._on_written(done)

    # -- state ------------------------------------------------------------------------------------------
    def to_save(self) -> list[Saved]:
        out: list[Saved] = []
        for key, partition in self._save.items():
            conversation = self.tracker.get(key)
            if conversation is None:
                out.append((partition, encode_key(key), None))
                continue
            state = self._state_of(conversation)
            if state is not None:
                out.append((partition, encode_key(key), state))
        self._save.clear()
        out += [(partition, key, None) for key, partition in self._stale.items()]
        self._stale.clear()
        if self.grounder is not None:
            out += [(p, key, self._fitted(turn)) for p, key, turn in self.grounder.store.to_save()]
        if self.chains is not None:
            out += self._fitted_links(self.chains.to_save())
        if self.windows is not None:
            out += self._fitted_links(self.windows.to_save())
        return out

    def _fitted(self, turn: StateRecord | None) -> StateRecord | None:
        """A held turn as saved: without its documents when it would not fit (counted), never too large."""
        if not isinstance(turn, TurnState) or len(self.codec.encode(turn)) <= self.config.max_message_bytes:
            return turn
        self._skip(
            ConversationSkip.STATE_TOO_LARGE, f"held turn {turn.trace_id}: saved without its documents"
        )
        smaller = turn.model_copy(update={"evidence": None})
        return smaller if len(self.codec.encode(smaller)) <= self.config.max_message_bytes else None

    def _fitted_links(self, saved: list[Saved]) -> list[Saved]:
        """Links as saved: one too large for a message (a response named by very many follow-ups waiting for
        their chain, a window's pair by many turns waiting for theirs) without its waiting turns' documents,
        counted; never too large (at worst deleted, its turns then each alone)."""
        out: list[Saved] = []
        for partition, key, link in saved:
            if isinstance(link, LinkState | WindowState) and (
                len(self.codec.encode(link)) > self.config.max_message_bytes
            ):
                if isinstance(link, LinkState):
                    what = f"a chain's link {link.link_id}: saved smaller"
                    followers = [f.model_copy(update={"evidence": None}) for f in link.followers]
                    smaller: LinkState | WindowState = link.model_copy(update={"followers": followers})
                else:
                    what = f"a window's link {link.window_id}: saved smaller"
                    turns = [t.model_copy(update={"evidence": None}) for t in link.turns]
                    smaller = link.model_copy(update={"turns": turns})
                self._skip(ConversationSkip.STATE_TOO_LARGE, what)
                fits = len(self.codec.encode(smaller)) <= self.config.max_message_bytes
                link = smaller if fits else None
            out.append((partition, key, link))
        return out

    def after_save(self) -> list[Saved]:
        return []  # its outputs are all on Kafka, written before the state

    def not_delivered(self) -> str | None:
        return None

    def _state_of(self, conversation: Conversation) -> ConversationState | None:
        conversation.dirty_from = None
        state = ConversationState.of(conversation)
        if len(self.codec.encode(state)) <= self.config.max_message_bytes:
            return state
        state = ConversationState.of(conversation, with_reasons=False)
        size = len(self.codec.encode(state))
        if size <= self.config.max_message_bytes:
            return state
        # Written without its state: a restart would miss its turns read so far; said once, counted.
        self._skip(
            ConversationSkip.STATE_TOO_LARGE, f"conversation {conversation.conversation_id!r}: {size} bytes"
        )
        return None

    def everything(self) -> list[Saved]:
        self._save.clear()
        out: list[Saved] = []
        for conversation in self.tracker.held():
            state = self._state_of(conversation)
            if state is not None:
                out.append((conversation.partition, encode_key(conversation.key), state))
        if self.grounder is not None:
            out += [(p, key, self._fitted(turn)) for p, key, turn in self.grounder.store.everything()]
        if self.chains is not None:
            out += self._fitted_links(self.chains.everything())
        if self.windows is not None:
            out += self._fitted_links(self.windows.everything())
        return out

    def commit_floors(self, positions: dict[int, int]) -> dict[int, int]:
        floors = self.tracker.commit_offsets(positions)
        if self.grounder is not None:
            floors = self.grounder.store.commit_floors(floors)
        for links in (self.chains, self.windows):
            floors = floors if links is None else links.commit_floors(floors)
        return floors

    def undecided(self, partition: int, before_ms: int) -> bool:
        # A conversation decided by a crashed owner may have changed since (its next turn, a turn's grounded
        # revision): it is decided again a quiet period after that change, whenever it comes.
        return self.tracker.undecided(partition, before_ms)

    def forget_partitions(self, partitions: set[int]) -> None:
        self.tracker.forget_partitions(partitions)
        if self.grounder is not None:
            self.grounder.forget_partitions(partitions)
        if self.chains is not None:
            self.chains.forget_partitions(partitions)
        if self.windows is not None:
            self.windows.forget_partitions(partitions)
        self._save = {k: p for k, p in self._save.items() if p not in partitions}
        self._writing = [c for c in self._writing if c.partition not in partitions]

    def skip(self, reason: ServiceSkip, detail: str) -> None:
        self._skip(reason, detail)


def _ms(at: datetime) -> int:
    return int(at.astimezone(UTC).timestamp() * 1000)
