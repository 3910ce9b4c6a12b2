"""The Prometheus path with real programs, shared by the rules and dashboard tests:

example app -> Kafka -> tracescore consume --OTLP/HTTP--> Collector (prometheus exporter)
    <-scrape- Prometheus (the shipped rules) --> Alertmanager --> webhook receiver
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tracescore.alert.testing import AlertmanagerProcess, PrometheusProcess, WebhookReceiver, free_port
from tracescore.testing.kafka_broker import KafkaBroker

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "tracescore-rules.yaml"
BUILD_TIMEOUT_S = 45 * 60  # a cold Collector build takes minutes on two cores


def wait_until(what: str, check: Callable[[], Any], timeout_s: float = 180.0) -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after a generous timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout_s:.0f}s")
        time.sleep(0.5)


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


def rules_without_for_delays(tmp: Path) -> Path:
    """The shipped rules with `for:` set to 0s, so the test need not wait minutes; every expression, metric
    and label name stays exactly as shipped."""
    text = RULES.read_text()
    fast = "\n".join(
        line.split("for:")[0] + "for: 0s" if line.strip().startswith("for:") else line
        for line in text.splitlines()
    )
    assert fast.count("for: 0s") == 2, "the shipped rules changed: update this test"
    path = tmp / "tracescore-rules.yaml"
    path.write_text(fast + "\n")
    return path


@dataclass
class PrometheusStack:
    prometheus: PrometheusProcess
    alertmanager: AlertmanagerProcess
    receiver: WebhookReceiver
    bootstrap: str
    topic: str

    def run_app(self, phase: str, requests: int = 36) -> None:
        subprocess.run(
            [
                *(sys.executable, "-m", "examples.rag_app", "--bootstrap", self.bootstrap),
                *("--topic", self.topic, "--requests", str(requests), "--phase", phase),
            ],
            cwd=REPO,
            env=_env(),
            check=True,
            capture_output=True,
            timeout=300,
        )

    def value(self, promql: str) -> float:
        result = self.prometheus.query(promql)["result"]
        return sum(float(r["value"][1]) for r in result)


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture(scope="session")
def prometheus_stack(
    kafka_broker: KafkaBroker, otelcol: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrometheusStack]:
    tmp = tmp_path_factory.mktemp("prometheus-path")
    topic = f"promspans{os.getpid()}"
    otlp_port, exporter_port = free_port(), free_port()
    collector_log = (tmp / "collector.log").open("wb")
    collector = subprocess.Popen(
        [str(otelcol), "--config", str(REPO / "collectors" / "otlp-metrics-to-prometheus.yaml")],
        env={
            **os.environ,
            "OTLP_HTTP_ENDPOINT": f"127.0.0.1:{otlp_port}",
            "PROMETHEUS_EXPORTER_ENDPOINT": f"127.0.0.1:{exporter_port}",
            "OTELCOL_METRICS_PORT": str(free_port()),
        },
        stdout=collector_log,
        stderr=subprocess.STDOUT,
    )
    consumer = None
    try:
        wait_until(
            "the Collector's prometheus exporter answers",
            lambda: _answers(f"http://127.0.0.1:{exporter_port}/metrics"),
        )
        with WebhookReceiver() as receiver, AlertmanagerProcess(receiver.url + "/am") as alertmanager:
            config = f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["{rules_without_for_delays(tmp)}"]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:{alertmanager.port}"]
scrape_configs:
  - job_name: tracescore-metrics
    static_configs:
      - targets: ["127.0.0.1:{exporter_port}"]
"""
            with PrometheusProcess(config) as prometheus:
                consumer = subprocess.Popen(
                    [
                        *(sys.executable, "-m", "tracescore.cli", "consume"),
                        *("--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", topic),
                        *("--group-id", f"{topic}-scorers"),
                        *("--otlp-metrics-endpoint", f"http://127.0.0.1:{otlp_port}/v1/metrics"),
                    ],
                    env=_env(
                        OTEL_METRIC_EXPORT_INTERVAL="1000", OTEL_RESOURCE_ATTRIBUTES="service.instance.id=c1"
                    ),
                    stdout=subprocess.DEVNULL,
                    stderr=(tmp / "consume.log").open("wb"),
                )
                yield PrometheusStack(
                    prometheus, alertmanager, receiver, kafka_broker.bootstrap_servers, topic
                )
    finally:
        for process in (consumer, collector):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        collector_log.close()


def _answers(url: str) -> bool:
    try:
        return httpx2.get(url, timeout=2).status_code == 200
    except httpx2.TransportError:
        return False


@pytest.fixture(scope="session")
def drifted_stack(prometheus_stack: PrometheusStack) -> PrometheusStack:
    """The stack after a healthy phase (scraped) and then a drift of /billing: what the rules alert on."""
    stack = prometheus_stack
    stack.run_app("healthy")
    billing = 'sum(tracescore_evaluation_score_count{tracescore_route="/billing", metric="faithfulness"})'
    wait_until(
        "Prometheus scraped the healthy phase's 12 /billing scores", lambda: stack.value(billing) >= 12
    )
    stack.run_app("drift")
    wait_until("Prometheus scraped the drift phase's /billing scores", lambda: stack.value(billing) >= 24)
    return stack
