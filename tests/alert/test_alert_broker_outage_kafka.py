"""`tracescore alert` (the process, its own log format) while its broker does not answer (paused, as a broker
stuck or cut off by the network is): one warning of its own, with since when and what it holds meanwhile,
the process running on, one line when the broker is back, and the alerts of after the outage still sent."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _helpers import paused
from alert_records import alert_process, record, write_config
from service_processes import ServiceProcess

from tracescore.alert.testing import WebhookReceiver
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

UNREACHABLE = "the Kafka broker is unreachable since"
BACK = "the Kafka broker is reachable again after"
WAIT_S = 180.0  # the session's expiry, or a request's timeout (30 s), then the grace: generous


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def low_records(bootstrap: str, prefix: str, route: str) -> None:
    """Enough low faithfulness on `route` to fire its alert."""
    producer = input_producer(bootstrap, [f"{prefix}.evaluations"], acks="all")
    for _ in range(8):
        producer.send(
            f"{prefix}.evaluations", value=record(0.1, datetime.now(UTC), route=route).to_kafka()[1]
        )
    producer.flush()
    producer.close()


def wait_for(condition: Callable[[], object], what: str, service: ServiceProcess) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if service.process.poll() is not None or time.monotonic() > deadline:
            service.wait(0)
            raise AssertionError(f"never {what}:\n{service.log[-3000:]}")
        time.sleep(0.2)


def firing_routes(receiver: WebhookReceiver) -> list[str]:
    return sorted(str(r.json()["route"]) for r in receiver.requests if r.json()["state"] == "firing")


def test_a_paused_broker_is_said_once_then_its_return_and_the_alerts_after_it_are_sent(
    own_broker: KafkaBroker, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    bootstrap = own_broker.bootstrap_servers
    low_records(bootstrap, topic_prefix, "/r0")
    service = alert_process(bootstrap, write_config(tmp_path, topic_prefix, receiver.url), until_idle=False)
    wait_for(lambda: firing_routes(receiver) == ["/r0"], "the first alert", service)
    assert not service.said(UNREACHABLE)

    with paused(own_broker.process.pid):
        wait_for(lambda: service.said(UNREACHABLE), "said the broker unreachable", service)
    wait_for(lambda: service.said(BACK), "said the broker reachable again", service)
    low_records(bootstrap, topic_prefix, "/r1")
    wait_for(lambda: firing_routes(receiver) == ["/r0", "/r1"], "the alert after the outage", service)
    service.process.send_signal(signal.SIGTERM)
    assert service.wait(timeout_s=60) == 0, service.log[-3000:]

    [warning] = [line for line in service.log.splitlines() if UNREACHABLE in line]
    assert " WARNING tracescore.alert: " in warning, warning
    assert re.search(rf"since \d\d:\d\d:\d\d, for \d+s \(bootstrap {re.escape(bootstrap)}: ", warning), (
        warning
    )
    assert "holds its state in memory" in warning and "nothing is lost" in warning, warning
    [back] = [line for line in service.log.splitlines() if BACK in line]
    assert " INFO tracescore.alert: " in back, back
