"""What the service asks every tick of the conversation tracker (which conversations are quiet, which to save,
which to forget, the offsets to commit, whether any is open) and of grounding (which conversations to look at
again): the same answers as a pass over every held conversation, for the work of what changed or became due
(issue 33: 100,000 open conversations)."""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conversation_turns import T0, ms, turn
from grounding_turns import Harness, evidence_of, interaction

from tracescore.conversations import Conversation, ConversationsConfig, ConversationTracker, _index
from tracescore.conversations._grounder import _CONVERSATIONS_PER_TICK as PER_TICK
from tracescore.conversations._stored import ConversationState
from tracescore.conversations._tracker import Key

QUIET_MS, FORGET_MS, MAX_TURNS = 60_000, 600_000, 3


def tracker(**settings: Any) -> ConversationTracker:
    return ConversationTracker(
        ConversationsConfig(
            quiet_seconds=QUIET_MS / 1000, forget_seconds=FORGET_MS / 1000, max_turns=MAX_TURNS, **settings
        )
    )


# -- the straightforward passes, as the tracker answered before ---------------------------------------------
def quiet_by_pass(t: ConversationTracker, now_of: Callable[[int], int]) -> list[Conversation]:
    return [
        c
        for c in t.held()
        if c.pending
        and (
            now_of(c.partition) - c.last_arrival_ms >= QUIET_MS
            or (len(c.turns) >= MAX_TURNS and not c.emitted)
        )
    ]


def to_checkpoint_by_pass(t: ConversationTracker, now_of: Callable[[int], int]) -> list[Conversation]:
    return [
        c for c in t.held() if c.dirty_from is not None and now_of(c.partition) - c.dirty_since_ms >= QUIET_MS
    ]


def commit_offsets_by_pass(t: ConversationTracker, positions: dict[int, int]) -> dict[int, int]:
    out = dict(positions)
    for c in t.held():
        if c.dirty_from is not None and c.partition in out:
            out[c.partition] = min(out[c.partition], c.dirty_from)
    return out


def agrees(t: ConversationTracker, now_of: Callable[[int], int], step: int) -> None:
    held = t.held()
    assert t.quiet(now_of) == quiet_by_pass(t, now_of), step
    assert t.to_checkpoint(now_of) == to_checkpoint_by_pass(t, now_of), step
    positions = {p: 10_000 + p for p in range(4)}
    assert t.commit_offsets(positions) == commit_offsets_by_pass(t, positions), step
    assert t.any_open() == any(c.pending for c in held), step
    for p in range(4):
        before = now_of(p) - QUIET_MS
        assert t.undecided(p, before) == any(
            c.pending and c.partition == p and c.started_ms < before for c in held
        )


