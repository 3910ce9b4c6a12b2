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
