"""`ConversationService` on the real broker: a turn after the record was written revises it, across a
restart; a conversation whose turns straddle a restart is recorded once, whole; two instances split the
conversations and record each once; bad records are counted, never a stop."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from conversation_turns import read_topic, turn
from kafka import KafkaProducer

from tracescore.consume import decode_message
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.emit import EVALUATION_SPANS_HEADER
from tracescore.model import ConversationRecord, EvaluationRecord, read_conversation_record

pytestmark = pytest.mark.kafka


def config(bootstrap: str, prefix: str, **overrides: object) -> ConversationsConfig:
    values: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "evaluations_topic": f"{prefix}.evaluations",
        "conversations_topic": f"{prefix}.conversations",
        "turns_topic": f"{prefix}.turns",
        "state_topic": f"{prefix}.state",
        "spans_topic": f"{prefix}.spans",
        "group_id": f"{prefix}.conversations",
        "quiet_seconds": 2.0,
        "tick_seconds": 0.2,
    }
    return ConversationsConfig(**{**values, **overrides})


def produce(bootstrap: str, topic: str, records: list[EvaluationRecord | bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for record in records:
        if isinstance(record, EvaluationRecord):
            key, value = record.to_kafka()
        else:
            key, value = b"x", record
        producer.send(topic, key=key, value=value).get(30)
    producer.close()


class Running:
    """A ConversationService on its own thread, stopped and joined on exit."""

    def __init__(self, cfg: ConversationsConfig) -> None:
        self.written: list[ConversationRecord] = []
        self.service = ConversationService(cfg, on_record=self.written.append)
        self._thread = threading.Thread(target=self.service.run, daemon=True)

    def __enter__(self) -> Running:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.service.stop()
        self._thread.join(60)
        assert not self._thread.is_alive()


def wait(condition, timeout_s: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    done = threading.Event()
    deadline = datetime.now(UTC).timestamp() + timeout_s
    while not condition():
        if datetime.now(UTC).timestamp() > deadline:
            raise AssertionError("condition not met in time")
        done.wait(0.1)


def on_topic(bootstrap: str, cfg: ConversationsConfig) -> list[ConversationRecord]:
    return [read_conversation_record(m.value) for m in read_topic(bootstrap, cfg.conversations_topic)]


def test_a_later_turn_revises_the_record_across_a_restart(bootstrap: str, topic_prefix: str) -> None:
    cfg = config(bootstrap, topic_prefix)
    produce(bootstrap, cfg.evaluations_topic, [turn(1, 1.0), turn(2, 1.0)])
    with Running(cfg) as first:
        wait(lambda: len(first.written) == 1)
        # The first turn of another conversation, read but not quiet yet when the instance stops.
        produce(bootstrap, cfg.evaluations_topic, [turn(10, 1.0, "c-2")])
        wait(lambda: first.service.stats.turn_records == 3)
    [record] = first.written
    assert (record.revision, record.turns, record.label) == (0, 2, "passed")

    # Days later in the conversation's life (within forget_seconds): an unfaithful third turn, and the
    # second conversation's next turn.
    produce(bootstrap, cfg.evaluations_topic, [turn(3, 0.0), turn(11, 1.0, "c-2")])
    with Running(cfg) as second:
        wait(lambda: len(second.written) == 2)
    revised = next(r for r in second.written if r.conversation_id == "c-1")
    assert (revised.revision, revised.supersedes, revised.turns, revised.label) == (1, 0, 3, "flagged")
    assert revised.started_at == record.started_at
    c2 = next(r for r in second.written if r.conversation_id == "c-2")
    assert (c2.revision, c2.turns) == (0, 2), "recorded once, whole, though its turns straddle the restart"
    # Each record also went out as an evaluation span under its conversation's last turn, marked so that
    # `tracescore consume` skips it.
    spans = [
        (span, dict(m.headers))
        for m in read_topic(bootstrap, str(cfg.spans_topic))
        for span in decode_message(m.value)
    ]
    assert len(spans) == 3 and all(headers.get(EVALUATION_SPANS_HEADER) == b"1" for _, headers in spans)
    last = next(span for span, _ in spans if span.attributes.get("tracescore.evaluation.revision") == 1)
    assert (last.name, last.trace_id, last.parent_span_id) == (
        "evaluation conversation_faithfulness",
        f"{3:032x}",
        f"{3:016x}",
    )
    assert last.attributes["session.id"] == "c-1"
    assert sorted((r.conversation_id, r.revision) for r in on_topic(bootstrap, cfg)) == [
        ("c-1", 0),
        ("c-1", 1),
        ("c-2", 0),
    ]


def test_two_instances_split_the_conversations_and_record_each_once(
    bootstrap: str, topic_prefix: str
) -> None:
    cfg = config(bootstrap, topic_prefix)
    conversations = [f"c-{i}" for i in range(8)]
    with Running(cfg) as first, Running(cfg) as second:
        wait(
            lambda: (
                first.service.first_assigned_at is not None and second.service.first_assigned_at is not None
            )
        )
        produce(
            bootstrap,
            cfg.evaluations_topic,
            [turn(10 * i + n, 1.0, c) for i, c in enumerate(conversations) for n in range(3)],
        )
        wait(lambda: len(first.written) + len(second.written) == len(conversations))
    written = first.written + second.written
    assert sorted(r.conversation_id for r in written) == conversations
    assert all(r.turns == 3 for r in written)
    assert first.written and second.written, "both instances owned some"


def test_bad_records_are_counted_and_the_service_goes_on(bootstrap: str, topic_prefix: str) -> None:
    cfg = config(bootstrap, topic_prefix, max_turns=5)
    produce(
        bootstrap,
        cfg.evaluations_topic,
        [b"not json", b'{"schema_version": 99}', turn(1, 1.0, conversation=None)]
        + [turn(n, 1.0, "shared-by-everyone") for n in range(1, 9)],
    )
    with Running(cfg) as running:
        wait(lambda: len(running.written) == 1)
    [record] = running.written
    assert (record.turns, record.records_past_cap) == (5, 3)
    stats = running.service.stats
    assert stats.skipped == {
        "invalid_record": 1,
        "unknown_schema_version": 1,
        "no_conversation": 1,
        "records_past_cap": 3,
    }
