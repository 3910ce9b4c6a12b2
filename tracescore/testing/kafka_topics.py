"""Reading a topic back whole, as tests and benchmarks check what a service wrote."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

__all__ = ["read_topic"]


def read_topic(bootstrap: str, topic: str) -> list[ConsumerRecord]:
    """Every message on `topic` up to its end now, read without a group (none if the topic does not exist)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        out: list[ConsumerRecord] = []
        while any(consumer.position(tp) < end[tp] for tp in tps):
            for batch in consumer.poll(timeout_ms=500).values():
                out.extend(batch)
        return out
    finally:
        consumer.close()
