"""`ConversationService` against the real broker for the conversation service tests: on its own thread, or
`tracescore conversations` as a process of its own (the crash and stop tests)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from service_processes import IDLE_TIMEOUT_S, SESSION_TIMEOUT_MS, ServiceProcess

from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import (
    ConversationRecord,
    EvaluationRecord,
    read_conversation_record,
    read_evaluation_record,
)
from tracescore.testing.kafka_topics import input_producer, read_topic

# The conversation tests' waits (shorter than wait_until's default); each ends once its condition holds.
SERVICE_WAIT_S = 90.0


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
    producer = input_producer(bootstrap, [topic], acks="all")
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
        self.thread = threading.Thread(target=self.service.run, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.service.stop()
        self.thread.join(60)
        assert not self.thread.is_alive()


def on_topic(bootstrap: str, cfg: ConversationsConfig) -> list[ConversationRecord]:
    return [read_conversation_record(m.value) for m in read_topic(bootstrap, cfg.conversations_topic)]


def conversations_process(
    bootstrap: str,
    prefix: str,
    *,
    crash_at: str | None = None,
    pause_at: str | None = None,
    idle_timeout: str | None = IDLE_TIMEOUT_S,
    quiet_seconds: str = "1",
    spans: bool = True,
    evidence: bool = True,
    **settings: str,
) -> ServiceProcess:
    """`tracescore conversations` on the test's own topics (`prefix`), a tick every 0.2 s, until its idle
    timeout (None, or a crash point armed: until killed or stopped); `spans`, `evidence`: write evaluation
    spans, read turns' documents (on the test's own topics); `settings`: more TRACESCORE_CONVERSATIONS_*,
    by their lower-case names."""
    args = [
        *("--bootstrap-servers", bootstrap, "--evaluations-topic", f"{prefix}.evaluations"),
        *("--conversations-topic", f"{prefix}.conversations", "--group-id", f"{prefix}.conversations"),
        *("--quiet-seconds", quiet_seconds),
        *(("--idle-timeout", idle_timeout) if idle_timeout and crash_at is None else ()),
    ]
    values = {
        "turns_topic": f"{prefix}.turns",
        "state_topic": f"{prefix}.state",
        "spans_topic": f"{prefix}.spans" if spans else "",
        "evidence_topic": f"{prefix}.evidence" if evidence else "",
        "tick_seconds": "0.2",
        "session_timeout_ms": str(SESSION_TIMEOUT_MS),
        **settings,
    }
    env = {f"TRACESCORE_CONVERSATIONS_{name.upper()}": value for name, value in values.items()}
    return ServiceProcess("conversations", args, env, crash_at=crash_at, pause_at=pause_at)


def killed_then_restarted(
    run: Callable[..., ServiceProcess], bootstrap: str, prefix: str, point: str
) -> list[EvaluationRecord]:
    """`run` killed (kill -9) at the crash point `point`, then run again to its idle stop: the turns' revised
    records on the evaluations topic, each checked written once."""
    killed = run(bootstrap, prefix, crash_at=point)
    assert killed.wait() == -9, f"never reached {point}:\n{killed.log[-3000:]}"
    restarted = run(bootstrap, prefix)
    assert restarted.wait() == 0, restarted.log[-3000:]
    records = [read_evaluation_record(m.value) for m in read_topic(bootstrap, f"{prefix}.evaluations")]
    revised = [r for r in records if r.revision > 0]
    copies = Counter((r.trace_id, r.revision) for r in revised)
    assert all(n == 1 for n in copies.values()), f"written twice: {copies}"
    return revised


def last_records(bootstrap: str, prefix: str) -> dict[str, ConversationRecord]:
    """The conversation records on the topic, each checked written once: the last revision of each."""
    written = [read_conversation_record(m.value) for m in read_topic(bootstrap, f"{prefix}.conversations")]
    assert len({(r.conversation_id, r.revision) for r in written}) == len(written), "no record twice"
    last = {}
    for record in sorted(written, key=lambda r: r.revision):
        last[record.conversation_id] = record
    return last
