"""The one Kafka configuration every process reads (`TRACESCORE_KAFKA__*`), and the shared client steps that
need no broker (log-once, the rebalance listener)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kafka import TopicPartition
from pydantic import ValidationError

from tracescore._kafka import LogOnce, RebalanceListener
from tracescore._kafka_config import PRODUCER_ONLY, KafkaConnection, KafkaSettings, kafka_settings_from_env


def test_security_reaches_every_client_and_producer_tuning_only_the_sdk_producer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRACESCORE_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_MECHANISM", "SCRAM-SHA-256")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_USERNAME", "svc")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_PASSWORD", "pw-123")
    monkeypatch.setenv("TRACESCORE_KAFKA__SSL_CAFILE", "/etc/ca.pem")
    monkeypatch.setenv("TRACESCORE_KAFKA__LINGER_MS", "7")
    monkeypatch.setenv("TRACESCORE_KAFKA__TRACE_MESSAGES", "per_trace")
    settings = kafka_settings_from_env()
    producer = settings.producer_config()
    assert producer["linger_ms"] == 7 and producer["sasl_mechanism"] == "SCRAM-SHA-256"
    # The exporter's layout is read by the exporter itself; KafkaProducer would refuse the argument.
    assert settings.trace_messages == "per_trace" and "trace_messages" not in producer
    assert "trace_messages" in PRODUCER_ONLY
    connection = KafkaConnection(bootstrap_servers="b:9093", security=settings.security())
    client = connection.client_config()
    assert client["bootstrap_servers"] == "b:9093" and client["sasl_plain_password"] == "pw-123"
    assert client["ssl_cafile"] == str(Path("/etc/ca.pem"))
    assert not PRODUCER_ONLY & set(client), "the services' clients never get the SDK producer's knobs"
    assert connection.security.secrets() == ["pw-123"]
    assert "pw-123" not in repr(settings) and "pw-123" not in repr(connection)


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_USERNAME", "from-env")
    monkeypatch.setenv("TRACESCORE_KAFKA__SASL_PASSWORD", "pw")
    settings = kafka_settings_from_env(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="from-flag", ssl_cafile=None
    )
    assert (settings.security_protocol, settings.sasl_username) == ("SASL_PLAINTEXT", "from-flag")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "p"},
            "needs sasl_mechanism",
        ),
        ({"sasl_mechanism": "PLAIN"}, "needs security_protocol SASL_PLAINTEXT or SASL_SSL"),
        ({"linger": 5}, "Extra inputs are not permitted"),
    ],
)
def test_impossible_or_unknown_settings_are_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        KafkaSettings(**values)  # type: ignore[arg-type]


def test_log_once_logs_each_key_once(caplog: pytest.LogCaptureFixture) -> None:
    log_once = LogOnce(logging.getLogger("tracescore.test"))
    with caplog.at_level(logging.INFO, logger="tracescore.test"):
        assert log_once("a", "first %s", "a") and not log_once("a", "again %s", "a")
        assert log_once("b", "first %s", "b", level=logging.INFO)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "first a"),
        (logging.INFO, "first b"),
    ]


def test_the_rebalance_listener_forwards_and_remembers_the_first_assignment() -> None:
    calls: list[tuple[str, list[TopicPartition]]] = []
    listener = RebalanceListener(
        logging.getLogger("tracescore.test"),
        assigned=lambda tps: calls.append(("assigned", list(tps))),
        revoked=lambda tps: calls.append(("revoked", list(tps))),
    )
    tp = TopicPartition("spans", 0)
    assert listener.first_assigned_at is None
    listener.on_partitions_assigned([tp])
    first = listener.first_assigned_at
    listener.on_partitions_lost([tp])  # without its own callback: handled as a revocation
    listener.on_partitions_assigned([tp])
    assert first is not None and listener.first_assigned_at == first
    assert calls == [("assigned", [tp]), ("revoked", [tp]), ("assigned", [tp])]


def test_trace_messages_setting_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KafkaSettings().trace_messages == "per_partition"
    monkeypatch.setenv("TRACESCORE_KAFKA__TRACE_MESSAGES", "per_trace")
    settings = kafka_settings_from_env()
    assert settings.trace_messages == "per_trace"
    assert "trace_messages" not in settings.producer_config(), "the exporter's knob, not kafka-python's"
    monkeypatch.setenv("TRACESCORE_KAFKA__TRACE_MESSAGES", "per_span")
    with pytest.raises(ValueError, match="per_partition"):
        kafka_settings_from_env()
