"""The conversation service's logic without Kafka: memory stays bounded with 100,000 open conversations
(the least recently changed are written early, counted, and their state deleted), and a record found already
written after a crash is marked written, not written again."""

from __future__ import annotations

from datetime import timedelta

from conversation_turns import T0, ms, turn
from kafka.consumer.fetcher import ConsumerRecord

from tracescore.conversations import ConversationsConfig, ConversationStats, ConversationTracker
from tracescore.conversations._logic import ConversationLogic, Written
from tracescore.conversations._stored import encode_key


def message(value: bytes, offset: int, partition: int = 0, timestamp: int | None = None) -> ConsumerRecord:
    at = timestamp or ms(T0) + offset
    return ConsumerRecord("turns", partition, 0, offset, at, 0, None, value, [], None, -1, len(value), -1)


def logic(**config: object) -> tuple[ConversationLogic, list[Written]]:
    cfg = ConversationsConfig(spans_topic=None, **config)  # type: ignore[arg-type]
    written: list[Written] = []
    skipped: list[str] = []
    the_logic = ConversationLogic(
        cfg,
        ConversationTracker(cfg),
        ConversationStats(),
        skip=lambda reason, detail, count=1: skipped.append(reason),
        on_written=written.append,
        clock=lambda: T0 + timedelta(days=1),
    )
    return the_logic, written


def test_100000_open_conversations_stay_within_the_cap_the_oldest_written_early_and_counted() -> None:
    cap, opened = 50_000, 100_000
    the_logic, written = logic(max_conversations=cap)
    # One turn's JSON with its conversation and trace filled in per message (the service reads each message
    # whole, as before): a model dumped 100,000 times was an eighth of the test's time.
    marks = {"session_id": "c-SESSION", "trace_id": "f" * 32}
    template = turn(1, 1.0).model_copy(update=marks).model_dump_json()
    assert template.count(marks["session_id"]) == template.count(marks["trace_id"]) == 1
    for n in range(opened):
        value = template.replace(marks["session_id"], f"c-{n}").replace(marks["trace_id"], f"{n:032x}")
        the_logic.apply(message(value.encode(), n, partition=n % 6), replay=False)
    assert len(the_logic.tracker) == opened
    the_logic.tick(T0 + timedelta(days=1), stream_time=lambda partition: 0)  # none quiet: only the cap
    outputs = the_logic.outputs({})
    the_logic.written(outputs, {})
    assert len(the_logic.tracker) == cap, "memory holds the cap, not every open conversation"
    assert the_logic.stats.evicted == written[0].evicted == opened - cap
    evicted = {r.conversation_id for r in written[0].records}
    assert evicted == {f"c-{n}" for n in range(opened - cap)}, "the least recently changed first"
    saves = the_logic.to_save()
    assert len(saves) == opened - cap and all(state is None for _, _, state in saves)
    assert {key for _, key, _ in saves} == {encode_key(("chat-api", c)) for c in evicted}


def test_a_record_found_on_the_topic_after_a_crash_is_marked_written_not_written_again() -> None:
    the_logic, written = logic(quiet_seconds=1.0)
    for n in range(3):
        the_logic.apply(message(turn(n + 1, 1.0).model_dump_json().encode(), n), replay=False)
    the_logic.tick(T0 + timedelta(days=1), stream_time=lambda partition: ms(T0 + timedelta(days=1)))
    [output] = the_logic.outputs({})
    found = {output.id: output.digest}
    the_logic.written([output], found)
    assert (written[0].records, written[0].found) == ([], 1)
    [(_, _, state)] = the_logic.to_save()
    assert state is not None and [e.revision for e in state.emitted] == [0]  # type: ignore[attr-defined]
    the_logic.tick(T0 + timedelta(days=1), stream_time=lambda partition: ms(T0 + timedelta(days=1)))
    assert the_logic.outputs({}) == [], "nothing due: the state knows the record"
