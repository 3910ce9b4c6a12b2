"""tracescore/_kafka.py's reading of where a consumer stands, through the real broker."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, KafkaTimeoutError
from kafka.protocol.admin import CreateTopicsResponse

import tracescore._kafka
from tracescore._kafka import BrokerUnreachable, caught_up, check_broker, ensure_topics, read_partitions
from tracescore._kafka_config import KafkaConnection, SettingOrigin


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


@pytest.mark.kafka
def test_a_read_given_up_during_a_position_asks_the_broker_for_no_other_partition(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restore's read asked the broker for every partition's position before it looked at the stop: a stop
    that came while a broker did not answer left the read's thread waiting BROKER_WAIT_S for each partition
    (a minute for six), not for the one call under way. Here the stop comes during the first position."""
    topic = f"{topic_prefix}.state"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for partition in (0, 1, 2):  # a state on each: none read yet at the stop
        producer.send(topic, key=b"a key", value=b"its state", partition=partition)
    producer.flush()
    producer.close()
    asked: list[TopicPartition] = []

    class StoppedDuringAPosition(KafkaConsumer):
        def position(self, partition: TopicPartition, timeout_ms: Any = None) -> Any:
            asked.append(partition)  # the stop is asked for while the broker is asked
            return super().position(partition, timeout_ms=timeout_ms)

    monkeypatch.setattr(tracescore._kafka, "KafkaConsumer", StoppedDuringAPosition)
    reading = read_partitions(
        KafkaConnection(bootstrap_servers=bootstrap), topic, [0, 1, 2], give_up=lambda: bool(asked)
    )
    with pytest.raises(KafkaTimeoutError, match="given up on, a stop was asked for"):
        list(reading)
    assert asked == [TopicPartition(topic, 0)]


