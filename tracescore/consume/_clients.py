"""The scoring service's Kafka clients, tuned for its role; connecting, probing and topic creation are the
shared steps of `tracescore._kafka`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from tracescore._kafka import (
    BrokerUnreachable,
    RebalanceListener,
    group_member,
    not_creating_topics,
    ready_to_read,
)
from tracescore._kafka import connect as _connect
from tracescore._service import AwaitedInputs
from tracescore.consume._settings import ConsumerSettings

__all__ = ["BrokerUnreachable", "connect", "subscribe"]

_log = logging.getLogger("tracescore.consume")


def connect(
    settings: ConsumerSettings, consumer: KafkaConsumer | None = None, producer: KafkaProducer | None = None
) -> tuple[KafkaConsumer, KafkaProducer]:
    """The clients given, and the missing ones created once a broker answers: a clear error, not a stream of
    client logs, when none does within `connect_timeout_s`."""
    if consumer is not None and producer is not None:
        return consumer, producer
    return _connect(
        settings.connection(),
        lambda config: (consumer or _consumer(settings, config), producer or _producer(settings, config)),
    )


def subscribe(
    settings: ConsumerSettings,
    consumer: KafkaConsumer,
    listener: RebalanceListener,
    stopping: Callable[[], bool] = lambda: False,
) -> AwaitedInputs:
    """The output topics created if missing, the input's partitions known, then subscribed. The input is
    never created here (a misspelt name would be made a topic): its writers create it, the SDK at its first
    export; until then the member waits for it, not subscribed (`AwaitedInputs.look` before each poll;
    `close()` at the stop). `stopping`: a stop was asked for."""
    s = settings
    outputs = {
        t for t in (s.evaluations_topic, s.dlq_topic, s.spans_out_topic, s.conversation_evidence_topic) if t
    }
    connection = s.connection()
    absent = ready_to_read(connection, [s.topic], _unwritten, create=outputs - {s.topic})
    return AwaitedInputs(consumer, [s.topic], listener, absent, connection.client_config(), stopping)


def _unwritten(topic: str) -> None:
    # Where a misspelt topic shows: nothing was ever written to it, and nothing will be scored.
    _log.warning(
        "the spans topic %s does not exist, so nothing has been written to it yet: waiting for it (the SDK "
        "or Collector that writes it creates it). If your app or Collector already sends spans, give their "
        "topic with --topic or TRACESCORE_TOPIC (the SDK writes to TRACESCORE_TOPIC too, default otlp_spans)",
        topic,
    )


def _consumer(settings: ConsumerSettings, config: dict[str, Any]) -> KafkaConsumer:
    return KafkaConsumer(
        **config,
        group_id=settings.group_id,
        enable_auto_commit=False,
        **not_creating_topics(),  # what it reads is its writers' to create (subscribe)
        auto_offset_reset=settings.auto_offset_reset,
        max_poll_records=settings.max_poll_records,
        max_poll_interval_ms=settings.max_poll_interval_ms,
        **group_member(settings.session_timeout_ms, settings.rebalance_protocol),
    )


def _producer(settings: ConsumerSettings, config: dict[str, Any]) -> KafkaProducer:
    return KafkaProducer(
        **config,
        acks="all",
        # Not idempotent: kafka-python treats a rejected batch of an idempotent producer (one record too large
        # for a topic) as fatal and aborts every batch in flight. Outputs are at least once anyway (replays
        # re-emit them), so a retry's duplicate costs nothing new.
        enable_idempotence=False,
        linger_ms=5,
        max_request_size=settings.max_message_bytes + 64 * 1024,
        # Metadata of an output topic: after 10 s fail that output, never block the loop longer.
        max_block_ms=10_000,
    )
