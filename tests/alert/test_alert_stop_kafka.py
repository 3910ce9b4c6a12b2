"""`tracescore alert` stopped (SIGTERM) while it waits beyond itself: a webhook receiver that hangs, or a
broker that stopped answering while stage 1 waited for its re-keyed records. No signal interrupts those
waits; the stop gives up on them at `stop_timeout_s`, says in one line what was not done and what the next
start does about it, and exits 0, instead of ending by the backstop 2 s later (status 1, nothing said) or
waiting out the receiver. The next start then does what the line says: nothing is lost."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _helpers import paused
from alert_records import alert_process, record, service_config, write_config
from service_processes import ServiceProcess

from tracescore.alert import AlertService, LogSink
from tracescore.alert.testing import WebhookReceiver
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

# Long enough for the closing steps on a loaded CI machine (3 s ended by the backstop at load ~35: the
# steps after the abandoned wait had no CPU); the waits under test hang for longer than any budget.
STOP_TIMEOUT_S = 10.0
STOPPING = f"stopping within stop_timeout_s ({STOP_TIMEOUT_S:g}s): "


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def low_records(bootstrap: str, prefix: str, route: str = "/r0") -> None:
    """Enough low faithfulness on `route` to fire its alert."""
    producer = input_producer(bootstrap, [f"{prefix}.evaluations"], acks="all")
    for _ in range(8):
        value = record(0.1, datetime.now(UTC), route=route).model_dump_json().encode()
        producer.send(f"{prefix}.evaluations", value=value)
    producer.flush()
    producer.close()


def stopping_line(service: ServiceProcess) -> str:
    said = [line for line in service.log.splitlines() if STOPPING in line]
    assert len(said) == 1, "\n".join(x for x in service.log.splitlines() if "kafka." not in x)[-4000:]
    return said[0]


def firing(receiver: WebhookReceiver) -> list[bytes]:
    return [r.body for r in receiver.requests if r.json()["state"] == "firing"]


def test_a_stop_during_a_hanging_delivery_keeps_the_notification_for_the_next_start(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    low_records(bootstrap, topic_prefix)
    receiver.mode = "hang"  # one try that outlives the budget many times over
    hook = {"type": "webhook", "url": receiver.url, "timeout_seconds": 60, "max_attempts": 1}
    config = write_config(tmp_path, topic_prefix, receiver.url, sinks=[hook], stop_timeout_s=STOP_TIMEOUT_S)
    service = alert_process(bootstrap, config, until_idle=False)
    receiver.wait_for(lambda requests: len(requests) == 1)  # the notification's delivery is under way
    service.process.send_signal(signal.SIGTERM)
    code = service.wait(timeout_s=60)

    assert code == 0, f"not stopped by its closing steps (exit {code}):\n{service.log[-3000:]}"
    said = stopping_line(service)
    assert "1 notification(s) not delivered in time" in said, said
    assert "the next start sends them to every sink" in said, said

    receiver.mode = "ok"
    restarted = alert_process(bootstrap, write_config(tmp_path, topic_prefix, receiver.url))
    assert restarted.wait() == 0, restarted.log[-3000:]
    sent = firing(receiver)
    assert len(sent) == 2 and sent[0] == sent[1], "the next start sent the very notification the stop kept"


def test_a_stop_while_stage_1_waits_on_a_paused_broker_says_the_batch_is_re_keyed_again(
    topic_prefix: str, receiver: WebhookReceiver, tmp_path: Path
) -> None:
    """Made certain: the service stops itself (SIGSTOP) at each batch it polls; once the first route's alert
    is out, a second route's batch is polled, the broker is paused, SIGTERM comes, and the service goes on to
    re-key the batch into a broker that does not answer."""
    with KafkaBroker() as broker:  # its own: this test pauses it
        bootstrap = broker.bootstrap_servers
        low_records(bootstrap, topic_prefix, "/r0")
        config = write_config(tmp_path, topic_prefix, receiver.url, stop_timeout_s=STOP_TIMEOUT_S)
        service = alert_process(bootstrap, config, pause_at="rekey.polled", until_idle=False)
        deadline = time.monotonic() + 120
        while not firing(receiver):  # every batch of the first route goes on
            assert service.process.poll() is None and time.monotonic() < deadline, service.wait(0)
            if service.paused():
                service.resume()
            time.sleep(0.1)
        low_records(bootstrap, topic_prefix, "/r1")
        while not service.paused():
            assert service.process.poll() is None and time.monotonic() < deadline, service.wait(0)
            time.sleep(0.1)
        # Every thread of the broker stopped before the service goes on: one still running acknowledged the
        # batch (seen at six workers), so the stop had nothing left to say.
        with paused(broker.process.pid):
            service.process.send_signal(signal.SIGTERM)
            service.resume()
            code = service.wait(timeout_s=60)

        assert code == 0, f"not stopped by its closing steps (exit {code}):\n{service.log[-3000:]}"
        said = stopping_line(service)
        assert "re-keyed record(s) not acknowledged" in said and "the next start re-keys them" in said, said

        restarted = alert_process(bootstrap, config)
        assert restarted.wait() == 0, restarted.log[-3000:]
    routes = sorted(json.loads(body)["route"] for body in firing(receiver))
    assert routes == ["/r0", "/r1"], "the next start re-keyed the batch: its alert fired, each alert once"


class HangingClose(LogSink):
    """An application's own sink whose close never returns (a client waiting on a peer that went away)."""

    def __init__(self) -> None:
        super().__init__()
        self.closing, self.release = threading.Event(), threading.Event()

    def close(self) -> None:
        self.closing.set()
        self.release.wait()


def test_a_sink_whose_close_hangs_is_given_up_on_within_the_stop_budget(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The sinks were closed after the service's loop returned, outside every budget: one that hung held the
    stop until Kubernetes killed the pod. They are closed last, within the stop's budget, like the clients."""
    config = service_config(bootstrap, topic_prefix, stop_timeout_s=STOP_TIMEOUT_S)
    sink = HangingClose()
    service = AlertService(config, [sink])
    returned = threading.Event()
    thread = threading.Thread(target=lambda: (service.run(idle_timeout_s=1.0), returned.set()), daemon=True)
    thread.start()
    try:
        assert sink.closing.wait(120), "never idle"
        # Generous: the budget counts from the idle stop; the close hangs for as long as the test lets it.
        assert returned.wait(3 * (STOP_TIMEOUT_S + 5.0)), "run() waited on the sink's close"
    finally:
        sink.release.set()
        thread.join(30)
    assert "closing the sinks given up on within stop_timeout_s" in caplog.text
