"""`tracescore consume` as users run it: a process that stops by itself and prints its counts."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kafka import KafkaProducer

pytestmark = pytest.mark.kafka


def test_consume_stops_on_idle_timeout_and_reports_counts(bootstrap: str, topic_prefix: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(f"{topic_prefix}.spans", b"garbage").get(timeout=30)
    producer.close()
    done = subprocess.run(
        [sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap,
         "--topic", f"{topic_prefix}.spans", "--group-id", topic_prefix,
         "--dlq-topic", f"{topic_prefix}.dlq", "--idle-timeout", "3"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "dead_letters=1" in done.stderr and "messages=1" in done.stderr
    assert "dead-lettered" in done.stderr


def test_illegal_topic_name_fails_at_startup() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", "127.0.0.1:1",
         "--evaluations-topic", "no spaces allowed"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "not a legal Kafka topic name" in done.stderr
