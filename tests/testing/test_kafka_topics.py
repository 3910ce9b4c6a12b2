"""Writing a test's input to a topic created first, and reading a topic back
(`tracescore.testing.kafka_topics`), as the tests, benchmarks and the demo check what was written: every
partition to its end, never a part of the topic taken for all of it."""

from __future__ import annotations

import pytest
from _helpers import partitions_on_broker
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import UnknownTopicOrPartitionError

from tracescore.testing.kafka_topics import input_producer, read_topic, topic_probe, wait_for_records

pytestmark = pytest.mark.kafka


def test_a_topic_is_read_to_its_end_on_every_partition(bootstrap: str, topic_prefix: str) -> None:
    topic = f"{topic_prefix}.three"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for n in range(9):
        producer.send(topic, value=b"%d" % n, partition=n % 3)
    producer.flush()
    producer.close()

    assert sorted(m.value for m in read_topic(bootstrap, topic)) == [b"%d" % n for n in range(9)]
    assert read_topic(bootstrap, f"{topic_prefix}.missing") == [], "a topic not created yet holds nothing"
    with pytest.raises(TimeoutError, match=r"\.three not read to its end in 0s .*'0/3'"):
        read_topic(bootstrap, topic, timeout_s=0)  # never a part of the topic taken for all of it
    assert len(wait_for_records(bootstrap, topic, 9)) == 9
    # What is there when it never comes; a wait shorter than a read (here none at all) still reads to the end.
    assert len(wait_for_records(bootstrap, topic, 10, timeout_s=0)) == 9, "what is there when it never comes"


def test_a_test_s_input_written_to_a_new_topic_logs_no_false_error(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A test's producer whose first send made the broker create the topic logged kafka-python's ERROR
    "Topic ... not found in cluster metadata": a false error in the log of every test that then failed."""
    topic = f"{topic_prefix}.input"
    with caplog.at_level("WARNING", logger="kafka"):
        producer = input_producer(bootstrap, [topic], acks="all")
        producer.send(topic, value=b"a record").get(timeout=30)
        producer.close()
    assert [m.value for m in read_topic(bootstrap, topic)] == [b"a record"]
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert not errors, errors


def test_a_look_for_a_topic_never_makes_it(bootstrap: str, topic_prefix: str) -> None:
    """kafka-python 3.0 ignores `allow_auto_create_topics=False`: a probe built with it that asked for a topic
    by name (its metadata for an assigned partition, as a read does) made the broker create it (the state
    topic test's probe, waiting for the service to recreate a deleted state topic, could have made it)."""
    looked_for, read = f"{topic_prefix}.looked-for", f"{topic_prefix}.read"
    probe = topic_probe(bootstrap)
    try:
        assert not probe.partitions_for_topic(looked_for)
        probe.assign([TopicPartition(looked_for, 0)])
        probe.poll(timeout_ms=500)  # the metadata of the assigned partition's topic, asked for by name
        try:
            listed = probe.topics()
        except UnknownTopicOrPartitionError:
            # kafka-python 3.0.12 may raise the assigned partition's failed offset reset from this next call
            # (seen once, loaded): the broker saying the topic is unknown, the outcome asked for.
            listed = set()
        assert looked_for not in listed
    finally:
        probe.close()
    assert read_topic(bootstrap, read) == []
    assert partitions_on_broker(bootstrap, looked_for) is None
    assert partitions_on_broker(bootstrap, read) is None
