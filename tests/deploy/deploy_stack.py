"""Helpers for the Prometheus path with real programs (fixtures in conftest.py):

example app -> Kafka -> tracescore consume --OTLP/HTTP--> Collector (prometheus exporter)
    <-scrape- Prometheus (the shipped rules) --> Alertmanager --> webhook receiver
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from tracescore.alert.testing import AlertmanagerProcess, PrometheusProcess, WebhookReceiver

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "tracescore-rules.yaml"


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
            env=python_env(),
            check=True,
            capture_output=True,
            timeout=300,
        )

    def value(self, promql: str) -> float:
        result = self.prometheus.query(promql)["result"]
        return sum(float(r["value"][1]) for r in result)


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
    assert fast.count("for: 0s") == 3, "the shipped rules changed: update this test"
    path = tmp / "tracescore-rules.yaml"
    path.write_text(fast + "\n")
    return path
