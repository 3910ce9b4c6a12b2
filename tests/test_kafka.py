"""tracescore/_kafka.py's reading of where a consumer stands, through the real broker."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from tracescore._kafka import caught_up


@pytest.mark.kafka
def test_a_partition_at_its_end_whose_high_watermark_no_fetch_reported_is_caught_up(
    bootstrap: str, topic_prefix: str
) -> None:
    """A member given a partition back at the offset its fetch session already held gets no fetch response
    for it (the broker answers only for partitions that changed): its end is asked of the broker, or an
    idle member waits for it forever. Here: positioned at the end by a seek, nothing fetched yet."""
    topic = f"{topic_prefix}.spans"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for partition in (0, 1):
        producer.send(topic, b"a span", partition=partition)
    producer.flush()
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        first, second = TopicPartition(topic, 0), TopicPartition(topic, 1)
        consumer.assign([first, second])
        consumer.seek_to_end(first, second)
        assert consumer.position(first) == 1 and consumer.highwater(first) is None
        assert caught_up(consumer)

        consumer.seek(second, 0)  # a message left to read
        assert not caught_up(consumer)
    finally:
        consumer.close()
