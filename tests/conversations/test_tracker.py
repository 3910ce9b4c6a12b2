"""The conversation logic without Kafka: what a conversation record says, each turn counted once, tiers kept
apart, bounded memory, quiet detection, revisions and the state a restart resumes from."""

from __future__ import annotations

import random
from collections import OrderedDict
from datetime import timedelta
from typing import Any

import pytest
from conversation_turns import T0, ms, turn

from tracescore.conversations import Conversation, ConversationsConfig, ConversationTracker, wilson
from tracescore.conversations._stored import ConversationState
from tracescore.conversations._tracker import Key
from tracescore.model import ConversationRecord, EvaluationRecord, MetricStatus

QUIET_S = 60.0


def tracker(**settings: Any) -> ConversationTracker:
    return ConversationTracker(ConversationsConfig(quiet_seconds=QUIET_S, forget_seconds=600.0, **settings))


def feed(t: ConversationTracker, records: list[EvaluationRecord], partition: int = 0, start: int = 0) -> None:
    """Read `records` from one partition, one a second from T0, at offsets from `start`."""
    for i, record in enumerate(records):
        t.apply(record, partition, start + i, ms(T0) + 1000 * (start + i))


def records_of(
    t: ConversationTracker, key: tuple[str, str] = ("chat-api", "c-1")
) -> list[ConversationRecord]:
    conversation = t.get(key)
    assert conversation is not None
    return [record for _, record in conversation.records(0.95, T0)]


def test_a_conversation_record_counts_its_turns_and_names_the_worst() -> None:
    t = tracker()
    feed(t, [turn(1, 1.0), turn(2, 0.0), turn(3, 0.8)])
    [record] = records_of(t)
    assert (record.turns, record.turns_scored, record.turns_passed, record.turns_flagged) == (3, 3, 2, 1)
    assert record.score == pytest.approx(2 / 3) and record.label == "flagged" and record.complete
    assert (record.share_lower, record.share_upper) == pytest.approx(wilson(2, 3, 0.95))
    assert record.worst_turn is not None and record.worst_turn.trace_id == f"{2:032x}"
    assert record.worst_turn.reason == "turn 2: claim without evidence"
    assert record.trace_ids == [f"{n:032x}" for n in (1, 2, 3)]
    assert "2 of 3 scored turns pass faithfulness" in record.reason


def test_a_one_turn_conversation_says_turn_not_turns() -> None:
    t = tracker()
    feed(t, [turn(1, 1.0)])
    [record] = records_of(t)
    assert record.reason is not None and record.reason.startswith("1 of 1 scored turn pass faithfulness")


def test_the_worst_turn_is_a_flagged_one_before_a_lower_score_that_passes() -> None:
    t = tracker()
    partly = turn(1, 0.5).model_copy(update={"label": "partially_faithful"})  # passes the label rule
    invented = turn(2, 0.75).model_copy(update={"label": "hallucinated", "reason": "one claim invented"})
    feed(t, [partly, invented])
    [record] = records_of(t)
    assert record.worst_turn is not None and record.worst_turn.trace_id == f"{2:032x}"
    assert record.worst_turn.reason == "one claim invented" and record.turns_flagged == 1


def test_wilson_interval_of_one_in_two() -> None:
    # The textbook value: 1 success in 2 trials at 95% is [0.095, 0.905].
    assert wilson(1, 2, 0.95) == pytest.approx((0.0945, 0.9055), abs=1e-4)
    assert wilson(3, 3, 0.95)[1] == 1.0 and wilson(0, 3, 0.95)[0] == 0.0


def test_a_turn_is_never_counted_twice() -> None:
    t = tracker()
    revised = turn(2, 1.0, revision=1)  # late spans changed turn 2; re-scored, now faithful
    duplicate = turn(1, 1.0)  # the same record again (Kafka is at-least-once)
    stale = turn(2, 0.0, revision=0)  # the replaced revision, read late
    feed(t, [turn(1, 1.0), turn(2, 0.0), revised, duplicate, stale])
    [record] = records_of(t)
    assert (record.turns, record.turns_scored, record.turns_passed) == (2, 2, 2)
    assert record.label == "passed"


