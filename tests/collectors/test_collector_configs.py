"""The Collector configs tracescore ships (collectors/): valid for the Collector it builds, with one broker or
a list of them, and the backend config refusing to start without its backend's endpoint."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from collector_helpers import COLLECTORS


def _validate(otelcol: Path, config: str, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(otelcol), "validate", "--config", str(COLLECTORS / config)],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "brokers", ["127.0.0.1:9092", "[kafka-1:9092, kafka-2:9092]"], ids=["one-broker", "broker-list"]
)
@pytest.mark.parametrize("config", ["otlp-to-kafka.yaml", "kafka-to-backend.yaml"])
def test_collector_configs_validate(otelcol: Path, config: str, brokers: str) -> None:
    env = {**os.environ, "KAFKA_BROKERS": brokers, "OTLP_BACKEND_ENDPOINT": "http://127.0.0.1:6006"}
    done = _validate(otelcol, config, env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_backend_config_needs_a_backend_endpoint(otelcol: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OTLP_BACKEND_ENDPOINT"}
    done = _validate(otelcol, "kafka-to-backend.yaml", env)
    assert done.returncode != 0 and "endpoint" in done.stdout + done.stderr