@pytest.mark.parametrize("slack", [1_000, -120], ids=["lazily pruned", "rebuilt often"])
def test_every_tick_answers_as_a_pass_over_every_held_conversation_would(
    slack: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random turns (arrivals out of order, a partition's stream time going back after a rebalance), records
    written, states saved, conversations forgotten, evicted, restored and partitions revoked, with the answers
    compared after every step."""
    monkeypatch.setattr(_index, "_SLACK", slack)  # -120: the indexes rebuilt at almost every change
    for seed in range(6):
        rng = random.Random(seed)
        t = tracker(max_conversations=rng.choice([40, 1_000]))
        now = dict.fromkeys(range(4), ms(T0))
        offsets = dict.fromkeys(range(4), 0)

        def now_of(partition: int, now: dict[int, int] = now) -> int:
            return now[partition]

        for step in range(1_500):
            action = rng.random()
            name = f"c-{rng.randrange(80)}"
            partition = int(name[2:]) % 4  # a conversation's partition is its key's
            conversation = t.get(("chat-api", name))
            if action < 0.45:
                arrival = now[partition] + rng.randrange(-90_000, 30_000)
                t.apply(turn(rng.randrange(6), rng.random(), name), partition, offsets[partition], arrival)
                offsets[partition] += 1
            elif action < 0.6:  # a tick's quiet conversations written, as the service does
                for quiet in t.quiet(now_of):
                    if rng.random() < 0.8:
                        quiet.written(quiet.due(0.95, T0))
            elif action < 0.7:  # a checkpoint's states saved
                for unsaved in t.to_checkpoint(now_of) + [c for c in t.held() if rng.random() < 0.05]:
                    unsaved.dirty_from = None
            elif action < 0.75 and conversation is not None:
                t.forget(conversation)
            elif action < 0.8:
                for old in t.to_forget(now_of) + t.over_capacity():
                    t.forget(old)
            elif action < 0.83 and conversation is not None:  # revoked, then read back from its state
                snapshot = ConversationState.of(conversation).conversation(partition)
                t.forget_partitions([partition])
                t.restore([snapshot])
            elif action < 0.85:
                started = now[partition] - rng.randrange(100_000)
                pending = rng.random() < 0.7
                t.restore(
                    [Conversation("chat-api", name, "/chat", started, partition, started, pending=pending)]
                )
            elif action < 0.97:
                now[partition] += rng.randrange(0, 40_000)
            else:
                now[partition] -= rng.randrange(0, 20_000)  # a new owner's stream time, behind the last one's
            agrees(t, now_of, step)


class _Counted(OrderedDict[Key, Conversation]):
    """The held conversations, counting every one looked at (read by key or met in a pass)."""

    looked = 0

    def _counted(self, it: Iterator[Any]) -> Iterator[Any]:
        for item in it:
            self.looked += 1
            yield item

    def values(self):  # type: ignore[no-untyped-def, override]
        return self._counted(iter(super().values()))

    def items(self):  # type: ignore[no-untyped-def, override]
        return self._counted(iter(super().items()))

    def __iter__(self):  # type: ignore[no-untyped-def]
        return self._counted(super().__iter__())

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        self.looked += 1
        return super().get(key, default)


def test_a_tick_looks_at_what_changed_or_became_due_not_at_100_000_open_conversations() -> None:
    """Each tick's quiet conversations, states to save, conversations to forget and offsets to commit were
    each a pass over every held one (issue 33's 100,000 open conversations: 300,000 looks a tick); now a tick
    looks at the conversations that changed or became due since the last, a few times each."""
    t, rng = tracker(max_conversations=200_000), random.Random(3)
    n, partitions, start = 100_000, 6, ms(T0)
    t.restore(
        Conversation("chat-api", f"c-{i}", "/chat", start + i, i % partitions, start + 10 * i, pending=True)
        for i in range(n)
    )
    t.over_capacity()  # the restored ones put in order once, as the first tick does
    held = t._held = _Counted(t._held)
    now = start + QUIET_MS
    offset, changed, due = n, 0, 0
    for _ in range(20):  # a tick: 5,000 more conversations quiet, 50 changed by a new turn
        now += 50_000
        for _ in range(50):
            i = rng.randrange(n)
            t.apply(turn(offset, 1.0, f"c-{i}"), i % partitions, offset, now - QUIET_MS // 2)
            offset += 1
            changed += 1

        def now_of(_: int, at: int = now) -> int:
            return at

        quiet = t.quiet(now_of)
        saved = t.to_checkpoint(now_of)
        due += len(quiet) + len(saved)
        for old in t.to_forget(now_of):
            t.forget(old)
            due += 1
        assert not t.over_capacity()
        assert t.commit_offsets(dict.fromkeys(range(partitions), offset)) is not None
        assert t.any_open()
        assert all(t.undecided(p, now) for p in range(partitions))
        for conversation in quiet:
            conversation.pending = False  # written, as the service does at the tick's checkpoint
        for conversation in saved:
            conversation.dirty_from = None
    assert due >= 90_000, "most of them went quiet"
    # Each due or changed conversation looked at a few times over its life, plus a few per partition a tick.
    assert held.looked <= 4 * (due + changed) + 20 * partitions * 20, (held.looked, due, changed)


def test_grounding_takes_the_conversations_to_look_at_again_without_a_pass_over_every_one_held() -> None:
    """A tick's conversations whose turns changed were found by a pass over every conversation grounding
    holds (every one whose turns' documents it keeps: 100,000 a tick); now they are taken from those marked,
    least recently changed first as before, and none is lost."""
    harness = Harness()
    store, n = harness.grounder.store, 100_000
    evidence = evidence_of(interaction(1, conversation="c"))
    for c in range(n):
        store.evidence(evidence.model_copy(update={"session_id": f"c-{c}"}), c % 6, c, ms(T0) + c)
    held = store._held = _Counted(store._held)
    marked = store.open()
    assert marked == len(held) > 50_000, (
        "every one held is marked (the oldest evicted past max_evidence_chars)"
    )
    for _ in range(10):
        harness.grounder.tick(T0, lambda _: ms(T0) + n)
    assert marked - store.open() == 10 * PER_TICK, "so many a tick, the rest still open"
    assert held.looked <= 3 * 10 * PER_TICK, held.looked
    first = n - marked + 10 * PER_TICK  # the least recently changed still marked
    assert [h.key[1] for h in store.rechecks(3)] == [f"c-{c}" for c in range(first, first + 3)]


class _CountedAll(_Counted):
    """As `_Counted`, also counting every conversation taken out by key (a revoke removes each it forgets)."""

    def __delitem__(self, key):  # type: ignore[no-untyped-def]
        self.looked += 1
        super().__delitem__(key)

    def pop(self, key, *default):  # type: ignore[no-untyped-def, override]
        self.looked += 1
        return super().pop(key, *default)


def test_a_revoke_looks_at_what_the_revoked_partition_holds_not_at_every_conversation() -> None:
    """Revoking one partition of 50 walked every held conversation, in the tracker, in each of its time
    indexes' reached entries and in grounding's store (issue 33: 100,000 open conversations, a rebalance); now
    it costs what that partition holds."""
    partitions, n = 50, 100_000
    t = tracker(max_conversations=200_000)
    start = ms(T0)
    t.restore(
        Conversation("chat-api", f"c-{i}", "/chat", start + i, i % partitions, start + i, pending=True)
        for i in range(n)
    )
    t.over_capacity()
    assert len(t.quiet(lambda _: start + n + QUIET_MS)) == n, "every one reached in the quiet index"
    harness = Harness()
    store = harness.grounder.store
    evidence = evidence_of(interaction(1, conversation="c"))
    for c in range(20_000):
        store.evidence(evidence.model_copy(update={"session_id": f"c-{c}"}), c % partitions, c, start + c)
    on_7 = sum(h.partition == 7 for h in store.held())
    assert on_7 >= 20_000 // partitions // 2, "grounding holds conversations of the revoked partition too"
    t._held = _CountedAll(t._held)
    for index in t._indexes:
        index._due = _CountedAll(index._due)  # type: ignore[assignment]
    store._held = _CountedAll(store._held)
    before = len(t), len(store)
    t.forget_partitions([7])
    harness.grounder.forget_partitions({7})
    looked = t._held.looked + sum(index._due.looked for index in t._indexes) + store._held.looked
    assert (len(t), len(store)) == (before[0] - n // partitions, before[1] - on_7)
    assert not any(c.partition == 7 for c in t.held()) and not any(h.partition == 7 for h in store.held())
    # The tracker removes each of the partition's 2,000, grounding each of its own (at most 400).
    assert looked <= 2 * (n // partitions + on_7) + 20, looked
    assert t.quiet(lambda _: start + n + QUIET_MS) == t.held(), "the other partitions' still answered"