def test_judges_and_samples_are_never_mixed() -> None:
    """Offline records of every turn, the LLM baseline's of every turn (the conversation was drawn whole),
    and an LLM cascade pick of one turn of another conversation: one record per tier."""
    t = tracker()
    llm = "openai:gpt-4o-mini"
    feed(
        t,
        [
            turn(1, 1.0), turn(2, 0.9), turn(1, 1.0, judge=llm, selection="baseline"),
            turn(2, 0.0, judge=llm, selection="baseline"),
            turn(3, 0.3, conversation="c-2"), turn(4, 1.0, conversation="c-2"),
            turn(3, 0.0, conversation="c-2", judge=llm, selection="cascade"),
        ],
    )  # fmt: skip
    offline, baseline = records_of(t)
    assert (offline.judge, offline.selection, offline.label, offline.turns_scored) == (
        "offline",
        None,
        "passed",
        2,
    )
    assert (baseline.annotator_kind, baseline.selection, baseline.label) == ("LLM", "baseline", "flagged")
    assert baseline.complete and baseline.turns_judged == 2
    offline2, cascade = records_of(t, ("chat-api", "c-2"))
    assert (offline2.turns, offline2.turns_flagged) == (2, 1)
    assert (cascade.selection, cascade.turns, cascade.turns_judged, cascade.complete) == (
        "cascade",
        2,
        1,
        False,
    )


def test_a_conversation_with_no_scored_turn_says_why() -> None:
    t = tracker()
    feed(t, [turn(1, None, status=MetricStatus.NOT_APPLICABLE), turn(2, None, status=MetricStatus.ERROR)])
    [record] = records_of(t)
    assert record.score is None and record.label is None and record.worst_turn is None
    assert record.status is MetricStatus.ERROR and record.turns == 2 and record.turns_scored == 0
    assert record.reason.startswith("no turn scored for faithfulness")


def test_five_hundred_turns_keep_the_cap_and_count_the_rest() -> None:
    t = tracker(max_turns=200)
    feed(t, [turn(n, 1.0 if n % 50 else 0.0) for n in range(1, 501)])
    [record] = records_of(t)
    assert record.turns == 200 and record.records_past_cap == 300
    assert record.turns_flagged == 4  # turns 50, 100, 150, 200: the first 200 are the ones kept
    assert t.counts["records_past_cap"] == 300
    # Such a conversation may never go quiet: written once it is full, then again only when quiet.
    [full] = t.quiet(lambda _: ms(T0))
    full.written(full.due(0.95, T0))
    feed(t, [turn(1000, 1.0)], start=500)
    assert full.pending and t.quiet(lambda _: ms(T0)) == []


def test_a_quiet_conversation_is_due_and_a_later_turn_revises_it() -> None:
    t = tracker()
    feed(t, [turn(1, 1.0), turn(2, 1.0)])
    [conversation] = t.quiet(lambda _: ms(T0) + 1000 * (1 + int(QUIET_S)))
    assert t.quiet(lambda _: ms(T0) + 1000 * int(QUIET_S)) == [], "not quiet a second before"
    [(tier, first, digest)] = conversation.due(0.95, T0)
    conversation.written([(tier, first, digest)])
    assert (first.revision, first.supersedes) == (0, None)
    assert conversation.due(0.95, T0) == [], "nothing changed since it was written"
    feed(t, [turn(3, 0.0, at=T0 + timedelta(days=1))], start=5)
    [(_, second, _)] = conversation.due(0.95, T0)
    assert (second.revision, second.supersedes, second.turns, second.label) == (1, 0, 3, "flagged")
    assert second.started_at == first.started_at


def test_the_state_snapshot_restores_the_conversation_and_skips_what_it_already_holds() -> None:
    t = tracker()
    feed(t, [turn(1, 1.0), turn(2, 0.0)])
    conversation = t.get(("chat-api", "c-1"))
    assert conversation is not None
    conversation.written(conversation.due(0.95, T0))
    restored = ConversationState.of(conversation).conversation(partition=0)
    assert restored.records(0.95, T0) == conversation.records(0.95, T0)
    assert not restored.pending and restored.emitted == conversation.emitted
    fresh = tracker()
    fresh.restore([restored])
    feed(fresh, [turn(1, 1.0), turn(2, 1.0, revision=1)])  # offsets 0 and 1: already in the snapshot
    assert not restored.pending, "a replay of what the snapshot holds changes nothing"
    feed(fresh, [turn(2, 1.0, revision=1)], start=2)
    assert restored.pending and records_of(fresh)[0].label == "passed"


def test_memory_is_bounded_least_recently_changed_first() -> None:
    t = tracker(max_conversations=2)
    feed(t, [turn(1, 1.0, "a"), turn(2, 1.0, "b"), turn(3, 1.0, "c"), turn(4, 1.0, "a")])
    assert [c.conversation_id for c in t.over_capacity()] == ["b"]
    for conversation in t.over_capacity():
        t.forget(conversation)
    assert len(t) == 2 and t.get(("chat-api", "b")) is None


