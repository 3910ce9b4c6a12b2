"""Shared fixtures: `kafka_broker`, a real Apache Kafka 4.x broker, and `phoenix_server`, a real Arize
Phoenix (`phoenix serve` from PyPI), each started once per test session."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.phoenix import PhoenixServer


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    # No skip on failure: a test that needs Kafka and cannot get it must fail loudly (KafkaUnavailable).
    with KafkaBroker() as broker:
        yield broker


@pytest.fixture
def bootstrap(kafka_broker: KafkaBroker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture
def topic_prefix() -> str:
    """Per-test topic names, so tests sharing the broker never read each other's messages."""
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def phoenix_server() -> Iterator[PhoenixServer]:
    # No skip on failure: a test that needs Phoenix and cannot get it must fail loudly (PhoenixUnavailable).
    with PhoenixServer() as server:
        yield server
