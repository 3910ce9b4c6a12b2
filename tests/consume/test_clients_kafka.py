"""The service's clients against the real broker: how connecting sets up the process for the loop."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tracescore.consume import ConsumerSettings
from tracescore.consume._clients import connect

pytestmark = pytest.mark.kafka


@pytest.fixture(autouse=True)
def python_gc_thresholds() -> Iterator[tuple[int, int, int]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, saved[1], saved[2])
    yield gc.get_threshold()
    gc.set_threshold(*saved)


def _connect(bootstrap: str, topic_prefix: str, **overrides: object) -> None:
    settings = ConsumerSettings.model_validate(
        {"bootstrap_servers": bootstrap, "group_id": f"{topic_prefix}.group", **overrides}
    )
    consumer, producer = connect(settings)
    producer.close(timeout=5)
    consumer.close(autocommit=False)


def test_connecting_raises_the_gc_threshold_so_decoding_is_not_collected_every_700_objects(
    bootstrap: str, topic_prefix: str
) -> None:
    _connect(bootstrap, topic_prefix)

    assert gc.get_threshold()[0] == ConsumerSettings().gc_gen0_threshold == 50_000


def test_gc_threshold_zero_keeps_python_s(
    bootstrap: str, topic_prefix: str, python_gc_thresholds: tuple[int, int, int]
) -> None:
    _connect(bootstrap, topic_prefix, gc_gen0_threshold=0)

    assert gc.get_threshold() == python_gc_thresholds
