"""A route going from warning to critical (and back) reads as an escalation (de-escalation) in every sink,
never as "recovered": the log, the signed webhook, Slack, and the real Alertmanager, which still gets the
lower severity's resolve (so it ends that alert) with words that match."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from alert_records import record

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertmanagerSink,
    AlertmanagerSinkConfig,
    LogSink,
    Notification,
    RuleConfig,
    SlackSink,
    SlackSinkConfig,
    WebhookSink,
    WebhookSinkConfig,
)
from tracescore.alert.testing import AlertmanagerProcess, WebhookReceiver


def escalation_and_back(start: datetime) -> tuple[list[Notification], list[Notification]]:
    """The evaluator's notifications as the route goes warning -> critical, then critical -> warning."""
    rule = RuleConfig(
        signal="score", window_count=6, min_samples=6, warning=0.7, critical=0.4, cooldown_seconds=0,
        renotify_seconds=None, no_data_seconds=None,
    )  # fmt: skip
    ev = AlertEvaluator(AlertConfig(rules=[rule]))

    def feed(score: float, offset: int) -> list[Notification]:
        out = []
        for i in range(6):
            at = start + timedelta(seconds=offset + i)
            key = ev.add(record(score, at))
            assert key is not None
            out += ev.evaluate(key, at)
        return out

    assert [n.severity for n in feed(0.6, 0)] == ["warning"]
    return feed(0.1, 10), feed(0.6, 20)


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def test_the_log_reads_escalated_and_de_escalated(caplog: pytest.LogCaptureFixture) -> None:
    up, down = escalation_and_back(datetime.now(UTC))
    with caplog.at_level(logging.INFO, "tracescore.alert"):
        for note in up + down:
            LogSink().send(note)
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split("]")[0] + "]" for line in lines] == [
        "[ESCALATED]", "[SUPERSEDED]", "[DE-ESCALATED]", "[SUPERSEDED]",
    ]  # fmt: skip
    assert "escalated from warning to critical" in lines[0]
    assert "warning superseded by critical" in lines[1]
    assert "de-escalated from critical to warning" in lines[2]
    assert not any("RESOLVED" in line or "recovered to" in line for line in lines)


def test_the_webhook_body_says_what_changed(receiver: WebhookReceiver) -> None:
    up, _ = escalation_and_back(datetime.now(UTC))
    sink = WebhookSink(WebhookSinkConfig(url=receiver.url + "/hook"))
    for note in up:
        assert sink.send(note)
    firing, resolved = (r.json() for r in receiver.requests)
    assert (firing["headline"], firing["state"], firing["change"], firing["from_severity"]) == (
        "ESCALATED", "firing", "escalated", "warning",
    )  # fmt: skip
    assert (resolved["headline"], resolved["state"], resolved["to_severity"]) == (
        "SUPERSEDED", "resolved", "critical",
    )  # fmt: skip
    assert "not recovered" in resolved["summary"]


def test_slack_reads_escalated_and_never_paints_a_superseded_alert_green(receiver: WebhookReceiver) -> None:
    up, down = escalation_and_back(datetime.now(UTC))
    sink = SlackSink(SlackSinkConfig(url=receiver.url + "/services/T/B/X"))
    for note in up + down:
        assert sink.send(note)
    texts = [r.json()["text"] for r in receiver.requests]
    assert texts[0].startswith(
        ":arrow_double_up: [ESCALATED:critical] faithfulness of rag-api /billing escalated"
    )
    assert texts[1].startswith(":arrows_counterclockwise: [SUPERSEDED:warning]")
    assert texts[2].startswith(":arrow_down_small: [DE-ESCALATED:warning]")
    colours = [r.json()["attachments"][0]["color"] for r in receiver.requests]
    assert "#2eb886" not in colours  # green is for a recovery only
    assert colours[1] == "#d00000"  # the warning's resolve, in the critical colour it escalated to


@pytest.fixture
def alertmanager(receiver: WebhookReceiver) -> Iterator[AlertmanagerProcess]:
    with AlertmanagerProcess(receiver.url + "/alertmanager") as am:
        yield am


def test_alertmanager_ends_the_warning_with_matching_words_and_lists_the_critical(
    alertmanager: AlertmanagerProcess, receiver: WebhookReceiver
) -> None:
    up, _ = escalation_and_back(datetime.now(UTC) - timedelta(minutes=1))
    sink = AlertmanagerSink(AlertmanagerSinkConfig(url=alertmanager.url))
    for note in up:
        assert sink.send(note)
    (active,) = alertmanager.alerts(filter='alertname="TracescoreFaithfulnessDropped"', active="true")
    assert active["labels"]["severity"] == "critical"
    assert active["annotations"]["headline"] == "ESCALATED"
    assert "escalated from warning to critical" in active["annotations"]["summary"]

    # What Alertmanager's receivers get: the warning ended (its own "resolved"), in words that match.
    def warning_ended(got: list) -> bool:  # type: ignore[type-arg]
        return any(_ended_warning(r.json()) for r in got)

    ended = next(a for r in receiver.wait_for(warning_ended) for a in _ended_warnings(r.json()))
    assert ended["annotations"]["headline"] == "SUPERSEDED"
    assert "warning superseded by critical" in ended["annotations"]["summary"]
    assert "not recovered" in ended["annotations"]["summary"]


def _ended_warnings(body: dict) -> list[dict]:  # type: ignore[type-arg]
    alerts = body.get("alerts", [])
    return [a for a in alerts if a["status"] == "resolved" and a["labels"]["severity"] == "warning"]


def _ended_warning(body: dict) -> bool:  # type: ignore[type-arg]
    return bool(_ended_warnings(body))
