"""`ConversationService` on its own thread against the real broker, for the conversation service tests."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from kafka import KafkaProducer

from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import ConversationRecord, EvaluationRecord, read_conversation_record
from tracescore.testing.kafka_topics import read_topic


def config(bootstrap: str, prefix: str, **overrides: object) -> ConversationsConfig:
    values: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "evaluations_topic": f"{prefix}.evaluations",
        "conversations_topic": f"{prefix}.conversations",
        "turns_topic": f"{prefix}.turns",
        "state_topic": f"{prefix}.state",
        "spans_topic": f"{prefix}.spans",
        # The test's own: the default topic on the shared broker holds other tests' turns' documents.
        "evidence_topic": f"{prefix}.evidence",
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
