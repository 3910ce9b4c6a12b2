"""The keyed topic's partition count, on the real broker: `routes_partitions` and `turns_partitions` act only
when the service creates its keyed topic. One found with another count (the setting raised to run more
instances) was used silently, the instances past its count idle: now the start says so once, naming the
topic, both counts, the setting and what to do, and runs on the topic's count, the state topic alike.
Partitions added to the keyed topic in place (kafka-topics --alter), its keys moved away from their state,
stop the service, at its start or while it runs, saying why."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from _helpers import partitions_on_broker, wait_until
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions, NewTopic

from tracescore._service import ChangelogError, LoopService
from tracescore.alert import AlertConfig, AlertService
from tracescore.conversations import ConversationsConfig, ConversationService

pytestmark = pytest.mark.kafka

_NOT_AS_SET = "partition(s), not the"  # what the warning says, and only it


def alert(bootstrap: str, prefix: str, partitions: int) -> AlertService:
    topics = {f"{name}_topic": f"{prefix}.{name}" for name in ("evaluations", "routes", "state")}
    cfg = AlertConfig(
        bootstrap_servers=bootstrap, group_id=f"{prefix}.alert", routes_partitions=partitions, **topics
    )
    return AlertService(cfg, [])


def conversations(bootstrap: str, prefix: str, partitions: int) -> ConversationService:
    names = ("evaluations", "conversations", "turns", "state", "evidence")
    topics = {f"{name}_topic": f"{prefix}.{name}" for name in names}
    cfg = ConversationsConfig(
        bootstrap_servers=bootstrap,
        group_id=f"{prefix}.conversations",
        turns_partitions=partitions,
        spans_topic=None,
        **topics,
    )
    return ConversationService(cfg)


def create(bootstrap: str, *topics: NewTopic) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics(list(topics))
    admin.close()


@contextmanager
def running(service: LoopService) -> Iterator[None]:
    """`service` on its own thread until its stage 2 was assigned its partitions; stopped, joined on exit."""
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: service.first_assigned_at is not None, "the keyed topic's partitions assigned")
        yield
    finally:
        service.stop()
        thread.join(60)
    assert not thread.is_alive()


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and _NOT_AS_SET in r.message
    ]


@pytest.mark.parametrize(
    ("make", "keyed", "setting", "variable", "topic_setting"),
    [
        (alert, "routes", "routes_partitions", "TRACESCORE_ALERT_ROUTES_PARTITIONS", "routes_topic"),
        (
            conversations,
            "turns",
            "turns_partitions",
            "TRACESCORE_CONVERSATIONS_TURNS_PARTITIONS",
            "turns_topic",
        ),
    ],
    ids=["alert", "conversations"],
)
def test_a_keyed_topic_of_another_count_than_the_setting_is_said_once_and_its_own_count_used(
    bootstrap: str,
    topic_prefix: str,
    caplog: pytest.LogCaptureFixture,
    make: Callable[[str, str, int], LoopService],
    keyed: str,
    setting: str,
    variable: str,
    topic_setting: str,
) -> None:
    """The setting raised from 2 to 3 with the topic already there: the service ran on 2 and said nothing."""
    topic, state = f"{topic_prefix}.{keyed}", f"{topic_prefix}.state"
    create(bootstrap, NewTopic(topic, 2, 1))
    service = make(bootstrap, topic_prefix, 3)
    with running(service):
        assert {tp.partition for tp in service._loop.keyed.consumer.assignment()} == {0, 1}
    assert partitions_on_broker(bootstrap, topic) == 2
    assert partitions_on_broker(bootstrap, state) == 2, "the state topic partitioned like the keyed one"
    [warning] = said(caplog)
    assert warning.startswith(
        f"the topic {topic} has 2 partition(s), not the 3 of {setting} ({variable}, or `{setting}` in "
        f"--config): the setting acts only when "
    )
    assert f"the state topic {state} partitioned alike: at most 2 instances share its keys" in warning
    assert f"For 3, stop every instance and give {topic_setting} and state_topic new names" in warning
    assert f"Never add partitions to {topic} (kafka-topics --alter)" in warning


@pytest.mark.parametrize("beforehand", [True, False], ids=["found", "created"])
def test_a_keyed_topic_of_the_settings_count_is_not_said(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture, beforehand: bool
) -> None:
    topic = f"{topic_prefix}.routes"
    if beforehand:
        create(bootstrap, NewTopic(topic, 2, 1))
    with running(alert(bootstrap, topic_prefix, 2)):
        pass
    assert partitions_on_broker(bootstrap, topic) == 2
    assert said(caplog) == []


def test_partitions_added_to_the_keyed_topic_stop_the_start_saying_so(
    bootstrap: str, topic_prefix: str
) -> None:
    """Its keys moved to other partitions than their state's: the state topic's count, unchanged, tells."""
    topic, state = f"{topic_prefix}.routes", f"{topic_prefix}.state"
    create(
        bootstrap, NewTopic(topic, 2, 1), NewTopic(state, 2, 1, topic_configs={"cleanup.policy": "compact"})
    )
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_partitions({topic: NewPartitions(3)})  # what kafka-topics --alter --partitions 3 does
    admin.close()
    wait_until(lambda: partitions_on_broker(bootstrap, topic) == 3, "the partition added")
    service = alert(bootstrap, topic_prefix, 2)
    with pytest.raises(ChangelogError) as raised:
        service.run(idle_timeout_s=1.0)
    error = str(raised.value)
    assert f"the state topic {state} has 2 partition(s), its source {topic} 3" in error
    assert f"Partitions added to {topic} (kafka-topics --alter) moved its keys away from their state" in error


def test_partitions_added_to_the_keyed_topic_while_it_runs_stop_the_service_saying_so(
    bootstrap: str, topic_prefix: str
) -> None:
    """Its clients would route and read by the new count at their next metadata refresh (5 min), its keys'
    new records away from their state: the service's look at its state topic (every 5 s) sees the change
    first and stops it with the start's line."""
    topic = f"{topic_prefix}.routes"
    service = alert(bootstrap, topic_prefix, 2)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            service.run()
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: service.first_assigned_at is not None, "the routes topic's partitions assigned")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_partitions({topic: NewPartitions(3)})
        admin.close()
        thread.join(60)  # a look every 5 s
    finally:
        service.stop()
        thread.join(60)
    [error] = raised
    assert isinstance(error, ChangelogError), error
    assert f"the topic {topic} has 3 partition(s) now, 2 when the service started" in str(error)
    assert f"Partitions added to {topic} (kafka-topics --alter) moved its keys away" in str(error)
