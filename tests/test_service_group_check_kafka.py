"""`tracescore alert` and `tracescore conversations` given one group_id (tracescore/_service/_group_check.py),
on the real broker: their internal topics never meet, but stage 1's group is the user's name, and members of
both in one group split the evaluation records between them, each seeing only part, without a word. Now the
service that finds the other's members in its group stops with one line that says what to do."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from _helpers import wait_until
from group_member import GroupMember
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import CoordinatorLoadInProgressError, KafkaTimeoutError

from tracescore._kafka_config import KafkaConnection
from tracescore._service import _group_check as group_check
from tracescore._service._group_check import GroupCheck, GroupShared, client_id
from tracescore.alert import AlertConfig, AlertService
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import EvaluationRecord, MetricStatus
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka


def record(score: float, route: str) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=uuid.uuid4().hex, span_id=uuid.uuid4().hex[:16], service_name="rag-api", route=route,
        metric="faithfulness", score=score, label=None, status=MetricStatus.OK, judge="offline",
        timestamp=datetime.now(UTC),
    )  # fmt: skip


def alert(bootstrap: str, prefix: str, group: str) -> AlertService:
    cfg = AlertConfig(
        bootstrap_servers=bootstrap,
        evaluations_topic=f"{prefix}.evaluations",
        group_id=group,
        tick_seconds=0.5,
    )
    return AlertService(cfg, [])


def conversations(bootstrap: str, prefix: str, group: str) -> ConversationService:
    cfg = ConversationsConfig(
        bootstrap_servers=bootstrap, evaluations_topic=f"{prefix}.evaluations",
        conversations_topic=f"{prefix}.conversations", spans_topic="", evidence_topic="", group_id=group,
        tick_seconds=0.2,
    )  # fmt: skip
    return ConversationService(cfg)


def written(bootstrap: str, prefix: str) -> None:
    """The evaluations topic, as `tracescore consume` creates it: a service joins stage 1's group only once
    the topic it reads exists (it waits for it unsubscribed), so only then are the two services' members in
    one group."""
    input_producer(bootstrap, [f"{prefix}.evaluations"]).close()


class Thread:
    """`run()` of a service on a thread; what it raised, if anything."""

    def __init__(self, run: Callable[[], object]) -> None:
        self.raised: list[Exception] = []
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True)
        self._thread.start()

    def _run(self, run: Callable[[], object]) -> None:
        try:
            run()
        except Exception as exc:  # what the command line would print, as one line
            self.raised.append(exc)

    def join(self) -> None:
        self._thread.join(60)
        assert not self._thread.is_alive()


def test_conversations_started_in_the_group_alert_runs_in_stops_with_one_line(
    bootstrap: str, topic_prefix: str
) -> None:
    group = f"{topic_prefix}-shared"
    written(bootstrap, topic_prefix)
    first = alert(bootstrap, topic_prefix, group)
    running = Thread(first.run)
    try:
        wait_until(lambda: first.first_assigned_at is not None, "alert in its group")
        second = conversations(bootstrap, topic_prefix, group)
        with pytest.raises(GroupShared) as raised:
            second.run(idle_timeout_s=3.0)  # looks before it joins: nothing of the records read
        message = str(raised.value)
        assert f"group '{group}' also has members of tracescore alert" in message
        assert "Give each service its own group_id" in message
        assert second.stats.turn_records == 0
        assert not running.raised  # alert reads on, alone in its group
    finally:
        first.stop()
        running.join()
    assert not running.raised


@contextmanager
def both_running(
    bootstrap: str, prefix: str, group: str, started_first: str
) -> Iterator[tuple[list[AlertService | ConversationService], list[Thread]]]:
    """tracescore alert and tracescore conversations in `group`, `started_first` first, each on a thread;
    stopped and joined on exit."""
    services = [alert(bootstrap, prefix, group), conversations(bootstrap, prefix, group)]
    if started_first == "conversations":
        services.reverse()
    threads = [Thread(service.run) for service in services]
    try:
        yield services, threads
    finally:
        for service, thread in zip(services, threads, strict=True):
            service.stop()
            thread.join()


def one_said_the_group_is_shared(threads: list[Thread], group: str) -> None:
    """A service stopped with the one line that says what to do; none for another reason."""
    raised = [exc for t in threads for exc in t.raised]
    assert raised and all(isinstance(exc, GroupShared) for exc in raised), raised
    for exc in raised:
        assert f"group '{group}' also has members of tracescore " in str(exc)
        assert "Give each service its own group_id" in str(exc)


@pytest.mark.parametrize("started_first", ["alert", "conversations"])
def test_two_services_started_together_in_one_group_do_not_both_read_on(
    bootstrap: str, topic_prefix: str, started_first: str
) -> None:
    """Both join before either looks: the rebalance that brings the other's member has one look again."""
    group = f"{topic_prefix}-together"
    written(bootstrap, topic_prefix)
    with both_running(bootstrap, topic_prefix, group, started_first) as (_, threads):
        wait_until(lambda: any(t.raised for t in threads), "a service to find the other", timeout_s=60.0)
    one_said_the_group_is_shared(threads, group)


