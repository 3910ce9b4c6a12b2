"""A conversation alert through the real broker: turn records -> `ConversationService` -> conversation
records -> `AlertService` with a rule on `conversation_label` -> a real webhook receiver. The answer rule
beside it stays quiet: most answers are faithful, it is the conversations that are not."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest
from _helpers import WAIT_S, wait_until

from tracescore.alert import AlertConfig, AlertService, RuleConfig, WebhookSink, WebhookSinkConfig
from tracescore.alert.testing import WebhookReceiver
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import EvaluationRecord, MetricStatus
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka


def turn(conversation: int, n: int, faithful: bool) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=f"{conversation:016x}{n:016x}",
        span_id=f"{n:016x}",
        service_name="chat-api",
        route="/chat",
        metric="faithfulness",
        score=1.0 if faithful else 0.0,
        label="faithful" if faithful else "hallucinated",
        status=MetricStatus.OK,
        judge="offline",
        session_id=f"c-{conversation}",
        timestamp=datetime.now(UTC),
    )


class Threaded:
    def __init__(self, service: Any) -> None:
        self.service = service
        self._thread = threading.Thread(target=service.run, daemon=True)

    def __enter__(self) -> Any:
        self._thread.start()
        return self.service

    def __exit__(self, *exc: object) -> None:
        self.service.stop()
        self._thread.join(WAIT_S)  # returns as soon as the service stopped
        assert not self._thread.is_alive()


def test_a_drop_in_clean_conversations_fires_a_conversation_alert(bootstrap: str, topic_prefix: str) -> None:
    evaluations, conversations = f"{topic_prefix}.evaluations", f"{topic_prefix}.conversations"
    # Four turns each; every other conversation has one unfaithful turn: 87.5% of answers are faithful,
    # half the conversations are clean.
    turns = [turn(c, n, faithful=c % 2 == 0 or n != 3) for c in range(12) for n in range(4)]
    producer = input_producer(bootstrap, [evaluations], acks="all")
    for record in turns:
        producer.send(evaluations, key=record.trace_id.encode(), value=record.model_dump_json().encode())
    producer.flush()
    producer.close()
    gather = ConversationsConfig(
        bootstrap_servers=bootstrap,
        evaluations_topic=evaluations,
        conversations_topic=conversations,
        turns_topic=f"{topic_prefix}.turns",
        state_topic=f"{topic_prefix}.conversations-state",
        spans_topic=None,
        evidence_topic=f"{topic_prefix}.evidence",
        group_id=f"{topic_prefix}.conversations",
        quiet_seconds=1.0,
        tick_seconds=0.2,
    )
    common = {"warning": 0.7, "critical": None, "cooldown_seconds": 0, "no_data_seconds": None}
    alerting = AlertConfig(
        bootstrap_servers=bootstrap,
        evaluations_topic=evaluations,
        conversations_topic=conversations,
        routes_topic=f"{topic_prefix}.routes",
        state_topic=f"{topic_prefix}.alert-state",
        group_id=f"{topic_prefix}.alert",
        tick_seconds=0.5,
        rules=[
            RuleConfig(signal="conversation_label", window_count=12, min_samples=12, **common),
            RuleConfig(signal="label", window_count=48, min_samples=40, **common),
        ],
    )
    with WebhookReceiver() as receiver:
        sink = WebhookSink(WebhookSinkConfig(url=receiver.url))
        with Threaded(ConversationService(gather)), Threaded(AlertService(alerting, [sink])) as alert:
            request = receiver.wait_for(lambda got: len(got) >= 1)[0]
            body = request.json()
            assert body["alertname"] == "TracescoreConversationFaithfulnessDropped", body
            assert (body["state"], body["unit"], body["samples"]) == ("firing", "conversation", 12)
            assert body["value"] == pytest.approx(0.5)
            assert body["labels"]["unit"] == "conversation"
            wait_until(lambda: alert.stats.records >= len(turns) + 12, "every answer and conversation read")
            assert alert.stats.records == len(turns) + 12
        assert len(receiver.requests) == 1, "the answers' rule stays quiet: 87.5% of answers are faithful"
