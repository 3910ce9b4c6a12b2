"""What the person on call reads, end to end: `tracescore alert` (a process) on the real broker, a route that
goes from healthy to warning to critical and back, its notifications to a signed webhook and to the real
Alertmanager running the shipped deploy/alertmanager/alertmanager.yml. Each page names the route and the
command to run first; an escalation never reads as resolved, in the webhook body as in what Alertmanager
sends on; restarted mid-alert, the service repeats nothing."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _helpers import wait_until
from alert_records import alert_process, produce, record, shipped_alertmanager, write_config

from tracescore.alert.testing import AlertmanagerProcess, ReceivedRequest, WebhookReceiver

pytestmark = pytest.mark.kafka

THRESHOLD, DROP = "TracescoreFaithfulnessDropped", "TracescoreFaithfulnessBelowNormal"
FIRST_STEP = (
    "see the flagged answers: tracescore tail --flagged --service rag-api --route /billing --last 1000"
)
RULE = {
    "window_count": 20, "min_samples": 10, "warning": 0.7, "critical": 0.4, "cooldown_seconds": 0,
    "renotify_seconds": None, "no_data_seconds": None,
    "drop": {"min_drop": 0.1, "window_count": 20, "min_samples": 10, "normal_count": 100,
             "min_normal_samples": 50},
}  # fmt: skip


@pytest.fixture
def receivers() -> Iterator[tuple[WebhookReceiver, WebhookReceiver, AlertmanagerProcess]]:
    """The webhook the service posts to; the real Alertmanager (the shipped config) and the receiver it
    sends on to."""
    with (
        WebhookReceiver() as hook,
        WebhookReceiver() as relayed,
        shipped_alertmanager(relayed.url + "/alertmanager") as alertmanager,
    ):
        yield hook, relayed, alertmanager


class Answers:
    """/billing's answers, each its own time from now on, faithful or not in a repeating pattern."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic, self.at = bootstrap, topic, datetime.now(UTC)

    def send(self, n: int, faithful_every: int, of: int) -> None:
        values = []
        for i in range(n):
            self.at = max(self.at + timedelta(milliseconds=5), datetime.now(UTC))
            score = 1.0 if i % of < faithful_every else 0.0
            values.append(record(score, self.at).model_dump_json().encode())
        produce(self.bootstrap, self.topic, values)


def bodies(receiver: WebhookReceiver, alertname: str) -> list[dict[str, Any]]:
    return [r.json() for r in receiver.requests if r.json()["alertname"] == alertname]


def got(alertname: str, headline: str):  # type: ignore[no-untyped-def]
    def seen(requests: list[ReceivedRequest]) -> bool:
        return any(r.json()["alertname"] == alertname and r.json()["headline"] == headline for r in requests)

    return seen


def relayed_groups(relayed: WebhookReceiver, alertname: str) -> list[dict[str, Any]]:
    return [r.json() for r in relayed.requests if r.json()["groupLabels"].get("alertname") == alertname]