def test_a_member_that_came_after_the_look_before_joining_stops_before_re_keying_the_batch_it_joined_to(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Two pods started together: the other service's member joins between this one's look and its join.
    The poll that brings the new assignment often brings its first batch too; the look at the group comes
    between the two, so none of it is re-keyed (it stays uncommitted, for the group's own service)."""
    # The service's looks given up on (debug), and kafka-python's joins and expiries, shown if it fails.
    caplog.set_level(logging.DEBUG, logger="tracescore")
    caplog.set_level(logging.INFO, logger="kafka.coordinator")
    group = f"{topic_prefix}-late"
    evaluations = f"{topic_prefix}.evaluations"
    producer = input_producer(bootstrap, [evaluations])
    for n in range(200):  # waiting on every partition: the first fetch after the join brings some at once
        producer.send(evaluations, record(0.9, route=f"/r{n % 20}").model_dump_json().encode())
    producer.flush()
    producer.close()
    looks = []
    members = GroupCheck._members
    answers: list[list[str]] = []  # the client ids each look after joining found, shown with a failure

    def look_made_before_the_other_joined(self: GroupCheck) -> list[dict[str, object]]:
        looks.append(self.group_id)
        if len(looks) == 1:
            return []
        found = members(self)
        answers.append(sorted(str(member.get("client_id")) for member in found))
        return found

    # A member of tracescore conversations, as the group sees it (its client id), in a process of its own:
    # on a thread of this one it waited on the service's work under load, the coordinator expired it, and
    # the service's look after joining found nobody (DID NOT RAISE; its leave got UnknownMemberId).
    with GroupMember(bootstrap, group, evaluations, client_id("tracescore conversations")) as other:
        monkeypatch.setattr(GroupCheck, "_members", look_made_before_the_other_joined)
        service = alert(bootstrap, topic_prefix, group)
        try:
            with pytest.raises(GroupShared, match="also has members of tracescore conversations"):
                service.run(idle_timeout_s=30.0)
        finally:
            # The stand-in stalled (kafka-python 3.0.12 under load, its IO loop blocked for seconds) and
            # expired before this service's join: the looks then rightly find it alone.
            print(f"the looks after joining found: {answers}")
            print(f"the stand-in's lines:\n{other.log}")  # pytest shows them with a failure only
    assert len(looks) >= 2, "the look after joining"
    assert read_topic(bootstrap, f"{group}.routes") == [], "re-keyed before the look at the new group"


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("started_first", ["alert", "conversations"])
def test_two_services_in_one_group_started_before_their_input_exists_do_not_both_read_on(
    bootstrap: str, topic_prefix: str, started_first: str, partitions: int
) -> None:
    """Deployed before `tracescore consume` wrote anything: neither joins stage 1's group until the topic
    exists (each waits for it unsubscribed), so the look before joining finds nobody. Once it is created,
    both join, and the rebalance has one find the other, with the same line as at a start."""
    group = f"{topic_prefix}-before"
    with both_running(bootstrap, topic_prefix, group, started_first) as (services, threads):
        for service in services:  # stage 2 assigned: stage 1 subscribed to what exists and looked
            wait_until(
                lambda s=service: s.first_assigned_at is not None, "both services waiting", timeout_s=90.0
            )
        assert not any(t.raised for t in threads)
        input_producer(bootstrap, [NewTopic(f"{topic_prefix}.evaluations", partitions, 1)]).close()
        wait_until(lambda: any(t.raised for t in threads), "a service to find the other", timeout_s=90.0)
    one_said_the_group_is_shared(threads, group)


def test_each_service_run_looks_at_its_group_on_one_admin_client_closed_at_the_stop(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look at the group made an admin client (a connection, a metadata bootstrap) at every look: after
    each rebalance of stage 1. Now one per group a service run looks at (stage 1's, and stage 2's own), for
    every look across the group's generations, and closed when the run stops. Here alert looks at stage 1's
    group before its first poll and again once assigned, then
    conversations starts in its group and finds it. (Both started together, the second's look before joining
    could find the first before the first's second look: each looked once, under load.)"""
    made: list[Counted] = []
    looks: list[tuple[str, str]] = []  # (client id, group)

    class Counted(KafkaAdminClient):
        def __init__(self, **config: Any) -> None:
            super().__init__(**config)
            self.client_id, self.closed = str(config["client_id"]), False
            self.groups: set[str] = set()
            made.append(self)

        def describe_groups(self, group_ids: list[str], *args: Any, **kwargs: Any) -> Any:
            looks.extend((self.client_id, g) for g in group_ids)
            self.groups.update(group_ids)
            return super().describe_groups(group_ids, *args, **kwargs)

        def close(self) -> None:
            self.closed = True
            super().close()

    monkeypatch.setattr(group_check, "KafkaAdminClient", Counted)
    group = f"{topic_prefix}-one-client"
    written(bootstrap, topic_prefix)
    services: list[AlertService | ConversationService] = [alert(bootstrap, topic_prefix, group)]
    threads = [Thread(services[0].run)]
    try:
        alert_looks = (client_id("tracescore alert"), group)
        wait_until(lambda: looks.count(alert_looks) >= 2, "alert to look once assigned")
        services.append(conversations(bootstrap, topic_prefix, group))
        threads.append(Thread(services[1].run))
        wait_until(lambda: any(t.raised for t in threads), "a service to find the other", timeout_s=60.0)
    finally:
        for service, thread in zip(services, threads, strict=True):
            service.stop()
            thread.join()
    one_said_the_group_is_shared(threads, group)  # the looks still see the group as it is now
    looked = Counter(looks)
    assert looked[alert_looks] >= 2, looked  # alert looked at stage 1's group more than once
    made_for = Counter((admin.client_id, g) for admin in made for g in admin.groups)
    assert made_for == Counter(dict.fromkeys(looked, 1)), f"admin clients made {made_for}, looks {looked}"
    assert all(len(admin.groups) == 1 for admin in made), "one group's looks per admin client"
    assert all(admin.closed for admin in made), "an admin client left open after the stop"


def looked_again(look: GroupCheck) -> Callable[[], GroupShared | None]:
    """A pass of the service's loop (`look()`), as a condition for `wait_until`: what it raised, if it did."""

    def passed() -> GroupShared | None:
        try:
            look()
        except GroupShared as shared:
            return shared
        return None

    return passed


@contextmanager
def alert_looks_beside_the_other(bootstrap: str, prefix: str, name: str) -> Iterator[tuple[str, GroupCheck]]:
    """tracescore alert's looks at group `{prefix}-{name}` (closed on exit), with a stand-in member of
    tracescore conversations in it; the group's name."""
    group, evaluations = f"{prefix}-{name}", f"{prefix}.evaluations"
    written(bootstrap, prefix)
    with GroupMember(bootstrap, group, evaluations, client_id("tracescore conversations")) as other:
        look = GroupCheck(
            KafkaConnection(bootstrap_servers=bootstrap), group, "tracescore alert", lambda: False
        )
        try:
            yield group, look
        finally:
            look.close()
            print(f"the stand-in's lines:\n{other.log}")  # pytest shows them with a failure only


def test_a_look_at_the_group_the_broker_did_not_answer_is_tried_again_until_one_is_answered(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look after a rebalance is the one that finds the other service's member that rebalance brought. A
    look the broker did not answer (restarting just then, the group back with the same generation after it)
    was given up until the group changed again, said at debug level only: the services read on in one group,
    each seeing part of the records, without a word. Now it is tried again, later (not at every pass), until
    one is answered. Here the first look fails as kafka-python's does when no answer comes, and nothing in
    the group changes after it. (A broker paused by SIGSTOP raced the look: a broker that had not stopped
    yet, or not the test's, answered it.)"""
    monkeypatch.setattr(group_check, "RETRY_S", (1.0, 2.0), raising=False)  # for the test's time only
    members = GroupCheck._members
    asked: list[float] = []

    def unanswered_first(self: GroupCheck) -> list[dict[str, object]]:
        asked.append(time.monotonic())
        if len(asked) == 1:
            raise KafkaTimeoutError("no answer (the test's)")
        return members(self)

    monkeypatch.setattr(GroupCheck, "_members", unanswered_first)
    with alert_looks_beside_the_other(bootstrap, topic_prefix, "again") as (group, look):
        look()  # before the first poll: no answer, and no GroupShared
        look()  # the next pass, at once: not tried again yet
        assert len(asked) == 1, "tried again at once"
        shared = wait_until(looked_again(look), "the look tried again", timeout_s=60.0)
    assert f"group '{group}' also has members of tracescore conversations" in str(shared)
    assert asked[1] - asked[0] >= 1.0, "tried again before the pause"


def test_the_answer_of_a_look_given_up_on_asked_before_a_change_is_not_taken_for_the_group_after_it(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look given up on (no answer within BROKER_WAIT_S) still runs, and the next look waits for it: one
    call at a time on the client. Its answer is the group as it was when it was asked. The look after a
    change (the other service's member joined meanwhile) took that old answer for the group after the change,
    found nobody, and the member went unnoticed: both services read on. Now an answer asked before the
    latest change has the group looked at again. Here a look is asked, for real, before the other service's
    member joins, and its answer comes only after it joined and the look was given up on."""
    members = GroupCheck._members
    late, asked, answer = threading.Event(), threading.Event(), threading.Event()

    def answered_late(self: GroupCheck) -> list[dict[str, object]]:
        found = members(self)
        if late.is_set():
            asked.set()
            answer.wait(60)  # the answer on its way until the test lets it come
        return found

    monkeypatch.setattr(GroupCheck, "_members", answered_late)
    group, evaluations = f"{topic_prefix}-old-answer", f"{topic_prefix}.evaluations"
    written(bootstrap, topic_prefix)
    look = GroupCheck(KafkaConnection(bootstrap_servers=bootstrap), group, "tracescore alert", lambda: False)
    try:
        look()  # before the first poll: nobody in the group (the looks' admin client made, with its waits)
        monkeypatch.setattr(group_check, "BROKER_WAIT_S", 1.0)  # the looks' wait from here (the test's time)
        late.set()
        look.changed(())
        look()  # given up on after BROKER_WAIT_S: asked with nobody in the group, its answer on its way
        wait_until(asked.is_set, "the look asked")
        with GroupMember(bootstrap, group, evaluations, client_id("tracescore conversations")) as other:
            look.changed(())  # the rebalance that brought it
            answer.set()  # the old look answers: nobody
            try:
                shared = wait_until(looked_again(look), "a look after the change", timeout_s=60.0)
            finally:
                print(f"the stand-in's lines:\n{other.log}")  # pytest shows them with a failure only
    finally:
        answer.set()
        look.close()
    assert f"group '{group}' also has members of tracescore conversations" in str(shared)


def test_a_look_the_broker_answered_with_an_error_for_the_group_is_no_answer(
    bootstrap: str, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-python 3.0.12 returns the broker's error for a described group as text beside no members: the
    group's coordinator still loading after a broker restart (the case the looks are tried again for) read as
    a group with nobody in it, and was not looked at again. Now it is a look the broker did not answer, tried
    again. Here the first DescribeGroups answer is the one a loading coordinator gives, as kafka-python
    returns it."""
    monkeypatch.setattr(group_check, "RETRY_S", (1.0, 2.0), raising=False)
    described: list[str] = []

    class Loading(KafkaAdminClient):
        def describe_groups(self, group_ids: list[str], *args: Any, **kwargs: Any) -> Any:
            described.extend(group_ids)
            if len(described) == 1:
                error = str(CoordinatorLoadInProgressError(""))
                return {group_ids[0]: {"group_id": group_ids[0], "error": error, "members": []}}
            return super().describe_groups(group_ids, *args, **kwargs)

    monkeypatch.setattr(group_check, "KafkaAdminClient", Loading)
    with alert_looks_beside_the_other(bootstrap, topic_prefix, "loading") as (group, look):
        look()  # the coordinator loading: no answer, and no GroupShared
        shared = wait_until(looked_again(look), "the look tried again", timeout_s=60.0)
    assert f"group '{group}' also has members of tracescore conversations" in str(shared)
    assert len(described) >= 2
