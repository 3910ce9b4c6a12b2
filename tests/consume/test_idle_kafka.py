"""When `tracescore consume --idle-timeout` starts counting for a member of a cooperative group: as the
services' members do, an empty assignment starts it only once the group's members outnumber the partitions
(the member gets none for good), never at a join's empty first generation (its partitions come a heartbeat
later). On the real broker, with another member in its own process."""

from __future__ import annotations

import threading

import pytest
from _helpers import consumer_settings
from group_member import GroupMember
from kafka.admin import NewTopic

from tracescore.consume import EvaluationConsumer
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka


def test_a_member_the_group_gives_nothing_for_good_stops_when_idle(bootstrap: str, topic_prefix: str) -> None:
    """Two members, one partition, the other member holding it: this one's empty assignment is for good. Its
    idle clock started only at a partition assigned (a cooperative rebalance calls no listener for an empty
    one), so it never stopped, whatever its `--idle-timeout`."""
    settings = consumer_settings(bootstrap, topic_prefix, idle_timeout_s=1)
    input_producer(bootstrap, [NewTopic(settings.topic, 1, 1)]).close()
    with GroupMember(bootstrap, settings.group_id, settings.topic, "tracescore-consume"):
        consumer = EvaluationConsumer(settings, judge=OfflineJudge(), metrics=[Faithfulness()])
        running = threading.Thread(target=consumer.run, daemon=True)
        running.start()
        running.join(60)  # joining, looking at the group's members, then 1 s idle: seconds
        stopped = not running.is_alive()
        if not stopped:
            consumer.stop()
            running.join(60)
    assert stopped, "given no partition for good, the member never stopped on its idle timeout"
    assert consumer.stats.messages == 0
