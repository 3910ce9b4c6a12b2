"""The rule `tracescore alert` runs without a config, through the real broker: with the offline judge alone
a healthy route of long answers (its judge passes 55% of them) never pages however far below 0.7 it reads,
a drop below its own normal does; with the LLM judge's baseline the estimate is calibrated and a low level
pages on the thresholds."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import cycle, islice

import pytest
from _helpers import wait_until
from alert_records import Running, llm_record, record, service_config
from kafka import KafkaProducer

from tracescore.alert import AlertConfig, AlertKey
from tracescore.alert._config import THRESHOLDS_WAIT
from tracescore.alert.testing import ReceivedRequest, WebhookReceiver
from tracescore.model import EvaluationRecord
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

THRESHOLD = "TracescoreFaithfulnessDropped"
DROP = "TracescoreFaithfulnessBelowNormal"
HEALTHY = (1.0,) * 11 + (0.0,) * 9  # the offline judge passes 55%: a healthy route of summaries
# Enough for the default drop part to arm (its normal: 1,000 answers that have left the rule's window of 50
# and its own of 2,000), and a few hundred more as its normal.
ARMED = 3_400


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


class Clock:
    """Answers a millisecond apart from now on (the rule's window is 15 minutes of the service's clock)."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)

    def answers(self, route: str, n: int, pattern: tuple[float, ...]) -> list[EvaluationRecord]:
        self.at = max(self.at, datetime.now(UTC))
        out = []
        for score in islice(cycle(pattern), n):
            self.at += timedelta(milliseconds=1)
            out.append(record(score, self.at, route=route))
        return out


def send_in_order(producer: KafkaProducer, topic: str, records: list[EvaluationRecord]) -> None:
    """One key per route: its records are read in this order (a drop interleaved with its healthy answers
    would read as noise)."""
    for r in records:
        key = AlertKey(r.service_name, r.route, r.metric).encode()
        producer.send(topic, key=key, value=r.model_dump_json().encode())
    producer.flush()


def pages(got: list[ReceivedRequest], route: str) -> list[str]:
    return [b["alertname"] for b in (r.json() for r in got) if b["state"] == "firing" and b["route"] == route]


def default_config(bootstrap: str, prefix: str) -> AlertConfig:
    cfg = service_config(bootstrap, prefix, rules=None)
    (rule,) = cfg.rules
    assert rule.require_calibration and rule.drop is not None and rule.warning == 0.7
    return cfg


def test_offline_alone_a_healthy_route_at_0_55_never_pages_and_a_drop_below_its_normal_does(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.alert")
    cfg = default_config(bootstrap, topic_prefix)
    clock = Clock()
    producer = input_producer(bootstrap, [cfg.evaluations_topic], acks="all")
    try:
        with Running(cfg, receiver) as service:
            send_in_order(producer, cfg.evaluations_topic, clock.answers("/summarize", ARMED, HEALTHY))
            wait_until(lambda: service.stats.records >= ARMED, "the service to read the healthy answers")
            # Watched: against its own normal, learned from these answers.
            wait_until(lambda: "drop alerts armed" in caplog.text, "the route's normal to be learned")
            assert pages(receiver.requests, "/summarize") == []  # 0.55, far below 0.7: no page
            waits = [r.getMessage() for r in caplog.records if THRESHOLDS_WAIT in r.getMessage()]
            assert waits == [
                f"rag-api /summarize faithfulness: {THRESHOLDS_WAIT}: uncalibrated (offline judge only); "
                "drop alerts watch it meanwhile, once its normal is learned "
                "(after 3,000 answers at the earliest)"
            ]  # once for the route, not once per answer

            send_in_order(producer, cfg.evaluations_topic, clock.answers("/summarize", 300, (0.0,)))
            receiver.wait_for(lambda got: DROP in pages(got, "/summarize"))
    finally:
        producer.close()
    # The level fell to 0 and still no threshold alert: uncalibrated, the thresholds do not read it.
    assert pages(receiver.requests, "/summarize") == [DROP]


def test_with_the_llm_baseline_a_calibrated_low_level_pages_on_the_thresholds(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    # Both routes read 0.55 to the offline judge; the LLM judge's baseline (every other answer) says /faq's
    # answers are faithful and /billing's are not.
    cfg = default_config(bootstrap, topic_prefix)
    clock = Clock()
    records = []
    for route, truth in (("/faq", 1.0), ("/billing", 0.0)):
        for i, offline in enumerate(clock.answers(route, 60, HEALTHY)):
            records.append(offline)
            if i % 2 == 0:
                records.append(llm_record(offline, truth, "baseline", 0.5))
    producer = input_producer(bootstrap, [cfg.evaluations_topic], acks="all")
    try:
        send_in_order(producer, cfg.evaluations_topic, records)
    finally:
        producer.close()
    with Running(cfg, receiver) as service:
        receiver.wait_for(lambda got: THRESHOLD in pages(got, "/billing"))
        wait_until(lambda: service.stats.records >= len(records), "the service to read every record")
    assert pages(receiver.requests, "/faq") == []
    (page,) = [r.json() for r in receiver.requests if r.json()["route"] == "/billing"][:1]
    assert page["calibrated"] is True and page["severity"] == "critical", page
