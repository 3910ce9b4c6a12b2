"""`tracescore conversations` while its broker does not answer (paused, as a broker stuck or cut off by the
network is): it says so in its own words, once (when since, what it holds meanwhile, that it retries and
that nothing is lost), keeps running, says when the broker is back, and goes on: the conversations of before
and after the outage are each recorded. kafka-python's own connection errors alone told an on-call nothing
of this (the service base's `BrokerReach`; the same for `tracescore alert` and `tracescore consume`)."""

from __future__ import annotations

import logging
import re

import pytest
from _helpers import paused, wait_until
from conversation_service import SERVICE_WAIT_S, Running, config, on_topic, produce
from conversation_turns import turn

from tracescore.testing.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka

UNREACHABLE = re.compile(r"the Kafka broker is unreachable since \d\d:\d\d:\d\d, for \d+s \(bootstrap (\S+):")
BACK = "the Kafka broker is reachable again after"
OUTAGE_WAIT_S = 180.0  # the session's expiry, or a request's timeout (30 s), then the grace: generous


def said(caplog: pytest.LogCaptureFixture, pattern: re.Pattern[str] | str) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("tracescore")]
    if isinstance(pattern, str):
        return [line for line in lines if pattern in line]
    return [line for line in lines if pattern.search(line)]


def test_a_paused_broker_is_said_once_with_its_since_time_and_its_return_and_nothing_is_lost(
    own_broker: KafkaBroker, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore")
    bootstrap = own_broker.bootstrap_servers
    # A short session: kafka-python gives its coordinator up once the heartbeats go unanswered that long.
    cfg = config(bootstrap, topic_prefix, session_timeout_ms=6_000)
    produce(bootstrap, cfg.evaluations_topic, [turn(1, 1.0, "before"), turn(2, 1.0, "before")])
    with Running(cfg) as running:
        wait_until(lambda: len(running.written) == 1, "the first conversation's record", SERVICE_WAIT_S)
        assert said(caplog, UNREACHABLE) == []  # a broker that answers is never said unreachable

        with paused(own_broker.process.pid):
            wait_until(lambda: said(caplog, UNREACHABLE), "the broker said unreachable", OUTAGE_WAIT_S)
            assert running.thread.is_alive()
        [warning] = said(caplog, UNREACHABLE)
        match = UNREACHABLE.search(warning)
        assert match is not None and match.group(1) == bootstrap, warning
        assert "holds its state in memory" in warning and "nothing is lost" in warning, warning
        assert "retries on its own" in warning, warning

        wait_until(lambda: said(caplog, BACK), "the broker said reachable again", OUTAGE_WAIT_S)
        produce(bootstrap, cfg.evaluations_topic, [turn(3, 1.0, "after"), turn(4, 1.0, "after")])
        wait_until(lambda: len(running.written) >= 2, "the second conversation's record", SERVICE_WAIT_S)
        assert running.thread.is_alive()

    [back] = said(caplog, BACK)
    assert f"(bootstrap {bootstrap})" in back, back
    assert len(said(caplog, UNREACHABLE)) == 1, "one outage, said once (its repeat only after a minute)"
    recorded = sorted({(r.conversation_id, r.turns) for r in on_topic(bootstrap, cfg)})
    assert recorded == [("after", 2), ("before", 2)], recorded