def test_turns_without_a_conversation_id_are_counted_apart() -> None:
    t = tracker()
    feed(t, [turn(1, 1.0, conversation=None)])
    assert len(t) == 0 and t.counts["no_conversation"] == 1


def test_offsets_are_committed_no_further_than_the_oldest_change_not_in_the_state_topic() -> None:
    t = tracker()
    feed(t, [turn(1, 1.0, "a"), turn(2, 1.0, "b")], start=10)
    assert t.commit_offsets({0: 12}) == {0: 10}
    a = t.get(("chat-api", "a"))
    assert a is not None
    a.dirty_from = None  # in the state topic now
    assert t.commit_offsets({0: 12}) == {0: 11}


def test_a_conversation_older_than_a_restore_is_undecided_while_it_waits_for_its_record() -> None:
    """After a restore, its partition's found records are kept while this says so (the service base asks)."""
    t = tracker()
    restore_ms = ms(T0) + 10_000
    feed(t, [turn(1, 1.0, "old"), turn(2, 1.0, "other")])  # started before the restore, on partition 0
    assert t.undecided(0, restore_ms) and not t.undecided(1, restore_ms)
    assert not t.undecided(0, ms(T0)), "none started before T0"
    old, other = t.get(("chat-api", "old")), t.get(("chat-api", "other"))
    assert old is not None and other is not None
    for conversation in (old, other):
        conversation.written(conversation.due(0.95, T0))
    assert not t.undecided(0, restore_ms)
    t.apply(turn(3, 1.0, "new"), 0, 5, restore_ms + 1)  # started after the restore
    assert not t.undecided(0, restore_ms)
    t.apply(turn(4, 1.0, "old"), 0, 6, restore_ms + 2)  # the old one changed again: waits again
    assert t.undecided(0, restore_ms)
    t.forget(old)
    assert not t.undecided(0, restore_ms)
    t.restore([Conversation("chat-api", "back", "/chat", ms(T0), 0, ms(T0), pending=True)])
    assert t.undecided(0, restore_ms)
    t.forget_partitions([0])
    assert not t.undecided(0, restore_ms)


def test_undecided_agrees_with_every_held_conversation_through_changes_writes_and_forgets() -> None:
    t, rng = tracker(), random.Random(7)
    for step in range(3_000):
        name, partition = f"c-{rng.randrange(300)}", rng.randrange(3)
        key, action = ("chat-api", name), rng.random()
        conversation = t.get(key)
        if action < 0.5 or conversation is None:
            if conversation is None or conversation.partition == partition:
                t.apply(turn(step, 1.0, name), partition, step, ms(T0) + 1_000 * step)
        elif action < 0.8:
            conversation.written(conversation.due(0.95, T0))
        else:
            t.forget(conversation)
        before = ms(T0) + 1_000 * rng.randrange(step + 1)
        for p in range(3):
            expected = any(c.pending and c.partition == p and c.started_ms < before for c in t.held())
            assert t.undecided(p, before) == expected, step


class _Watched(OrderedDict[Key, Conversation]):
    """The held conversations, counting every one looked at."""

    looked = 0

    def values(self):  # type: ignore[no-untyped-def, override]
        self.looked += len(self)
        return super().values()

    def items(self):  # type: ignore[no-untyped-def, override]
        self.looked += len(self)
        return super().items()

    def get(self, key, default=None):  # type: ignore[no-untyped-def, override]
        self.looked += 1
        return super().get(key, default)


def test_undecided_looks_at_a_few_conversations_a_tick_with_100_000_open() -> None:
    """Asked every tick after a restore: it looked at every held conversation each time (issue 33's 100,000
    open conversations: 100,000 a tick); now only at those decided since the last tick, and one more."""
    t = tracker()
    n, started = 100_000, ms(T0)
    t.restore(
        Conversation("chat-api", f"c-{i}", "/chat", started + i, i % 6, started + i, pending=True)
        for i in range(n)
    )
    held = t._held = _Watched(t._held)
    decided, ticks = 0, 0
    for written in range(0, n, 5_000):  # a tick: the next 5,000 written (oldest first), every partition asked
        for i in range(written, written + 5_000):
            conversation = held[("chat-api", f"c-{i}")]
            conversation.pending = False
            decided += 1
        ticks += 1
        assert all(t.undecided(p, started + n) for p in range(6)) == (decided < n)
    assert not any(t.undecided(p, started + n) for p in range(6))
    assert held.looked <= decided + 6 * (ticks + 1), held.looked
