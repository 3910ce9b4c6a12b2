"""Helpers for the Prometheus path with real programs (fixtures in conftest.py):

example app -> Kafka -> tracescore consume (LLM judge: the local judge server) --OTLP/HTTP--> Collector
    (prometheus exporter) <-scrape- Prometheus (the shipped rules) --> Alertmanager --> webhook receiver
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml
from _helpers import wait_until as _wait_until
from _zygote import run
from service_processes import checkout_env

from tracescore.alert.testing import AlertmanagerProcess, PrometheusProcess, WebhookReceiver
from tracescore.testing import Guard, end_process, free_port
from tracescore.testing.judge_server import default_responder, fenced_data, task_of

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "tracescore-rules.yaml"
PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
STOP_S = 60.0  # how long a process the stack started has to exit on SIGTERM before it is killed


def wait_until(what: str, check: Callable[[], Any], timeout_s: float = 180.0) -> Any:
    """Poll `check` every half second until it returns something truthy; fail naming `what`."""
    return _wait_until(check, what, timeout_s, every_s=0.5)


@dataclass
class PrometheusStack:
    prometheus: PrometheusProcess
    alertmanager: AlertmanagerProcess
    receiver: WebhookReceiver
    bootstrap: str
    topic: str

    def run_app(self, phase: str, requests: int = 36) -> None:
        app = run(
            [
                *(sys.executable, "-m", "examples.rag_app", "--bootstrap", self.bootstrap),
                *("--topic", self.topic, "--requests", str(requests), "--phase", phase),
            ],
            cwd=REPO,
            env=checkout_env(),
            timeout=300,
        )
        assert app.returncode == 0, app.stderr[-3000:]

    def value(self, promql: str) -> float:
        result = self.prometheus.query(promql)["result"]
        return sum(float(r["value"][1]) for r in result)

    def state(self, route: str) -> str:
        """What Prometheus and Alertmanager hold for `route` now, for a failure to say where an alert stopped:
        the rule's inputs, the ALERTS series, what Alertmanager has and what the webhook received."""
        where = f'tracescore_route="{route}"'
        seen = {
            name: self.prometheus.query(f"{name}{{{where}}}")["result"]
            for name in (
                "tracescore:faithfulness:estimate_upper_15m",
                "tracescore:faithfulness:evaluations_15m",
                "ALERTS",
            )
        }
        received = [r.json() for r in self.receiver.requests if r.path == "/am"]
        return f"prometheus: {seen}; alertmanager: {self.alertmanager.alerts()}; webhook: {received}"


def verbatim_judge(body: dict[str, Any]) -> dict[str, Any]:
    """The stack's LLM judge (the local judge server's responder): a claim is supported when its context
    holds it word for word. The example app's faithful answers are context sentences verbatim, and each of
    its alterations changes or adds one, so this judge is right on every answer the stack scores."""
    task, data = task_of(body) or "", fenced_data(body)
    if not task.endswith("verdicts"):
        return default_responder(body)
    context = " ".join(str(data.get("context", "")).split())
    verdicts = []
    for index, claim in enumerate(data.get("claims", [])):
        held = " ".join(str(claim).split()) in context
        verdicts.append(
            {
                "claim_index": index,
                "verdict": "FULLY_SUPPORTED" if held else "NO_EVIDENCE",
                "reason": "The context says so." if held else "The context does not say so.",
                "evidence": str(claim) if held else "",
            }
        )
    return {"verdicts": verdicts}


def python_env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def http_ok(url: str) -> bool:
    try:
        return httpx2.get(url, timeout=2).status_code == 200
    except httpx2.TransportError:
        return False


def rules_without_for_delays(tmp: Path) -> Path:
    """The shipped rules with `for:` set to 0s, so the test need not wait minutes; every expression, metric
    and label name stays exactly as shipped."""
    text = RULES.read_text()
    fast = "\n".join(
        line.split("for:")[0] + "for: 0s" if line.strip().startswith("for:") else line
        for line in text.splitlines()
    )
    assert fast.count("for: 0s") == 5, "the shipped rules changed: update this test"
    path = tmp / "tracescore-rules.yaml"
    path.write_text(fast + "\n")
    return path


def shipped_prometheus_config(rules: Path, alertmanager_port: int, collector_port: int) -> str:
    """deploy/prometheus/prometheus.yml as shipped, its job for the metrics Collector with every setting kept
    (how the consumers' labels are scraped), only pointed at this stack: the Collector's and Alertmanager's
    ports, `rules` for its rule file, every second instead of every 15. Its kafka-exporter job is left out:
    this stack runs none."""
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(rules)]
    config["alerting"]["alertmanagers"] = [
        {"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}
    ]
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "tracescore-metrics"]
    job["static_configs"] = [{"targets": [f"127.0.0.1:{collector_port}"]}]
    config["scrape_configs"] = [job]
    return yaml.safe_dump(config)


@dataclass(frozen=True)
class MetricsCollector:
    otlp_port: int  # where it takes OTLP/HTTP metrics
    exporter_port: int  # where it serves them to Prometheus (`/metrics`)


@contextmanager
def metrics_collector(otelcol: Path, log: Path) -> Iterator[MetricsCollector]:
    """The shipped metrics Collector (collectors/otlp-metrics-to-prometheus.yaml) on free ports, once its
    Prometheus exporter answers; guarded: it ends with this worker, however the worker ends."""
    ports = MetricsCollector(free_port(), free_port())
    with log.open("wb") as out:
        collector = subprocess.Popen(
            [str(otelcol), "--config", str(REPO / "collectors" / "otlp-metrics-to-prometheus.yaml")],
            env={
                **os.environ,
                "OTLP_HTTP_ENDPOINT": f"127.0.0.1:{ports.otlp_port}",
                "PROMETHEUS_EXPORTER_ENDPOINT": f"127.0.0.1:{ports.exporter_port}",
                "OTELCOL_METRICS_PORT": str(free_port()),
            },
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    guard = Guard.start(collector, STOP_S)
    try:
        url = f"http://127.0.0.1:{ports.exporter_port}/metrics"
        wait_until("the Collector's prometheus exporter answers", lambda: http_ok(url))
        yield ports
    finally:
        end_process(collector, STOP_S, guard)
