"""Read a topic to its end without a consumer group (no offsets committed)."""

from __future__ import annotations

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.fetcher import ConsumerRecord


def read_all(bootstrap: str, topic: str, timeout_s: float = 10.0) -> list[ConsumerRecord]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or set()]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = consumer.end_offsets(tps)
        records: list[ConsumerRecord] = []
        for _ in range(int(timeout_s / 0.2)):
            if all(consumer.position(tp) >= end[tp] for tp in tps):
                break
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()
