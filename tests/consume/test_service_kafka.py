"""The scoring service under what production sends it, through the real broker: oversized input and output,
a slow judge, a broker that is not there, and what the operator sees meanwhile."""

from __future__ import annotations

import asyncio
import logging
import re
import subprocess
import sys
import threading

import pytest
from _helpers import wait_until
from _zygote import popen, run
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka_helpers import ConsumerFactory, assert_all_committed, run_instrumented_app
from service_processes import checkout_env

from tracescore.consume import BrokerUnreachable
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.testing import free_port
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

GOOD_APP = """
@tracescore.rag(route="/ask")
def answer(query, contexts):
    return "Paris is the capital of France."

for i in range({n}):
    answer(f"capital of France? ({{i}})", ["Paris is the capital of France."])
"""


def test_a_5_mb_undecodable_message_is_dead_lettered_as_a_prefix_and_the_service_goes_on(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.spans"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": str(8 * 1024 * 1024)})])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 * 1024 * 1024, acks="all")
    producer.send(topic, key=b"junk", value=b"\xff" * (5 * 1024 * 1024), headers=[("app", b"x")]).get(60)
    producer.close()
    run_instrumented_app(bootstrap, topic, GOOD_APP.format(n=1))
    consumer, seen = consumer_for(bootstrap, topic_prefix)

    stats = consumer.run()

    assert stats.dead_letters == 1 and stats.scored == 1 and len(seen) == 1, (
        "the good span after it is scored"
    )
    [dead] = read_topic(bootstrap, f"{topic_prefix}.dlq")
    headers = dict(dead.headers)
    assert headers["tracescore.truncated"] == b"1"
    assert headers["tracescore.original-size"] == str(5 * 1024 * 1024).encode()
    assert headers["app"] == b"x" and b"OTLP" in headers["tracescore.error"]
    assert 0 < len(dead.value) <= 64 * 1024 and dead.value == b"\xff" * len(dead.value)
    assert_all_committed(bootstrap, f"{topic_prefix}.group", topic)