@pytest.mark.kafka
def test_a_read_from_a_start_below_the_log_start_reads_what_is_left_and_says_what_was_lost(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A saved mark below a partition's log start (retention or delete_records removed the records below it)
    made the fetch out of range, and kafka-python's default reset moved the group-less reader to the END: the
    read returned nothing, silently. It reads from the earliest offset left, and one line says how many
    offsets were lost."""
    topic = f"{topic_prefix}.outputs"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.wait_for_topics([topic], timeout_ms=30_000)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for n in range(10):
        producer.send(topic, value=f"output {n}".encode(), partition=0)
    producer.flush()
    producer.close()
    tp = TopicPartition(topic, 0)
    admin.delete_records({tp: 6})  # offsets 0-5 gone: the saved mark 2 is below the log start
    admin.close()

    with caplog.at_level("WARNING", logger="tracescore"):
        read = list(read_partitions(KafkaConnection(bootstrap_servers=bootstrap), topic, [0], start={0: 2}))

    assert [m.value for m in read] == [b"output 6", b"output 7", b"output 8", b"output 9"]
    lost = [r.getMessage() for r in caplog.records if "retention or deletion" in r.getMessage()]
    assert lost == [
        f"{topic}[0]: offsets 2 to 5 are gone (4 offsets, lost to retention or deletion): read from 6"
    ]


@pytest.mark.kafka
def test_a_read_from_a_start_past_a_partitions_end_reads_the_others_and_ends(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A saved mark past a partition's end (the topic recreated since) is out of range too: the read of the
    other partitions goes on, and ends, instead of failing on that one (or waiting for it)."""
    topic = f"{topic_prefix}.outputs"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.wait_for_topics([topic], timeout_ms=30_000)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for n in range(3):
        for partition in (0, 1):
            producer.send(topic, value=f"output {partition}.{n}".encode(), partition=partition)
    producer.flush()
    producer.close()

    with caplog.at_level("WARNING", logger="tracescore"):
        read = read_partitions(
            KafkaConnection(bootstrap_servers=bootstrap), topic, [0, 1], start={0: 50, 1: 0}
        )
        values = [m.value for m in read]

    assert values == [b"output 1.0", b"output 1.1", b"output 1.2"]
    assert all("is past its log's end" in r.getMessage() for r in caplog.records if r.name == "tracescore")


@pytest.mark.kafka
def test_a_read_of_a_missing_topic_leaves_no_topic_on_the_broker(bootstrap: str, topic_prefix: str) -> None:
    """A service's read of a state topic that is gone (deleted, or a misspelt name) must not make it: the
    reader's metadata requests asked the broker to create the topic (kafka-python 3.0 ignores
    allow_auto_create_topics), which left it there with the broker's defaults, uncompacted."""
    topic = f"{topic_prefix}.state"
    # The topic's partition has no end offset to read to: how the read fails does not matter here.
    with contextlib.suppress(KafkaError):
        list(read_partitions(KafkaConnection(bootstrap_servers=bootstrap), topic, [0]))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert topic not in admin.list_topics(), "reading the topic created it"
    finally:
        admin.close()


@pytest.mark.kafka
def test_a_topic_the_broker_refuses_to_create_is_not_said_created_and_is_named_with_the_brokers_reason(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """ensure_topics said "created topics" of every topic it asked for, one the broker refused too (here a
    replication factor the one-broker cluster cannot meet), and said nothing of the refusal: the user was
    told a topic exists that does not, and not why."""
    made, refused = f"{topic_prefix}.made", f"{topic_prefix}.refused"
    with caplog.at_level(logging.INFO, logger="tracescore"):
        ensure_topics(
            KafkaConnection(bootstrap_servers=bootstrap), [NewTopic(made, 1, -1), NewTopic(refused, 1, 3)]
        )
    said = [r.getMessage() for r in caplog.records]
    assert [m for m in said if m.startswith("created topics")] == [f"created topics: {made}"]
    # Ours only: kafka-python warns of its own on a loaded machine (a selector task that ran long).
    [warning] = [
        r.getMessage() for r in caplog.records if r.name == "tracescore" and r.levelno == logging.WARNING
    ]
    assert f"could not create the topic {refused}" in warning, warning
    assert "replication factor 3" in warning and "InvalidReplicationFactorError" in warning, warning
    assert "only 1 broker" in warning, warning  # the broker's own words


def test_a_topic_the_brokers_create_answer_leaves_out_is_said_and_not_waited_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A topic asked for in CreateTopics but missing from the broker's answer was taken as fine without a
    word. No broker leaves one out on purpose (each asked topic gets an answer, a refusal included), so this
    is the answer as kafka-python builds it from the protocol class, given to ensure_topics' reading of it."""
    result = CreateTopicsResponse.CreatableTopicResult
    answer = CreateTopicsResponse(throttle_time_ms=0, topics=[result(name="t.made", error_code=0)]).to_dict()
    asked = [NewTopic("t.made", 1, -1), NewTopic("t.left-out", 3, -1, topic_configs={"retention.ms": "1"})]
    with caplog.at_level(logging.INFO, logger="tracescore"):
        made = tracescore._kafka._answered(asked, answer)
    assert made == ["t.made"]
    said = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert said == [
        (logging.INFO, "created topics: t.made"),
        (
            logging.WARNING,
            "asked to create the topic t.left-out (partitions 3, replication factor the broker's default, "
            "retention.ms=1), the broker's answer did not mention it: it may not exist. Check that it does, "
            "or create it",
        ),
    ]


def test_an_address_from_the_default_is_said_to_be_the_default(closed_port: int) -> None:
    """The no-broker error for an address no flag, variable or file gave (a closed port stands for the
    default address, which a broker on this machine may answer)."""
    with pytest.raises(BrokerUnreachable) as raised:
        check_broker(f"127.0.0.1:{closed_port}", "starting", wait_s=1.0, origin=SettingOrigin(kind="default"))
    assert str(raised.value).endswith(
        "Give its address as host:port with --bootstrap-servers or TRACESCORE_BOOTSTRAP_SERVERS "
        "(this address is the default: no flag, variable or config file gave one)"
    ), raised.value
