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
    """`config`: a file, or files merged in order ("a.yaml+b.yaml", as `--config a.yaml --config b.yaml`)."""
    files = [arg for name in config.split("+") for arg in ("--config", str(COLLECTORS / name))]
    return subprocess.run(
        [str(otelcol), "validate", *files],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "brokers", ["127.0.0.1:9092", "[kafka-1:9092, kafka-2:9092]"], ids=["one-broker", "broker-list"]
)
@pytest.mark.parametrize(
    "config", ["otlp-to-kafka.yaml", "otlp-to-kafka.yaml+genai-log-events.yaml", "kafka-to-backend.yaml"]
)
def test_collector_configs_validate(otelcol: Path, config: str, brokers: str) -> None:
    env = {**os.environ, "KAFKA_BROKERS": brokers, "OTLP_BACKEND_ENDPOINT": "http://127.0.0.1:6006"}
    done = _validate(otelcol, config, env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_backend_config_needs_a_backend_endpoint(otelcol: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OTLP_BACKEND_ENDPOINT"}
    done = _validate(otelcol, "kafka-to-backend.yaml", env)
    assert done.returncode != 0 and "endpoint" in done.stdout + done.stderr


def test_the_ingest_config_writes_no_log_records_unless_the_genai_file_is_added() -> None:
    """Every log record an app sends lands on the spans topic once the logs pipeline runs (the Java agent
    exports all its logs over OTLP by default): opt-in, for the apps that write their messages as logs."""
    import yaml

    ingest = yaml.safe_load((COLLECTORS / "otlp-to-kafka.yaml").read_text(encoding="utf-8"))
    added = yaml.safe_load((COLLECTORS / "genai-log-events.yaml").read_text(encoding="utf-8"))
    assert set(ingest["service"]["pipelines"]) == {"traces"}
    assert "logs" not in ingest["exporters"]["kafka"]
    assert set(added["service"]["pipelines"]) == {"logs"}
    # The same topic and the same key as the spans: a trace's log records on its spans' partition.
    assert added["exporters"]["kafka"]["logs"]["topic"] == ingest["exporters"]["kafka"]["traces"]["topic"]
    assert added["exporters"]["kafka"]["partition_logs_by_trace_id"] is True
