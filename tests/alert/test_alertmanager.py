"""The Alertmanager sink against the real Alertmanager (Debian's prometheus-alertmanager): the alert is
listed firing in its API and routed to a webhook, then resolved by the same alert with endsAt."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

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
