"""`TracescoreNoData` through `tracescore alert` on the real broker: a route whose records stop gets it, and
its next record resolves it; a start on a backlog (the service was down two hours) reads the oldest records
first, and does not take a route whose newest record it has not read yet for a route gone quiet."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alert_records import alert_process, produce, record, write_config

from tracescore.alert.testing import ReceivedRequest, WebhookReceiver

pytestmark = pytest.mark.kafka

NO_DATA = "TracescoreNoData"
ROUTES = [f"/r{i}" for i in range(5)]


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def no_data(state: str):  # type: ignore[no-untyped-def]
    def seen(got: list[ReceivedRequest]) -> bool:
        return any(r.json()["alertname"] == NO_DATA and r.json()["state"] == state for r in got)

    return seen


def test_a_start_on_two_hours_of_records_pages_no_route_as_quiet(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    backlog = [
        record(1.0, now - timedelta(hours=2) + timedelta(seconds=36 * i), route=ROUTES[i % len(ROUTES)])
        for i in range(200)
    ]
    produce(bootstrap, f"{topic_prefix}.evaluations", [r.model_dump_json().encode() for r in backlog])
    rule = {"window_count": 8, "min_samples": 8, "critical": None, "no_data_seconds": 1800}
    service = alert_process(bootstrap, write_config(tmp_path, topic_prefix, receiver.url, rules=[rule]))
    assert service.wait() == 0, service.log[-3000:]
    assert "records=200" in service.log, service.log[-3000:]
    pages = [r.json()["summary"] for r in receiver.requests if r.json()["alertname"] == NO_DATA]
    assert pages == [], "routes whose newest records were still to read were paged as quiet"


def test_a_route_whose_records_stop_is_paged_as_quiet_and_its_next_record_resolves_it(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    topic = f"{topic_prefix}.evaluations"
    produce(bootstrap, topic, [record(1.0, datetime.now(UTC)).model_dump_json().encode()])
    rule = {"window_count": 8, "min_samples": 8, "critical": None, "no_data_seconds": 2}
    config = write_config(tmp_path, topic_prefix, receiver.url, rules=[rule])
    service = alert_process(bootstrap, config, until_idle=False)
    try:
        receiver.wait_for(no_data("firing"))
        produce(bootstrap, topic, [record(1.0, datetime.now(UTC)).model_dump_json().encode()])
        receiver.wait_for(no_data("resolved"))
    finally:
        service.process.send_signal(signal.SIGTERM)
        assert service.wait(timeout_s=120) == 0, service.log[-3000:]
    (firing,) = [r.json() for r in receiver.requests if r.json()["state"] == "firing"]
    assert firing["summary"].startswith("no evaluations of rag-api /billing (faithfulness) since ")


def test_by_default_a_busy_route_gone_quiet_is_paged_and_a_quiet_one_as_quiet_as_usual_is_not(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    # A day of history each: /busy an answer every 2 minutes, /quiet one every 40 minutes, both silent for the
    # last 40 minutes. The fixed rule (any 60 s of silence) would page both; the route's own rate pages /busy
    # only (it expects ~19 answers in 40 minutes; /quiet, one).
    topic, now = f"{topic_prefix}.evaluations", datetime.now(UTC)
    last = now - timedelta(minutes=40)
    history = [record(1.0, last - timedelta(minutes=2 * i), route="/busy") for i in range(26 * 30)]
    history += [record(1.0, last - timedelta(minutes=40 * i), route="/quiet") for i in range(39)]
    history.sort(key=lambda r: r.timestamp)
    produce(bootstrap, topic, [r.model_dump_json().encode() for r in history])
    rule = {"window_count": 8, "min_samples": 8, "critical": None, "no_data_mode": "unusual"}
    config = write_config(tmp_path, topic_prefix, receiver.url, rules=[{**rule, "no_data_seconds": 60}])
    service = alert_process(bootstrap, config, until_idle=False)
    try:
        receiver.wait_for(no_data("firing"))
        produce(bootstrap, topic, [record(1.0, datetime.now(UTC), route="/busy").model_dump_json().encode()])
        receiver.wait_for(no_data("resolved"))
    finally:
        service.process.send_signal(signal.SIGTERM)
        assert service.wait(timeout_s=120) == 0, service.log[-3000:]
    pages = [
        (r.json()["route"], r.json()["state"]) for r in receiver.requests if r.json()["alertname"] == NO_DATA
    ]
    assert pages == [("/busy", "firing"), ("/busy", "resolved")], pages
    assert "rag-api /quiet faithfulness: rate known, at least " in service.log, service.log[-3000:]
