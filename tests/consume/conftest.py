"""The consume tests' harness: one way to build a scoring consumer against a real broker (the
`consumer_for` fixture, built by `kafka_helpers.make_consumer`), the local judge server whose replies a test
holds back (`judge_server`), the topics of one fault run (`topics`); `_helpers.wait_until` is the one
wait."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_helpers import GatedJudgeServer, Topics
from kafka_helpers import ConsumerFactory, make_consumer


@pytest.fixture
def consumer_for() -> ConsumerFactory:
    return make_consumer


@pytest.fixture
def judge_server() -> Iterator[GatedJudgeServer]:
    """The local judge server, its replies held back or let through as the test says."""
    with GatedJudgeServer() as server:
        yield server


@pytest.fixture
def topics(bootstrap: str, topic_prefix: str) -> Topics:
    """A fault run's topics, named after the test (the broker creates them on first use)."""
    return Topics(bootstrap, topic_prefix)
