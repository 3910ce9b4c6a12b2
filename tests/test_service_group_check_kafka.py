"""`tracescore alert` and `tracescore conversations` given one group_id (tracescore/_service/_group_check.py),
on the real broker: their internal topics never meet, but stage 1's group is the user's name, and members of
both in one group split the evaluation records between them, each seeing only part, without a word. Now the
service that finds the other's members in its group stops with one line that says what to do."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from _helpers import wait_until

from tracescore._service._group_check import GroupShared
from tracescore.alert import AlertConfig, AlertService
from tracescore.conversations import ConversationsConfig, ConversationService

pytestmark = pytest.mark.kafka


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


@pytest.mark.parametrize("started_first", ["alert", "conversations"])
def test_two_services_started_together_in_one_group_do_not_both_read_on(
    bootstrap: str, topic_prefix: str, started_first: str
) -> None:
    """Both join before either looks: the rebalance that brings the other's member has one look again."""
    group = f"{topic_prefix}-together"
    services = [alert(bootstrap, topic_prefix, group), conversations(bootstrap, topic_prefix, group)]
    if started_first == "conversations":
        services.reverse()
    threads = [Thread(service.run) for service in services]
    try:
        wait_until(lambda: any(t.raised for t in threads), "a service to find the other", timeout_s=60.0)
    finally:
        for service, thread in zip(services, threads, strict=True):
            service.stop()
            thread.join()
    raised = [exc for t in threads for exc in t.raised]
    assert raised and all(isinstance(exc, GroupShared) for exc in raised), raised
