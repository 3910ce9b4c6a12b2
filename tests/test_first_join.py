"""kafka-python's "No partition metadata for topic X" at a member's first join (tracescore/_first_join.py):
at a first start it said, as a warning, that a topic created or found moments before was missing, though its
partitions came at the rebalance that follows at once. Now that is a debug line of ours; any other time (a
topic deleted while running, a topic the member does not join) the warning is kafka-python's, as it is.

The warning comes from the group leader's assignor, run on the leader's own metadata: here kafka-python's
own assignors are run on metadata without the topic, so the test sees what a first join logs, every time (on
the broker it is a race of the member's metadata request and its join)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from kafka import TopicPartition
from kafka.cluster import ClusterMetadata
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

import tracescore._first_join
from tracescore._kafka import RebalanceListener

# The cooperative protocol's assignor (sticky) logs it the same way, from its own module's logger.
STICKY = logging.getLogger("kafka.coordinator.assignors.sticky.sticky_assignor")


def lead_a_join_without_metadata(topic: str) -> None:
    """What a group leader does at a join when its metadata does not show `topic` yet."""
    member = SimpleNamespace(
        member_id="m-1", group_instance_id=None, metadata=SimpleNamespace(topics=[topic])
    )
    for assignor in (RangePartitionAssignor, RoundRobinPartitionAssignor):  # the eager protocol's
        assignor.assign(ClusterMetadata(), [member])


def warned(caplog: pytest.LogCaptureFixture, topic: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == f"No partition metadata for topic {topic}"]


@pytest.fixture
def first_join() -> Iterator[tracescore._first_join.FirstJoin]:
    """The process's own (`subscribe_topics` and RebalanceListener use it), with nothing expected after."""
    yield tracescore._first_join.first_join
    tracescore._first_join.first_join.joined(["t.spans", "t.routes", "t.late"])


def test_a_first_join_before_the_members_metadata_shows_its_topic_logs_no_warning(
    first_join: tracescore._first_join.FirstJoin, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="tracescore")
    lead_a_join_without_metadata("t.spans")
    assert len(warned(caplog, "t.spans")) == 2  # kafka-python's own warning, as every first start had it
    caplog.clear()

    first_join.expect(["t.spans", "t.routes"])  # what subscribe_topics does before subscribing
    lead_a_join_without_metadata("t.spans")
    STICKY.warning("No partition metadata for topic %s", "t.spans")
    assert not warned(caplog, "t.spans")
    said = [
        r for r in caplog.records if "topic t.spans is not in this member's metadata yet" in r.getMessage()
    ]
    assert len(said) == 3 and all(r.levelno == logging.DEBUG and r.name == "tracescore" for r in said)


def test_the_warning_stays_for_other_topics_and_once_the_topic_was_assigned(
    first_join: tracescore._first_join.FirstJoin,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first_join.expect(["t.spans", "t.routes"])
    lead_a_join_without_metadata("t.other")  # a topic this member does not join: a real one
    assert len(warned(caplog, "t.other")) == 2
    # The member is given the topic's partitions (the listener every member of ours has): from then on the
    # warning is a real one (the topic deleted while running).
    listener = RebalanceListener(
        logging.getLogger("tracescore"), assigned=lambda _: None, revoked=lambda _: None
    )
    listener.on_partitions_assigned([TopicPartition("t.spans", 0)])
    lead_a_join_without_metadata("t.spans")
    assert len(warned(caplog, "t.spans")) == 2
    lead_a_join_without_metadata("t.routes")  # not assigned yet: still the first join's
    assert not warned(caplog, "t.routes")
    # A topic never assigned (more members than partitions) is quiet only for so long after subscribing.
    monkeypatch.setattr(tracescore._first_join, "FIRST_JOIN_S", -1.0)
    first_join.expect(["t.late"])
    lead_a_join_without_metadata("t.late")
    assert len(warned(caplog, "t.late")) == 2
