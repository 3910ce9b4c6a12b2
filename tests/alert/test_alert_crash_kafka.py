"""`tracescore alert` killed with SIGKILL at each step of its checkpoint, then restarted: every alert is
notified, and only a kill in the one window the docs name (after the sinks took a notification, before the
state says so) delivers one again, the same notification. A notification goes to the sinks only once the
state that decided it is saved, so a kill before that loses nothing and the restart delivers it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alert_records import alert_process, record, write_config

from tracescore.alert.testing import WebhookReceiver
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

ROUTES = [f"/r{i}" for i in range(6)]
POINTS = [
    "rekey.sent:1",  # stage 1 sent the re-keyed records, committed nothing
    "keyed.applied:1",  # stage 2 decided the alerts in memory, saved and delivered nothing
    "state.sent:2",  # two routes' states (with their notifications) saved, the rest not
    "state.saved:1",  # every state saved, the routes topic not committed, nothing delivered
    "committed:1",  # committed too, nothing delivered
]
# The one window where a notification can go out twice: the sinks took it, the state does not say so yet.
REPEATS_AT = "delivered:1"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


@pytest.mark.parametrize("point", [*POINTS, REPEATS_AT])
def test_a_kill_at_any_step_loses_no_alert(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path, point: str
) -> None:
    producer = input_producer(bootstrap, [f"{topic_prefix}.evaluations"], acks="all")
    for route in ROUTES:
        for _ in range(8):
            value = record(0.1, datetime.now(UTC), route=route).model_dump_json().encode()
            producer.send(f"{topic_prefix}.evaluations", value=value)
    producer.flush()
    producer.close()
    config = write_config(tmp_path, topic_prefix, receiver.url)

    killed = alert_process(bootstrap, config, crash_at=point)
    assert killed.wait() == -9, f"never reached {point}:\n{killed.log[-3000:]}"
    restarted = alert_process(bootstrap, config)
    assert restarted.wait() == 0, restarted.log[-3000:]

    firing = [r.json() for r in receiver.requests if r.json()["state"] == "firing"]
    per_route = Counter(body["route"] for body in firing)
    assert sorted(per_route) == ROUTES, "every route's alert was notified"
    if point != REPEATS_AT:
        assert set(per_route.values()) == {1}, per_route
    else:
        # What the killed process delivered went out once more, the very same notification.
        assert per_route.total() > len(ROUTES), "the kill came after a delivery"
        for route in ROUTES:
            assert len({json.dumps(b, sort_keys=True) for b in firing if b["route"] == route}) == 1
