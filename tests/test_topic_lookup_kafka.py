"""tracescore/_kafka.py's look at named topics (`topic_partitions`, `known_partitions`), through the real
broker: only the topics named are asked for, never every topic of the cluster, and a topic that does not
exist is said missing and left uncreated, the test broker's auto.create.topics.enable on."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from _helpers import wait_until
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.protocol.metadata import MetadataRequest

import tracescore._kafka
from tracescore._kafka import (
    ensure_topics,
    known_partitions,
    probe_consumer,
    topic_partitions,
    wait_for_partitions,
)
from tracescore._kafka_config import KafkaConnection

pytestmark = pytest.mark.kafka


def metadata_asked(client: KafkaConsumer | KafkaAdminClient) -> list[list[str] | None]:
    """Every MetadataRequest `client` sends from now, by the topics it names (None: every topic)."""
    asked: list[list[str] | None] = []
    manager = client._manager
    send = manager.send

    def recorded(request: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(request, MetadataRequest):
            asked.append(None if request.topics is None else sorted(t.name for t in request.topics))
        return send(request, *args, **kwargs)

    manager.send = recorded
    return asked


@pytest.fixture
def probe(bootstrap: str) -> Iterator[KafkaConsumer]:
    client = probe_consumer({"bootstrap_servers": bootstrap})
    yield client
    client.close()


def existing(bootstrap: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_a_look_names_its_topics_and_a_missing_one_is_said_missing_and_not_created(
    bootstrap: str, topic_prefix: str, probe: KafkaConsumer, caplog: pytest.LogCaptureFixture
) -> None:
    """A look for a few topics asked for every topic of the cluster (66 ms of the client's CPU and 108 ms
    of the broker's with 3,000 topics); asked for by name on a broker that creates what a metadata request
    names, the missing one would be left on it, with the broker's partition count."""
    there, missing = f"{topic_prefix}.there", f"{topic_prefix}.missing"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(there, 3, 1)])
    admin.close()
    asked = metadata_asked(probe)
    wait_until(lambda: topic_partitions(probe, [there, missing]) == {there: (0, 1, 2)}, "the topic seen")
    # The client's own refresh may ask for no topic at all ([]); none asks for every topic (None).
    named = [names for names in asked if names != []]
    assert named and all(names == sorted([there, missing]) for names in named), asked
    assert missing not in existing(bootstrap)
    assert topic_partitions(probe, [missing]) == {}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


def test_its_answer_is_what_offsets_asked_next_find_their_leaders_in(
    bootstrap: str, topic_prefix: str, probe: KafkaConsumer
) -> None:
    """The end offsets asked right after a look need no metadata request of their own, and a look repeated
    while the cached metadata holds every topic asks nothing."""
    topic = f"{topic_prefix}.outputs"
    ensure_topics(KafkaConnection(bootstrap_servers=bootstrap), [NewTopic(topic, 2, 1)])
    found = topic_partitions(probe, [topic])
    asked = metadata_asked(probe)
    assert known_partitions(probe, [topic]) == found == {topic: (0, 1)}
    ends = probe.end_offsets([TopicPartition(topic, p) for p in found[topic]], timeout_ms=10_000)
    assert set(ends.values()) == {0}
    assert asked == []
    assert known_partitions(probe, [topic, f"{topic_prefix}.not-yet"]) == found
    assert asked == [sorted([topic, f"{topic_prefix}.not-yet"])], "a topic not cached: looked at by name"


def test_waiting_for_partitions_and_ensuring_topics_ask_for_their_topics_alone(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader's start listed every topic of the cluster (ensure_topics) and, for each topic not yet in its
    metadata, fetched every topic again every 0.2 s (wait_for_partitions); neither may create what it
    reads."""
    asked: list[list[str] | None] = []
    made = tracescore._kafka.made_or_closed

    def recording(build: Any, **config: Any) -> Any:
        client = made(build, **config)
        asked_by = metadata_asked(client)
        asked.append(asked_by)  # type: ignore[arg-type]
        return client

    monkeypatch.setattr(tracescore._kafka, "made_or_closed", recording)
    written, read = f"{topic_prefix}.written", f"{topic_prefix}.unwritten"
    connection = KafkaConnection(bootstrap_servers=bootstrap, connect_timeout_s=2)
    assert ensure_topics(connection, [written], read=[read]) == (read,)
    wait_for_partitions(connection.client_config(), [written, read], timeout_s=1)
    every = [names for client in asked for names in client]  # type: ignore[union-attr]
    assert every and None not in every, every
    assert all(set(names or ()) <= {written, read} for names in every), every
    assert read not in existing(bootstrap)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"no partitions known for {read} after 1s; subscribing anyway (assigned once they are)"
    ]
