"""The Prometheus path with real programs, shared by the rules and dashboard tests:

example app -> Kafka -> tracescore consume (LLM judge: the local judge server) --OTLP/HTTP--> Collector
    (prometheus exporter) <-scrape- Prometheus (the shipped rules) --> Alertmanager --> webhook receiver
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _held import held
from deploy_stack import (
    REPO,
    STOP_S,
    PrometheusStack,
    metrics_collector,
    python_env,
    rules_without_for_delays,
    shipped_prometheus_config,
    verbatim_judge,
    wait_until,
)

from tracescore.alert.testing import AlertmanagerProcess, PrometheusProcess, WebhookReceiver
from tracescore.testing import Guard, end_process
from tracescore.testing.judge_server import JudgeServer
from tracescore.testing.kafka_broker import KafkaBroker

BUILD_TIMEOUT_S = 45 * 60  # a cold Collector build takes minutes on two cores


@pytest.fixture(scope="session")
def otelcol() -> Path:
    done = subprocess.run(
        ["bash", str(REPO / "deploy" / "collector" / "build.sh")],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        pytest.fail(f"the Collector build failed:\n{done.stderr[-3000:]}", pytrace=False)
    return Path(lines[-1])


@pytest.fixture
def prometheus_stack(
    request: pytest.FixtureRequest,
    kafka_broker: KafkaBroker,
    otelcol: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> PrometheusStack:
    """Held while its tests run (tests/_held.py): it scrapes, evaluates and exports every second, ~1 CPU-s a
    minute, so it stops after its last test, not at the worker's end."""
    return held(
        request, lambda stack: stack.enter_context(_prometheus_stack(kafka_broker, otelcol, tmp_path_factory))
    )


@contextmanager
def _prometheus_stack(
    kafka_broker: KafkaBroker, otelcol: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusStack]:
    tmp = tmp_path_factory.mktemp("prometheus-path")
    topic = f"promspans{os.getpid()}"
    with (
        metrics_collector(otelcol, tmp / "collector.log") as collector,
        WebhookReceiver() as receiver,
        AlertmanagerProcess(receiver.url + "/am") as alertmanager,
        JudgeServer() as judge,
    ):
        judge.responder = verbatim_judge
        config = shipped_prometheus_config(
            rules_without_for_delays(tmp), alertmanager.port, collector.exporter_port
        )
        with PrometheusProcess(config) as prometheus:
            # Ended before the Collector it exports its metrics to.
            consumer, consumer_guard = start_consume(
                kafka_broker.bootstrap_servers,
                topic,
                collector.otlp_port,
                tmp / "consume.log",
                judge_url=judge.base_url,
            )
            try:
                yield PrometheusStack(
                    prometheus, alertmanager, receiver, kafka_broker.bootstrap_servers, topic
                )
            finally:
                end_process(consumer, STOP_S, consumer_guard)


def start_consume(
    bootstrap: str, topic: str, otlp_port: int, log: Path, judge_url: str | None = None
) -> tuple[subprocess.Popen[bytes], Guard | None]:
    """The stack's `tracescore consume`, exporting its metrics to the Collector on `otlp_port` every second;
    guarded as the Collector beside it: it ends with this worker, however the worker ends. With `judge_url`,
    the LLM judge there scores every answer (--no-cascade): an estimate the shipped faithfulness alert reads
    without baseline pairs (the offline judge's alone it does not: require_calibration)."""
    judge = ("--judge", "openai", "--no-cascade", "--base-url", judge_url, "--model", "judge-test")
    with log.open("wb") as stderr:
        consumer = subprocess.Popen(
            [
                *(sys.executable, "-m", "tracescore.cli", "consume"),
                *("--bootstrap-servers", bootstrap, "--topic", topic, "--group-id", f"{topic}-scorers"),
                *("--otlp-metrics-endpoint", f"http://127.0.0.1:{otlp_port}/v1/metrics"),
                *(judge if judge_url else ()),
            ],
            env=python_env(
                OTEL_METRIC_EXPORT_INTERVAL="1000",
                OTEL_RESOURCE_ATTRIBUTES="service.instance.id=c1",
                TRACESCORE_JUDGE_API_KEY="unused",
            ),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    return consumer, Guard.start(consumer, STOP_S)


@pytest.fixture
def drifted_stack(request: pytest.FixtureRequest, prometheus_stack: PrometheusStack) -> PrometheusStack:
    """The stack after a healthy phase (scraped) and then a drift of /billing: what the rules alert on. Held
    with the stack: the phases run once for its tests."""
    return held(request, lambda _: _drifted(prometheus_stack))


def _drifted(stack: PrometheusStack) -> PrometheusStack:
    stack.run_app("healthy")
    billing = 'sum(tracescore_evaluation_score_count{tracescore_route="/billing", metric="faithfulness"})'
    wait_until(
        "Prometheus scraped the healthy phase's 12 /billing scores", lambda: stack.value(billing) >= 12
    )
    # Three times the healthy phase's /billing answers: the 15-minute window holds the drift and, where a
    # scrape came in the middle of the healthy phase (a loaded machine), that phase too; the drift must bring
    # the estimate's upper bound below the threshold either way (with 12 drifted answers and the healthy
    # phase counted it stayed at 0.74).
    stack.run_app("drift", requests=108)
    wait_until("Prometheus scraped the drift phase's /billing scores", lambda: stack.value(billing) >= 48)
    return stack
