"""The scoring service's Kafka clients: created once a broker answers, with one clear error when none does."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterable

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from tracescore.consume._settings import ConsumerSettings
from tracescore.consume._status import redact_in_client_logs

__all__ = ["BrokerUnreachable", "check_broker", "connect", "ensure_topics"]

_log = logging.getLogger("tracescore.consume")


class BrokerUnreachable(RuntimeError):
    """No Kafka broker answered within the connect timeout."""


def connect(
    settings: ConsumerSettings, consumer: KafkaConsumer | None = None, producer: KafkaProducer | None = None
) -> tuple[KafkaConsumer, KafkaProducer]:
    """The clients given, and the missing ones created once a broker answers: a clear error, not a stream of
    client logs, when none does within `connect_timeout_s`."""
    if consumer is not None and producer is not None:
        return consumer, producer
    check_broker(settings.bootstrap_servers, "starting", wait_s=settings.connect_timeout_s)
    security = settings.kafka
    redact_in_client_logs(
        *(secret.get_secret_value() for secret in (security.sasl_password, security.ssl_password) if secret)
    )
    try:
        return consumer or _consumer(settings), producer or _producer(settings)
    except KafkaError as exc:
        # Authentication, TLS or protocol problems: one line naming the cause, never a traceback.
        raise BrokerUnreachable(
            f"cannot connect to Kafka at {settings.bootstrap_servers} "
            f"({security.security_protocol}): {type(exc).__name__}: {exc}"
        ) from exc


def _consumer(settings: ConsumerSettings) -> KafkaConsumer:
    return KafkaConsumer(
        **settings.client_config(),
        group_id=settings.group_id,
        enable_auto_commit=False,
        auto_offset_reset=settings.auto_offset_reset,
        max_poll_records=settings.max_poll_records,
        max_poll_interval_ms=settings.max_poll_interval_ms,
        session_timeout_ms=settings.session_timeout_ms,
        # Kafka's rule of thumb: a heartbeat at most a third of the session, so two may be lost.
        heartbeat_interval_ms=min(3_000, settings.session_timeout_ms // 3),
    )


def _producer(settings: ConsumerSettings) -> KafkaProducer:
    return KafkaProducer(
        **settings.client_config(),
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


def check_broker(bootstrap_servers: str, when: str, wait_s: float = 5.0) -> None:
    """Raise BrokerUnreachable unless a bootstrap server accepts a TCP connection within `wait_s`."""
    deadline = time.monotonic() + wait_s
    last_error: OSError | None = None
    while True:
        for address in bootstrap_servers.split(","):
            host, _, port = address.strip().rpartition(":")
            try:
                with socket.create_connection((host.strip("[]") or "localhost", int(port)), timeout=2):
                    return
            except (OSError, ValueError) as exc:
                last_error = exc if isinstance(exc, OSError) else OSError(str(exc))
        if time.monotonic() >= deadline:
            raise BrokerUnreachable(
                f"no Kafka broker reachable at {bootstrap_servers} ({when}; tried for {wait_s:.0f}s, "
                f"last error: {last_error})"
            )
        time.sleep(0.5)


def ensure_topics(settings: ConsumerSettings, topics: Iterable[str]) -> None:
    """Create missing topics with the broker's defaults. Best effort: where the consumer may not create
    topics, the broker's auto-creation or the operator's provisioning applies."""
    wanted = set(topics)
    try:
        admin = KafkaAdminClient(**settings.client_config())
    except KafkaError as exc:
        _log.debug("cannot check topics: %s", exc)
        return
    try:
        missing = wanted - set(admin.list_topics())
        if missing:
            admin.create_topics([NewTopic(name) for name in sorted(missing)], raise_errors=False)
            _log.info("created topics: %s", ", ".join(sorted(missing)))
    except KafkaError as exc:
        _log.debug("could not create topics %s: %s", sorted(wanted), exc)
    finally:
        admin.close()
