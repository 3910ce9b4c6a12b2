"""`tracescore consume` while its broker does not answer (paused, as a broker stuck or cut off by the network
is), judge calls in flight: it says so in its own words, once (since when, what it holds meanwhile, that it
retries and that nothing is lost), keeps running, says when the broker is back, and goes on: every span is
scored, nothing lost. kafka-python's own connection errors alone told an on-call nothing of this."""

from __future__ import annotations

import re

import pytest
from _helpers import paused, wait_until
from fault_helpers import APP, ConsumerProcess, GatedJudgeServer, Topics, outcome, rag_spans_on
from kafka_helpers import run_instrumented_app

from tracescore.testing.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka

UNREACHABLE = "the Kafka broker is unreachable since"
BACK = "the Kafka broker is reachable again after"
SPANS = 6


def test_a_paused_broker_is_said_with_what_the_member_holds_then_its_return_and_nothing_is_lost(
    own_broker: KafkaBroker, topic_prefix: str
) -> None:
    topics = Topics(own_broker.bootstrap_servers, topic_prefix)
    with GatedJudgeServer() as server:
        run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS))
        server.hold(allow=2)  # the rest held: work in flight through the outage
        proc = ConsumerProcess(topics.cli_args(base_url=server.base_url, idle_timeout_s=600))
        wait_until(lambda: server.stats.chat_requests >= 3, "judge calls held")
        assert proc.count(UNREACHABLE) == 0, proc.log  # a broker that answers is never said unreachable

        with paused(own_broker.process.pid):
            proc.wait_for_line(UNREACHABLE)
            assert proc.process.poll() is None, proc.log
        [warning] = [line for line in proc.lines if UNREACHABLE in line]
        assert " WARNING tracescore.consume: " in warning, warning
        assert re.search(r"since \d\d:\d\d:\d\d, for \d+s", warning), warning
        assert f"(bootstrap {topics.bootstrap}: " in warning, warning
        assert re.search(r"holds \d+ interactions? queued or being scored", warning), warning
        assert "retries on its own" in warning and "nothing is lost" in warning, warning

        proc.wait_for_line(BACK)
        run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=4))  # the stream goes on
        expected = rag_spans_on(topics.bootstrap, topics.spans)
        server.open()
        wait_until(lambda: outcome(topics, expected).lost == 0, "every span scored", timeout_s=180)
        proc.terminate()
        assert proc.wait() == 0, proc.log

    assert proc.count(UNREACHABLE) == 1 and proc.count(BACK) == 1, proc.log
    result = outcome(topics, expected)
    assert result.lost == 0 and result.unexplained == 0 and result.unique == len(expected), result
