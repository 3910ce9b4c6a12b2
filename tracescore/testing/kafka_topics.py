"""Writing a test's input to a topic, looking at topics and reading a topic back, as tests, benchmarks and the
demo check what a service wrote, never creating a topic by looking at it."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord

from tracescore._kafka import ensure_topics, probe_consumer, topic_partitions
from tracescore._kafka_config import KafkaConnection

__all__ = ["input_producer", "read_topic", "topic_probe", "wait_for_records"]

_READ_S = 60.0  # a read to a topic's end: generous, a loaded machine's fetches can take seconds


def input_producer(bootstrap: str, topics: Iterable[str | NewTopic], **config: Any) -> KafkaProducer:
    """A producer (kafka-python's `config`) for writing a test's input to `topics`, created first when
    missing: a name with the broker's defaults, as its auto-creation would, a `NewTopic` as it says (its
    partitions). A first send to a topic the broker does not have yet logs kafka-python's ERROR "Topic X not
    found in cluster metadata", a false error in the log of every test that then fails for another reason."""
    ensure_topics(KafkaConnection(bootstrap_servers=bootstrap), topics)
    return KafkaProducer(bootstrap_servers=bootstrap, **config)


def topic_probe(bootstrap: str, **config: Any) -> KafkaConsumer:
    """A consumer without a group (kafka-python's `config` added) for looking at topics (`topics()`,
    `partitions_for_topic`) that never makes the broker create one: kafka-python 3.0 ignores
    `allow_auto_create_topics=False`, so a look for a topic deleted or not created yet made it, with the
    broker's defaults (`auto.create.topics.enable`, on by default and on the test broker)."""
    return probe_consumer({"bootstrap_servers": bootstrap}, **config)


def read_topic(bootstrap: str, topic: str, timeout_s: float = _READ_S) -> list[ConsumerRecord]:
    """Every message on `topic` up to its end offsets as they are now, read without a group (none if the
    topic does not exist). TimeoutError, saying how far it got, when that end is not reached within
    `timeout_s`: never a part of the topic taken for all of it."""
    # earliest: records deleted under the read are skipped, not everything after them (the default reset).
    consumer = topic_probe(bootstrap, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in topic_partitions(consumer, [topic]).get(topic, ())]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: list[ConsumerRecord] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                at = {tp.partition: f"{consumer.position(tp)}/{end[tp]}" for tp in tps}
                raise TimeoutError(
                    f"{topic} not read to its end in {timeout_s:g}s (partition: offset/end): {at}"
                )
            for batch in consumer.poll(timeout_ms=200).values():
                out.extend(batch)
        return out
    finally:
        consumer.close()


def wait_for_records(bootstrap: str, topic: str, count: int, timeout_s: float = 60.0) -> list[ConsumerRecord]:
    """`topic` read whole until it holds at least `count` messages; what it holds after `timeout_s` if it
    never does (the caller's assert says what is missing). `timeout_s` bounds the wait for the count, not a
    read: each read is given at least `_READ_S` to reach the end (a short wait gave its reads as long, so
    a slow fetch on a loaded machine raised TimeoutError where the caller asked for what is there)."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_topic(bootstrap, topic, max(timeout_s, _READ_S))
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.5)
