"""The conversations one instance holds: which are quiet (their records are due), which to checkpoint,
forget or evict, and which turns-topic offsets may be committed. Pure logic on times passed in; no Kafka.

Time is the turns topic's: a turn's arrival is its message's timestamp there, and "now" for a partition is
its stream time (the service base's `StreamClock`): a turn not applied yet was re-keyed after it. So a
restart that re-reads a partition, an instance that lags, or a turn held back in stage 1 by a rebalance or a
crashed member never makes a conversation quiet whose next turn is still on its way.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping

from tracescore.conversations._config import ConversationsConfig
from tracescore.conversations._state import Conversation
from tracescore.model import EvaluationRecord

__all__ = ["ConversationTracker", "Key"]

Key = tuple[str, str]  # (service, conversation id)


class ConversationTracker:
    def __init__(self, config: ConversationsConfig) -> None:
        self.config = config
        # Least recently changed first: eviction takes from the front, forgetting stops at the first too new.
        self._held: OrderedDict[Key, Conversation] = OrderedDict()
        self._unsorted = False  # restored conversations were appended out of order
        self._undecided = _Undecided()
        self.counts: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._held)

    def get(self, key: Key) -> Conversation | None:
        return self._held.get(key)

    def open(self) -> int:
        """Conversations changed since their records were last written."""
        return sum(c.pending for c in self._held.values())

    def undecided(self, partition: int, before_ms: int) -> bool:
        """A conversation of `partition` that started before `before_ms` changed since its records were last
        written (asked every tick after a restore: O(1) amortised, whatever the number held)."""
        return self._undecided.oldest(partition, self._held) < before_ms

    def apply(self, record: EvaluationRecord, partition: int, offset: int, arrival_ms: int) -> None:
        """One turn record read from the turns topic (keyed there by `key_of`)."""
        key = key_of(record)
        if key is None:
            self.counts["no_conversation"] += 1
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
        past_cap = conversation.past_cap
        if conversation.apply(record, offset, arrival_ms, self.config.max_turns):
            self._held.move_to_end(key)
            self._undecided.changed(conversation, self._held)
        self.counts["records_past_cap"] += conversation.past_cap - past_cap

    def restore(self, conversations: Iterable[Conversation]) -> None:
        """Conversations from the state topic. One already held keeps its own, newer state."""
        for conversation in conversations:
            kept = self._held.setdefault(conversation.key, conversation)
            if kept.pending:
                self._undecided.changed(kept, self._held)
            self._unsorted = True

    def _in_order(self) -> OrderedDict[Key, Conversation]:
        """The conversations least recently changed first (sorted once after restores, not per one)."""
        if self._unsorted:
            self._held = OrderedDict(sorted(self._held.items(), key=lambda item: item[1].last_arrival_ms))
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
        quiet_ms = self.config.quiet_seconds * 1000
        full = self.config.max_turns
        return [
            c
            for c in self._held.values()
            if c.pending
            and (
                now_of(c.partition) - c.last_arrival_ms >= quiet_ms
                or (len(c.turns) >= full and not c.emitted)
            )
        ]

    def to_checkpoint(self, now_of: Callable[[int], int]) -> list[Conversation]:
        """Conversations with changes older than `quiet_seconds` not in the state topic yet (one that never
        goes quiet, a session id shared by many, would otherwise hold its partition's commits back)."""
        quiet_ms = self.config.quiet_seconds * 1000
        return [
            c
            for c in self._held.values()
            if c.dirty_from is not None and now_of(c.partition) - c.dirty_since_ms >= quiet_ms
        ]

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
        self._held.pop(conversation.key, None)

    def forget_partitions(self, partitions: Iterable[int]) -> None:
        """Partitions now owned by another instance: it resumes their conversations from the state topic."""
        gone = set(partitions)
        for key in [k for k, c in self._held.items() if c.partition in gone]:
            del self._held[key]
        self._undecided.forget(gone)

    def commit_offsets(self, positions: dict[int, int]) -> dict[int, int]:
        """Per partition, the offset to commit: the next to read, held back to the oldest change not in the
        state topic yet (a restart re-reads from there)."""
        out = dict(positions)
        for conversation in self._held.values():
            held = conversation.dirty_from
            if held is not None and conversation.partition in out:
                out[conversation.partition] = min(out[conversation.partition], held)
        return out


def key_of(record: EvaluationRecord) -> Key | None:
    """Which conversation a turn record belongs to: (service, conversation id); None without an id."""
    if not record.session_id:
        return None
    return (record.service_name, record.session_id)


class _Undecided:
    """Per partition, the changed conversations by when they started (a heap), for `undecided`: one entry a
    conversation, pushed when it changes; an entry of one since written or forgotten is dropped when it comes
    to the top, and all of them at once when the entries outnumber the held conversations twice over."""

    def __init__(self) -> None:
        self._heaps: dict[int, list[tuple[int, Key]]] = {}
        self._entry: dict[Key, int] = {}  # key -> the started_ms of its live entry
        self._size = 0

    def changed(self, conversation: Conversation, held: Mapping[Key, Conversation]) -> None:
        key, started_ms = conversation.key, conversation.started_ms
        if self._entry.get(key) == started_ms:
            return  # its entry is still in the heap
        self._entry[key] = started_ms
        heapq.heappush(self._heaps.setdefault(conversation.partition, []), (started_ms, key))
        self._size += 1
        if self._size > 2 * len(held) + 1_000:
            self._trim(held)

    def oldest(self, partition: int, held: Mapping[Key, Conversation]) -> float:
        """When the oldest changed conversation of `partition` started (ms; infinity: none)."""
        heap = self._heaps.get(partition, [])
        while heap:
            started_ms, key = heap[0]
            if _live(held.get(key), started_ms, partition):
                return started_ms
            heapq.heappop(heap)
            self._size -= 1
            if self._entry.get(key) == started_ms:
                del self._entry[key]
        return float("inf")

    def forget(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            for started_ms, key in self._heaps.pop(partition, []):
                self._size -= 1
                if self._entry.get(key) == started_ms:
                    del self._entry[key]

    def _trim(self, held: Mapping[Key, Conversation]) -> None:
        self._entry.clear()
        for partition, heap in self._heaps.items():
            heap[:] = [(s, key) for s, key in heap if _live(held.get(key), s, partition)]
            heapq.heapify(heap)
            self._entry.update((key, s) for s, key in heap)
        self._size = sum(map(len, self._heaps.values()))


def _live(conversation: Conversation | None, started_ms: int, partition: int) -> bool:
    """The entry (started_ms, its key) on `partition` is the held conversation's, and it changed."""
    return (
        conversation is not None
        and conversation.pending
        and conversation.started_ms == started_ms
        and conversation.partition == partition
    )