def test_a_record_larger_than_the_output_limit_is_cut_to_fit_and_says_so(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    sentences = " ".join(f"The Aurora unit number {i} ships with a {i + 3} hour battery." for i in range(300))
    run_instrumented_app(
        bootstrap,
        f"{topic_prefix}.spans",
        f"""
        @tracescore.rag
        def answer(query, contexts):
            return {sentences!r}

        answer("What ships with the Aurora?", ["The Aurora ships with a charger."])
        """,
    )
    consumer, _ = consumer_for(bootstrap, topic_prefix, max_message_bytes=8_000)

    stats = consumer.run()

    assert stats.scored == 1 and stats.truncated_outputs == 1
    [message] = read_topic(bootstrap, f"{topic_prefix}.evaluations")
    assert len(message.value) <= 8_000
    record = EvaluationRecord.model_validate_json(message.value)
    assert record.details["truncated"]["original_bytes"] > 8_000
    assert record.details["total_claims"] == 200, "claims per answer are capped (max_claims)"
    assert record.details["capped"]["answer_sentences"] > 200
    assert record.label == "hallucinated"


def test_a_slow_judge_fills_the_in_flight_bound_and_partitions_pause_until_it_drains(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    class Slow(OfflineJudge):
        async def run(self, task, data):  # type: ignore[no-untyped-def]
            await asyncio.sleep(0.2)
            return await super().run(task, data)

    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", GOOD_APP.format(n=12))
    consumer, seen = consumer_for(
        bootstrap,
        topic_prefix,
        judge=Slow(),
        max_in_flight=2,
        max_records=12,
        evaluation_spans_topic=f"{topic_prefix}.evaluation-spans",  # "all committed" means the app's spans
    )

    stats = consumer.run()

    assert stats.scored == 12 and len({r.span_id for r in seen}) == 12
    assert stats.pauses >= 1, "past max_in_flight the partitions were paused"
    assert_all_committed(bootstrap, f"{topic_prefix}.group", f"{topic_prefix}.spans")


def test_our_evaluation_spans_read_back_are_skipped_without_decoding(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", GOOD_APP.format(n=3))
    first, _ = consumer_for(bootstrap, topic_prefix, max_records=3)
    first.run()  # writes 3 messages of evaluation spans back onto the spans topic
    again, seen = consumer_for(bootstrap, f"{topic_prefix}", group_id=f"{topic_prefix}.other")

    stats = again.run()

    # Its own evaluation spans come back too; neither set is decoded.
    assert stats.assembly["evaluation_span_messages"] >= 3 and stats.spans == 3, (
        "only the app's spans decoded"
    )
    assert len(seen) == 3


def test_the_status_line_tells_the_operator_rates_lag_and_scores(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", GOOD_APP.format(n=3))
    consumer, _ = consumer_for(bootstrap, topic_prefix, status_interval_s=0.5)
    consumer.run()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("status:")]
    assert lines, "no status line in a run of several seconds"
    assert all("msg/s" in line for line in lines), lines
    # A line written before the group gave the partitions (the join can outlast 0.5 s on a loaded machine)
    # says so; every line after the first that names them names them.
    named = [f"{topic_prefix}.spans[" in line for line in lines]
    assert any(named), lines
    first = named.index(True)
    assert all("lag none assigned" in line for line in lines[:first]), lines
    assert all(named[first:]), lines
    # Each line has the mean per route since the line before: over the lines, every score once.
    means = [re.search(r"/ask faithfulness (\S+) \(n=(\d+)\)", line) for line in lines]
    assert {m.group(1) for m in means if m} == {"1.00"}, lines
    assert sum(int(m.group(2)) for m in means if m) == 3, lines
    # The idle timeout (3 s) outlasts several lines after the last score: the last shows the end state,
    # every partition read to its end (lag from the broker's end offsets, not "?").
    last = lines[-1]
    assert "scored 3," in last, last
    partition_lags = re.findall(rf"{re.escape(topic_prefix)}\.spans\[\d+\]=(\S+?)[,\s]", last)
    assert partition_lags and set(partition_lags) == {"0"}, last


def test_an_unreachable_broker_is_one_clear_error_and_a_failing_exit() -> None:
    done = run(
        [
            sys.executable, "-m", "tracescore.cli", "consume",
            "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "2", "--idle-timeout", "1",
        ],
        env=checkout_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [
        "Error: no Kafka broker reachable at 127.0.0.1:1 (starting; tried for 2s, last error: "
        "[Errno 111] Connection refused). Is a broker running there, and reachable from here? The address "
        "is the one --bootstrap-servers gave: give the broker's as host:port"
    ]
    assert len(done.stderr.splitlines()) <= 3, done.stderr


def test_a_broker_gone_while_idle_is_an_error_not_a_successful_stop(
    consumer_for: ConsumerFactory, topic_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with KafkaBroker() as broker:
        # The address given as the variable: the error names it, the place to correct, as at the start.
        monkeypatch.setenv("TRACESCORE_BOOTSTRAP_SERVERS", broker.bootstrap_servers)
        consumer, _ = consumer_for(broker.bootstrap_servers, topic_prefix, idle_timeout_s=5)
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                consumer.run()
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        wait_until(lambda: consumer.first_assigned_at is not None, "the first assignment", timeout_s=60)
        broker.stop()
        thread.join(120)
    assert outcome and isinstance(outcome[0], BrokerUnreachable), outcome
    assert "the stream went idle" in str(outcome[0])
    assert str(outcome[0]).endswith(
        "The address came from TRACESCORE_BOOTSTRAP_SERVERS: correct it there, or give the broker's as "
        "host:port with --bootstrap-servers, which comes first"
    ), outcome[0]


def test_prometheus_can_scrape_the_running_service(bootstrap: str, topic_prefix: str) -> None:
    import urllib.request

    # Below the ephemeral range: a port from bind(0) is one the kernel may hand to another test's outgoing
    # connection before the service, seconds later, binds it ("Address already in use").
    port = free_port()
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", GOOD_APP.format(n=2))
    service = popen(
        [
            sys.executable, "-m", "tracescore.cli", "consume", "--bootstrap-servers", bootstrap,
            "--topic", f"{topic_prefix}.spans", "--group-id", f"{topic_prefix}.group",
            "--evaluations-topic", f"{topic_prefix}.evaluations", "--dlq-topic", f"{topic_prefix}.dlq",
            "--prometheus-port", str(port), "--prometheus-host", "127.0.0.1",
        ],
        env=checkout_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def scrape() -> str:
            """The scraped page once it counts evaluations, else ''."""
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    text = str(response.read().decode())
            except OSError:
                return ""
            return text if "tracescore_evaluations_total" in text else ""

        # Or the service's exit (a port it could not serve on), whose error the assertion below shows.
        scraped = wait_until(lambda: scrape() or service.poll() is not None, "a scrape", every_s=0.2)
    finally:
        service.terminate()
        _, stderr = service.communicate(timeout=120)
    assert isinstance(scraped, str) and "tracescore_evaluations_total" in scraped, stderr
    assert 'tracescore_route="/ask"' in scraped and "tracescore_evaluation_score" in scraped
    assert service.returncode == 0, stderr
