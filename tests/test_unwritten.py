"""kafka-python's "Topic X not found in cluster metadata" while a reader waits for a topic no writer created
yet (tracescore/_unwritten.py): logged as an ERROR at subscribing and then every 30 s on top of the reader's
own warning, it read like a failure. Now exactly that record, about a topic a reader waits for, is dropped
until the reader is given the topic's partitions; the logger's other records and level are left alone.
The services' tests (tests/cli, tests/alert, tests/conversations) see it end to end on the broker."""

from __future__ import annotations

import gc
import logging

import pytest
from kafka import TopicPartition

from tracescore._kafka import RebalanceListener

CLUSTER = logging.getLogger("kafka.cluster")  # where kafka-python logs it


def not_found(caplog: pytest.LogCaptureFixture, topic: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.getMessage() == f"Topic {topic} not found in cluster metadata"
    ]


def log_not_found(*topics: str) -> None:
    for topic in topics:
        CLUSTER.error("Topic %s not found in cluster metadata", topic)  # kafka.cluster's own call


def test_a_topic_a_reader_waits_for_is_not_said_missing_until_it_is_given_its_partitions(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader = RebalanceListener(
        logging.getLogger("tracescore"), assigned=lambda _: None, revoked=lambda _: None
    )
    level = CLUSTER.level
    reader.subscribed(["w.spans"])  # what subscribe_topics does with a topic found absent
    assert reader.waiting and reader.idle_from == reader.waiting_since
    log_not_found("w.spans", "w.other")
    CLUSTER.error("Topic %s is not authorized for this client", "w.spans")
    assert not not_found(caplog, "w.spans")
    assert not_found(caplog, "w.other"), "a topic nobody waits for: kafka-python's ERROR, as it is"
    assert "Topic w.spans is not authorized for this client" in caplog.text, "another record: as it is"
    assert CLUSTER.level == level

    reader.on_partitions_assigned([TopicPartition("w.spans", 0)])
    assert not reader.waiting and reader.idle_from == reader.first_assigned_at
    log_not_found("w.spans")  # the topic deleted while read: a real error
    assert not_found(caplog, "w.spans")


def test_a_reader_gone_while_waiting_waits_no_more(caplog: pytest.LogCaptureFixture) -> None:
    reader = RebalanceListener(
        logging.getLogger("tracescore"), assigned=lambda _: None, revoked=lambda _: None
    )
    reader.subscribed(["g.spans"])
    log_not_found("g.spans")
    assert not not_found(caplog, "g.spans")
    del reader
    gc.collect()
    log_not_found("g.spans")
    assert not_found(caplog, "g.spans")
