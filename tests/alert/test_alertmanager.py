"""The Alertmanager sink against the real Alertmanager (Debian's prometheus-alertmanager): the alert is
listed firing in its API and routed to a webhook, then resolved by the same alert with endsAt; the shipped
deploy/alertmanager/alertmanager.yml mutes a route's warnings under its critical alert."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from _helpers import wait_until
from alert_records import shipped_alertmanager

from tracescore.alert import AlertmanagerSink, AlertmanagerSinkConfig, Notification
from tracescore.alert.testing import AlertmanagerProcess, WebhookReceiver


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


@pytest.fixture
def alertmanager(receiver: WebhookReceiver) -> Iterator[AlertmanagerProcess]:
    with AlertmanagerProcess(receiver.url + "/alertmanager") as am:
        yield am


def note(state: str, started: datetime) -> Notification:
    return Notification(
        alertname="TracescoreFaithfulnessDropped",
        state=state,  # type: ignore[arg-type]
        severity="warning",
        service="rag-api",
        route="/billing",
        metric="faithfulness",
        summary=f"faithfulness of rag-api /billing {state}",
        starts_at=started,
        ends_at=datetime.now(UTC) if state == "resolved" else None,
    )


def test_alert_is_listed_firing_then_resolved(
    alertmanager: AlertmanagerProcess, receiver: WebhookReceiver
) -> None:
    sink = AlertmanagerSink(AlertmanagerSinkConfig(url=alertmanager.url))
    started = datetime.now(UTC)
    assert sink.send(note("firing", started))

    (listed,) = alertmanager.alerts(filter='alertname="TracescoreFaithfulnessDropped"')
    assert listed["status"]["state"] == "active"
    assert listed["labels"]["tracescore_route"] == "/billing"
    assert listed["annotations"]["summary"] == "faithfulness of rag-api /billing firing"

    def webhook_status(status: str):  # type: ignore[no-untyped-def]
        return lambda got: any(r.json()["status"] == status for r in got)

    firing = receiver.wait_for(webhook_status("firing"))[-1].json()
    assert firing["alerts"][0]["labels"]["service_name"] == "rag-api"

    assert sink.send(note("resolved", started))
    assert alertmanager.alerts(filter='alertname="TracescoreFaithfulnessDropped"', active="true") == []
    resolved = [
        r.json() for r in receiver.wait_for(webhook_status("resolved")) if r.json()["status"] == "resolved"
    ]
    assert resolved[0]["alerts"][0]["endsAt"] != "0001-01-01T00:00:00Z"


def shipped_note(alertname: str, severity: str, route: str) -> Notification:
    return Notification(
        alertname=alertname,
        state="firing",
        severity=severity,  # type: ignore[arg-type]
        service="rag-api",
        route=route,
        metric="faithfulness",
        summary=f"{alertname} {severity} {route}",
        starts_at=datetime.now(UTC),
    )


def test_the_shipped_config_lets_a_route_s_critical_alert_mute_its_warnings_only(
    receiver: WebhookReceiver,
) -> None:
    # Its critical threshold alert and its warning drop alert are one page on the route, the critical; the
    # judge's health on that route, and another route's warning, still page.
    with shipped_alertmanager(receiver.url + "/alertmanager") as manager:
        sink = AlertmanagerSink(AlertmanagerSinkConfig(url=manager.url))
        for note in (
            shipped_note("TracescoreFaithfulnessDropped", "critical", "/billing"),
            shipped_note("TracescoreFaithfulnessBelowNormal", "warning", "/billing"),
            shipped_note("TracescoreFaithfulnessBelowNormal", "warning", "/search"),
            shipped_note("TracescoreJudgeUnhealthy", "warning", "/billing"),
        ):
            assert sink.send(note)

        def paged(got: list) -> set[tuple[str, str]]:  # type: ignore[type-arg]
            return {
                (a["labels"]["alertname"], a["labels"]["tracescore_route"])
                for r in got
                for a in r.json()["alerts"]
            }

        receiver.wait_for(
            lambda got: (
                {
                    ("TracescoreFaithfulnessDropped", "/billing"),
                    ("TracescoreFaithfulnessBelowNormal", "/search"),
                    ("TracescoreJudgeUnhealthy", "/billing"),
                }
                <= paged(got)
            )
        )

        def state(alertname: str, route: str) -> str:
            listed = manager.alerts(filter=f'alertname="{alertname}"')
            (alert,) = [a for a in listed if a["labels"]["tracescore_route"] == route]
            return str(alert["status"]["state"])

        wait_until(
            lambda: state("TracescoreFaithfulnessBelowNormal", "/billing") == "suppressed",
            "the route's warning drop alert muted by its critical threshold alert",
            timeout_s=30,
        )
        assert ("TracescoreFaithfulnessBelowNormal", "/billing") not in paged(receiver.requests)
        assert state("TracescoreFaithfulnessBelowNormal", "/search") == "active"
        assert state("TracescoreJudgeUnhealthy", "/billing") == "active"
