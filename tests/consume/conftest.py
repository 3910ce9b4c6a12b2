"""The consume tests' harness: one way to build a scoring consumer against a real broker (the
`consumer_for` fixture, built by `kafka_helpers.make_consumer`); `kafka_helpers.wait_until` is the one
wait."""

from __future__ import annotations

import pytest
from kafka_helpers import ConsumerFactory, make_consumer


@pytest.fixture
def consumer_for() -> ConsumerFactory:
    return make_consumer
