"""A drop rule through the real broker: `AlertService` learns a route's normal, keeps it in the state topic
across a restart (counting no answer twice when it reads the last minutes again), pages when the route
falls below it and resolves on recovery, on a real webhook receiver. The route reads 0.75 to the offline
judge when healthy: a threshold at 0.7 would sit in its noise, the drop rule only sees the change."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import cycle, islice

import pytest
from _helpers import wait_until
from alert_records import Running, llm_record, produce, record, service_config
from kafka import KafkaConsumer, TopicPartition

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertKey,
    DropConfig,
    DropReading,
    RuleConfig,
)
from tracescore.alert._logic import AlertLogic
from tracescore.alert.testing import ReceivedRequest, WebhookReceiver
from tracescore.model import EvaluationRecord
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

KEY = AlertKey("rag-api", "/summarize", "faithfulness")
DROP = "TracescoreFaithfulnessBelowNormal"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def config(bootstrap: str, prefix: str) -> AlertConfig:
    drop = DropConfig(
        min_drop=0.2, confidence=0.99, window_count=20, min_samples=10, normal_count=100,
        min_normal_samples=40,
    )  # fmt: skip
    rule = RuleConfig(
        warning=None, critical=None, window_count=4, cooldown_seconds=0, no_data_seconds=None, drop=drop
    )
    return service_config(bootstrap, prefix, rules=[rule])


_clock = [datetime.now(UTC)]


def answers(n: int, pattern: tuple[float, ...]) -> list[bytes]:
    """`n` answers of /summarize scoring `pattern` in turn, a millisecond apart (each its own time), from now
    on: a clock taken when the module was imported can be older than the rule's 15-minute window by the time
    a loaded, parallel session reaches the test, and every answer would then leave the window as it came."""
    _clock[0] = max(_clock[0], datetime.now(UTC))
    out = []
    for score in islice(cycle(pattern), n):
        _clock[0] += timedelta(milliseconds=1)
        out.append(record(score, _clock[0], route=KEY.route).model_dump_json().encode())
    return out


def is_drop(state: str):  # type: ignore[no-untyped-def]
    def seen(got: list[ReceivedRequest]) -> bool:
        return any(r.json()["alertname"] == DROP and r.json()["state"] == state for r in got)

    return seen


def persisted(cfg: AlertConfig) -> DropReading:
    """What the state topic holds for the route, read into a new evaluator as a restarted one reads it."""
    consumer = KafkaConsumer(bootstrap_servers=cfg.bootstrap_servers, group_id=None, enable_auto_commit=False)
    partitions = [TopicPartition(cfg.state_topic, p) for p in consumer.partitions_for_topic(cfg.state_topic)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    ends = consumer.end_offsets(partitions)
    latest = None
    while any(consumer.position(tp) < ends[tp] for tp in partitions):
        for messages in consumer.poll(timeout_ms=500).values():
            for message in messages:
                if message.key == KEY.encode():  # the state topic also holds each partition's own marks
                    latest = message.value
    consumer.close()
    assert latest is not None
    evaluator = AlertEvaluator(cfg)
    evaluator.restore(KEY, AlertLogic.codec.decode(latest).alert)
    evaluator.adopt_restored(lambda key: 0)
    reading = evaluator.drop_status(KEY, datetime.now(UTC))
    assert reading is not None
    return reading


def test_a_drop_rule_keeps_its_normal_across_a_restart_pages_below_it_and_resolves(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    cfg = config(bootstrap, topic_prefix)
    healthy = (1.0, 1.0, 1.0, 0.0)  # 75% pass the offline judge's label rule
    with Running(cfg, receiver) as first:
        produce(bootstrap, cfg.evaluations_topic, answers(80, healthy))
        wait_until(lambda: first.stats.records >= 80, "the first run to read the 80 records")
    learned = persisted(cfg)
    assert learned.status == "ready" and learned.normal == pytest.approx(0.75, abs=0.1)
    assert learned.normal_n + learned.whole_n == 80 - cfg.rules[0].window_count  # the rest wait in its window

    # Restarted: the normal comes from the state topic, and the last minutes read again to refill the rule's
    # window are not counted a second time.
    with Running(cfg, receiver) as second:
        wait_until(lambda: second.stats.records >= 80, "the restarted run to read the 80 records again")
    again = persisted(cfg)
    assert (again.status, again.normal_n, again.whole_n) == ("ready", learned.normal_n, learned.whole_n)
    assert again.normal == pytest.approx(learned.normal)

    with Running(cfg, receiver) as third:
        produce(bootstrap, cfg.evaluations_topic, answers(30, (0.0,)))
        receiver.wait_for(is_drop("firing"))
        produce(bootstrap, cfg.evaluations_topic, answers(60, healthy))
        receiver.wait_for(is_drop("resolved"))
        wait_until(lambda: third.stats.records >= 80 + 90, "the third run to read all 170 records")
    bodies = [r.json() for r in receiver.requests]
    (page,) = [b for b in bodies if b["state"] == "firing"]
    assert page["alertname"] == DROP and page["labels"]["tracescore_route"] == "/summarize"
    assert page["normal"] == pytest.approx(0.75, abs=0.1) and page["drop_lower"] >= 0.2
    assert "below its normal" in page["summary"]
    assert [b["state"] for b in bodies] == ["firing", "resolved"]


def test_a_page_on_a_normal_the_baseline_correction_reads_past_1_adds_up_on_the_receiver(
    bootstrap: str, topic_prefix: str, receiver: WebhookReceiver
) -> None:
    # The LLM judge's baseline passes the answers the offline judge wrongly fails (1 in 5): a correction of
    # +0.2; then the offline judge passes every answer (the normal reads past 1), then fails every one.
    cfg = config(bootstrap, topic_prefix)
    cfg = cfg.model_copy(update={"rules": [cfg.rules[0].model_copy(update={"window_count": 20})]})
    records = []
    for i, value in enumerate(answers(50, (0.0, 1.0, 1.0, 1.0, 1.0))):
        offline = EvaluationRecord.model_validate_json(value)
        records.append(offline)
        if i % 2 == 0:  # the baseline: half the answers, uniformly
            records.append(llm_record(offline, 1.0, "baseline", 0.5))
    records += [EvaluationRecord.model_validate_json(v) for v in answers(80, (1.0,)) + answers(40, (0.0,))]
    producer = input_producer(bootstrap, [cfg.evaluations_topic], acks="all")
    for r in records:  # read in this order: on one partition (the phases interleaved would page early)
        producer.send(cfg.evaluations_topic, key=KEY.encode(), value=r.model_dump_json().encode())
    producer.flush()
    producer.close()
    with Running(cfg, receiver):
        receiver.wait_for(is_drop("firing"))
    (page,) = [r.json() for r in receiver.requests if r.json()["state"] == "firing"]
    number = r"(-?\d\.\d\d)"
    said = re.search(
        rf"fell {number} below its normal: {number} over .* against its normal {number}", page["summary"]
    )
    assert said, page["summary"]
    drop, window, normal = (float(x) for x in said.groups())
    assert normal > 1.0 and drop == pytest.approx(normal - window), page["summary"]
    assert "a level past 0..1: the correction from the LLM judge's baseline pairs" in page["summary"]
    assert (f"{page['value']:.2f}", f"{page['normal']:.2f}") == (said[2], said[3])
    assert (
        page["drop"] == pytest.approx(page["normal"] - page["value"]) and page["drop_lower"] <= page["drop"]
    )
