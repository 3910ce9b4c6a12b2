"""The conversations one instance holds: which are quiet (their records are due), which to checkpoint,
forget or evict, and which turns-topic offsets may be committed. Pure logic on times passed in; no Kafka.

Time is the turns topic's: a turn's arrival is its message's timestamp there, and "now" for a partition is
its stream time (the service base's `StreamClock`): a turn not applied yet was re-keyed after it. So a
restart that re-reads a partition, an instance that lags, or a turn held back in stage 1 by a rebalance or a
crashed member never makes a conversation quiet whose next turn is still on its way.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable
from itertools import count

from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._index import ByTime, Key, Partitions
from tracescore.conversations._skips import ConversationSkip
from tracescore.conversations._state import Conversation
from tracescore.model import EvaluationRecord

__all__ = ["ConversationTracker", "Key"]


class ConversationTracker:
    def __init__(self, config: ConversationsConfig) -> None:
        self.config = config
        # Least recently changed first: eviction takes from the front, forgetting stops at the first too new.
        self._held: OrderedDict[Key, Conversation] = OrderedDict()
        self._unsorted = False  # restored conversations were appended out of order
        self._partitions = Partitions()  # a revoke forgets a partition's conversations, not a pass over all
        # What the service asks every tick, by index (issue 33: 100,000 open conversations held): the work of
        # a tick follows what changed or became due, not how many are held.
        self._place: dict[Key, int] = {}  # key -> its place in `_held` (ascending): answers in that order
        self._places = count()
        self._undecided = ByTime(lambda c: c.started_ms if c.pending else None)
        self._quiet = ByTime(lambda c: c.last_arrival_ms if c.pending else None)
        self._full: set[Key] = set()  # reached max_turns, never written
        self._unsaved = ByTime(lambda c: c.dirty_since_ms if c.dirty_from is not None else None)
        self._floors = ByTime(lambda c: c.dirty_from)
        self._indexes = (self._undecided, self._quiet, self._unsaved, self._floors)
        self._none: list[int | None] = [None] * len(self._indexes)
        self.counts: Counter[ConversationSkip] = Counter()

    def __len__(self) -> int:
        return len(self._held)

    def get(self, key: Key) -> Conversation | None:
        return self._held.get(key)

    def any_open(self) -> bool:
        """A conversation changed since its records were last written (O(1) amortised)."""
        return any(self._undecided.oldest(p, self._held) < float("inf") for p in self._undecided.partitions())

    def undecided(self, partition: int, before_ms: int) -> bool:
        """A conversation of `partition` that started before `before_ms` changed since its records were last
        written (asked every tick after a restore: O(1) amortised, whatever the number held)."""
        return self._undecided.oldest(partition, self._held) < before_ms

    def _times(self, conversation: Conversation) -> list[int | None]:
        return [index.time_of(conversation) for index in self._indexes]

    def _changed(self, conversation: Conversation, before: list[int | None]) -> None:
        for index, was in zip(self._indexes, before, strict=True):
            index.changed(conversation, was, self._held)
        if (
            conversation.pending
            and not conversation.emitted
            and len(conversation.turns) >= self.config.max_turns
        ):
            self._full.add(conversation.key)

    def _placed(self, key: Key) -> None:
        self._place[key] = next(self._places)

    def apply(self, record: EvaluationRecord, partition: int, offset: int, arrival_ms: int) -> None:
        """One turn record read from the turns topic (keyed there by `key_of`)."""
        key = key_of(record)
        if key is None:
            self.counts[ConversationSkip.NO_CONVERSATION] += 1
            return
        conversation = self._held.get(key)
        if conversation is None:
            conversation = self._held[key] = Conversation(
                service=key[0],
                conversation_id=key[1],
                route=record.route,
                started_ms=arrival_ms,
                partition=partition,
                last_arrival_ms=arrival_ms,
            )
            self._placed(key)
            self._partitions.add(partition, key)
            before = self._none  # a new conversation is in no index yet (not pending, nothing unsaved)
        else:
            before = self._times(conversation)
        past_cap = conversation.past_cap
        if conversation.apply(record, offset, arrival_ms, self.config.max_turns):
            self._held.move_to_end(key)
            self._placed(key)
            self._changed(conversation, before)
        self.counts[ConversationSkip.RECORDS_PAST_CAP] += conversation.past_cap - past_cap

    def restore(self, conversations: Iterable[Conversation]) -> None:
        """Conversations from the state topic. One already held keeps its own, newer state."""
        for conversation in conversations:
            kept = self._held.setdefault(conversation.key, conversation)
            if kept is conversation:
                self._placed(kept.key)
                self._partitions.add(kept.partition, kept.key)
                self._changed(kept, self._none)
            self._unsorted = True

    def _in_order(self) -> OrderedDict[Key, Conversation]:
        """The conversations least recently changed first (sorted once after restores, not per one)."""
        if self._unsorted:
            self._held = OrderedDict(sorted(self._held.items(), key=lambda item: item[1].last_arrival_ms))
            self._place = {key: next(self._places) for key in self._held}
            self._unsorted = False
        return self._held

    def held(self) -> list[Conversation]:
        return list(self._held.values())

    def turns_of(self, key: Key) -> list[tuple[tuple[str, str], int]]:
        """A conversation's turns known by their records, (trace id, span id) with the turn's time (ms)."""
        conversation = self._held.get(key)
        if conversation is None:
            return []
        return [
            (turn, min(o[-1] for o in outcomes.values())) for turn, outcomes in conversation.turns.items()
        ]

    def quiet(self, now_of: Callable[[int], int]) -> list[Conversation]:
        """Changed conversations without a turn for `quiet_seconds`: their records are due. So is one that
        reached `max_turns` and was never written (a session id shared by many may never go quiet)."""
        due = {c.key: c for c in self._quiet.due(now_of, self.config.quiet_seconds * 1000, self._held)}
        for key in list(self._full):
            conversation = self._held.get(key)
            if conversation is None or conversation.emitted or not conversation.pending:
                self._full.discard(key)  # written (or forgotten); a change after puts it back
            else:
                due[key] = conversation
        return self._ordered(due.values())

    def to_checkpoint(self, now_of: Callable[[int], int]) -> list[Conversation]:
        """Conversations with changes older than `quiet_seconds` not in the state topic yet (one that never
        goes quiet, a session id shared by many, would otherwise hold its partition's commits back)."""
        return self._ordered(self._unsaved.due(now_of, self.config.quiet_seconds * 1000, self._held))

    def _ordered(self, conversations: Iterable[Conversation]) -> list[Conversation]:
        """Least recently changed first, as the held conversations are (the order records are written in)."""
        return sorted(conversations, key=lambda c: self._place[c.key])

    def to_forget(self, now_of: Callable[[int], int]) -> list[Conversation]:
        """Conversations written and silent for `forget_seconds`: a later turn starts a new one."""
        forget_ms = self.config.forget_seconds * 1000
        out = []
        for conversation in self._in_order().values():
            if now_of(conversation.partition) - conversation.last_arrival_ms < forget_ms:
                break  # the rest changed later
            if not conversation.pending and conversation.dirty_from is None:
                out.append(conversation)
        return out

    def over_capacity(self) -> list[Conversation]:
        """The least recently changed conversations beyond `max_conversations`: written now and forgotten."""
        extra = len(self._held) - self.config.max_conversations
        return [c for _, c in zip(range(max(0, extra)), self._in_order().values(), strict=False)]

    def forget(self, conversation: Conversation) -> None:
        key = conversation.key
        held = self._held.pop(key, None)
        if held is not None:
            del self._place[key]
            self._full.discard(key)
            self._partitions.discard(held.partition, key)
            for index in self._indexes:
                index.forget(key, held.partition)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        """Partitions now owned by another instance: it resumes their conversations from the state topic. The
        cost of what those partitions hold: the other partitions' conversations are not looked at."""
        gone = set(partitions)
        for key in self._partitions.pop(gone):
            del self._held[key], self._place[key]
            self._full.discard(key)
        for index in self._indexes:
            index.forget_partitions(gone)

    def commit_offsets(self, positions: dict[int, int]) -> dict[int, int]:
        """Per partition, the offset to commit: the next to read, held back to the oldest change not in the
        state topic yet (a restart re-reads from there)."""
        out = dict(positions)
        for partition, offset in positions.items():
            out[partition] = int(min(offset, self._floors.oldest(partition, self._held)))
        return out


def key_of(record: EvaluationRecord) -> Key | None:
    """Which conversation a turn record belongs to: (service, conversation id); None without an id."""
    if not record.session_id:
        return None
    return (record.service_name, record.session_id)
