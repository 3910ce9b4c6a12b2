"""The development broker as `make kafka` / `make kafka-stop` use it: detached, reused, stopped cleanly."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tracescore.testing.kafka_broker import KafkaBroker, _pid_alive, fetch_kafka_jars

pytestmark = pytest.mark.kafka


def _cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tracescore.testing.kafka_broker", *args],
        capture_output=True, text=True, timeout=180, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_jars_are_cached_outside_the_repo() -> None:
    libs = fetch_kafka_jars()
    repo = Path(__file__).resolve().parents[2]
    assert repo not in libs.parents
    jars = {p.name for p in libs.glob("*.jar")}
    assert any(j.startswith("kafka_2.13-4.") for j in jars), "an Apache Kafka 4.x broker"
    assert any(j.startswith("kafka-clients-4.") for j in jars)


def test_detached_broker_starts_once_is_reused_and_stops(tmp_path: Path) -> None:
    state = tmp_path / "state"
    bootstrap = _cli("start", "--state-dir", str(state))
    try:
        assert _cli("start", "--state-dir", str(state)) == bootstrap, "a running broker is reused"
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        assert producer.send("smoke", b"hello").get(timeout=30).offset == 0
        producer.close()
        pid = json.loads((state / "broker.json").read_text())["pid"]
    finally:
        stopped = _cli("stop", "--state-dir", str(state))
    assert f"pid {pid}" in stopped
    assert not _pid_alive(pid)
    assert not (state / "broker").exists(), "its data is removed"
    assert _cli("stop", "--state-dir", str(state)) == "no broker running"


def test_stopping_frees_the_port() -> None:
    broker = KafkaBroker().start()
    port = broker.port
    broker.stop()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