def test_the_pages_of_a_route_that_drifts_and_recovers_read_right_in_every_receiver(
    bootstrap: str,
    topic_prefix: str,
    receivers: tuple[WebhookReceiver, WebhookReceiver, AlertmanagerProcess],
    tmp_path: Path,
) -> None:
    hook, relayed, alertmanager = receivers
    sinks = [
        {"type": "webhook", "url": hook.url + "/hook", "secret": "s3cret"},
        {"type": "alertmanager", "url": alertmanager.url, "resend_seconds": 2},
    ]
    config = write_config(tmp_path, topic_prefix, hook.url, rules=[RULE], sinks=sinks)
    answers = Answers(bootstrap, f"{topic_prefix}.evaluations")
    service = alert_process(bootstrap, config, until_idle=False)
    answers.send(100, 19, 20)  # healthy: 95% faithful, the normal
    wait_until(lambda: service.said("normal learned"), "the route's normal learned")
    answers.send(20, 1, 2)  # half of them unfaithful: below the warning threshold
    hook.wait_for(got(THRESHOLD, "FIRING"))
    answers.send(20, 0, 1)  # all unfaithful: below the critical threshold
    hook.wait_for(got(THRESHOLD, "SUPERSEDED"))
    hook.wait_for(got(DROP, "FIRING"))

    # While it fires critical, Alertmanager holds the alert with what routing, grouping and the person need.
    (listed,) = alertmanager.alerts(filter=f'alertname="{THRESHOLD}"', active="true")
    assert {k: listed["labels"][k] for k in ("severity", "service_name", "tracescore_route", "metric")} == {
        "severity": "critical", "service_name": "rag-api", "tracescore_route": "/billing",
        "metric": "faithfulness",
    }  # fmt: skip
    assert listed["annotations"]["first_step"] == FIRST_STEP

    # Restarted mid-alert: it reads its state back and sends nothing again.
    before = len(hook.requests)
    service.process.send_signal(signal.SIGTERM)
    assert service.wait(timeout_s=120) == 0, service.log[-3000:]
    service = alert_process(bootstrap, config, until_idle=False)
    wait_until(lambda: service.said("restored"), "the restarted service to read its state back")
    answers.send(60, 1, 1)  # recovered
    hook.wait_for(got(THRESHOLD, "RESOLVED"))
    service.process.send_signal(signal.SIGTERM)
    assert service.wait(timeout_s=120) == 0, service.log[-3000:]
    after = {r.json()["headline"] for r in hook.requests[before:]}
    assert after <= {"DE-ESCALATED", "SUPERSEDED", "RESOLVED"}, f"the restart repeated a page: {after}"

    # The webhook: each page names the route and says what to run first; the threshold's and the drop's
    # pages read apart; the warning's end at the escalation says it is no recovery; only the end recovers.
    threshold = bodies(hook, THRESHOLD)
    headlines = [(b["headline"], b["severity"]) for b in threshold]
    assert headlines[:3] == [("FIRING", "warning"), ("ESCALATED", "critical"), ("SUPERSEDED", "warning")]
    assert headlines[-1][0] == "RESOLVED" and [h for h, _ in headlines].count("RESOLVED") == 1, headlines
    assert "not recovered" in threshold[2]["summary"] and "recovered to" in threshold[-1]["summary"]
    for body in threshold + bodies(hook, DROP):
        assert (body["service"], body["route"], body["labels"]["tracescore_route"]) == (
            "rag-api", "/billing", "/billing",
        )  # fmt: skip
        assert body["first_step"] == (FIRST_STEP if body["state"] == "firing" else None), body
    assert "dropped to" in threshold[0]["summary"] and "< warning threshold" in threshold[0]["summary"]
    drop_page = next(b for b in bodies(hook, DROP) if b["state"] == "firing")
    assert "below its normal" in drop_page["summary"] and drop_page["normal"] is not None

    # Alertmanager's receiver: the threshold alert's group reads FIRING through the escalation (the critical
    # alert and the warning it superseded arrive together), and RESOLVED once only, at the recovery.
    def recovered(requests: list[ReceivedRequest]) -> bool:
        return any(_recovery(group) for group in relayed_groups(relayed, THRESHOLD))

    relayed.wait_for(recovered)
    groups = relayed_groups(relayed, THRESHOLD)
    end = next(i for i, group in enumerate(groups) if _recovery(group))
    assert [g["status"] for g in groups[:end]] == ["firing"] * end, [
        (g["status"], [(a["status"], a["labels"]["severity"]) for a in g["alerts"]]) for g in groups
    ]
    firing = [a for g in groups for a in g["alerts"] if a["status"] == "firing"]
    assert firing and all(a["annotations"]["first_step"] == FIRST_STEP for a in firing)


def _recovery(group: dict[str, Any]) -> bool:
    """Alertmanager's notification of the alert resolved by a real recovery."""
    summaries = [a["annotations"]["summary"] for a in group["alerts"]]
    return group["status"] == "resolved" and any("recovered to" in summary for summary in summaries)
