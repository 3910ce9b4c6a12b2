"""Running the real OpenTelemetry Collector in tests: free loopback ports and a managed process, and reading
what its file exporter wrote."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tracescore.testing import STOP_S, Guard, end_process, wait_ready

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "deploy" / "collector" / "build.sh"
COLLECTORS = REPO / "collectors"
# A cold build (Go modules and compilation) takes minutes on two cores; warm runs return at once.
BUILD_TIMEOUT_S = 45 * 60
READY_LINE = "Everything is ready. Begin running and processing data."


class CollectorProcess:
    """One `otelcol --config ...` process on loopback ports. A context manager: on exit it is terminated
    (SIGTERM lets the Collector drain its queues), waited for, and killed if it hangs; if the process that
    started it dies first, its guard ends it."""

    def __init__(self, binary: Path, configs: Sequence[Path], env: Mapping[str, str], log_path: Path) -> None:
        self.binary = binary
        self.configs = list(configs)
        self.env = {**os.environ, **env}
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        self._guard: Guard | None = None

    def start(self, timeout_s: float = 60.0) -> CollectorProcess:
        args = [str(self.binary)]
        for config in self.configs:
            args += ["--config", str(config)]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=self.log_path.parent
            )
        self._guard = Guard.start(self.process, STOP_S)
        try:
            wait_ready(
                self.process, lambda: READY_LINE in self.log(), what="the Collector", timeout_s=timeout_s,
                log=self.log, error=AssertionError,
            )  # fmt: skip
        except AssertionError:
            self.stop()
            raise
        return self

    def stop(self, timeout_s: float = STOP_S) -> None:
        # SIGTERM first: the Collector drains its queues on it.
        end_process(self.process, timeout_s, self._guard)
        self.process, self._guard = None, None

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> CollectorProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def create_topics(bootstrap: str, names: Sequence[str], partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1) for name in names])
    finally:
        admin.close()


def egress_to_file(
    otelcol: Path, bootstrap: str, topic: str, expected: int, tmp: Path, timeout_s: float = 60.0
) -> tuple[list[dict[str, Any]], str]:
    """Run the documented egress config (kafka-to-backend.yaml) on `topic` from its start, its OTLP backend
    swapped for a file, until `expected` spans reached the file or `timeout_s` passed: (the spans, the
    Collector's log). A second --config is merged over the first (maps merge, lists are replaced)."""
    from tracescore.testing import free_port

    override, exported = file_backend(tmp, "traces")
    env = {
        "KAFKA_BROKERS": bootstrap,
        "KAFKA_SPANS_TOPIC": topic,
        "KAFKA_GROUP_ID": f"{topic}.backend",
        "KAFKA_INITIAL_OFFSET": "earliest",
        "OTLP_BACKEND_ENDPOINT": f"http://127.0.0.1:{free_port()}",  # replaced by the file exporter
        "OTELCOL_METRICS_PORT": str(free_port()),
    }
    configs = [COLLECTORS / "kafka-to-backend.yaml", override]
    with CollectorProcess(otelcol, configs, env, tmp / "egress.log") as egress:
        deadline = time.monotonic() + timeout_s
        while len(backend := file_exporter_spans(exported)) < expected and time.monotonic() < deadline:
            time.sleep(0.3)
        return backend, egress.log()


def file_backend(tmp: Path, pipeline: str) -> tuple[Path, Path]:
    """A config to merge over a Collector config (a later --config) that swaps `pipeline`'s exporters for a
    file exporter: (the config, the file the spans go to, read with `file_exporter_spans`)."""
    exported = tmp / "backend.jsonl"
    override = tmp / "file-backend.yaml"
    override.write_text(
        json.dumps(
            {
                "exporters": {"file/backend": {"path": str(exported), "flush_interval": "100ms"}},
                "service": {"pipelines": {pipeline: {"exporters": ["file/backend"]}}},
            }
        )
    )
    return override, exported


def file_exporter_spans(path: Path) -> list[dict[str, Any]]:
    """Spans from the file exporter's output: one OTLP/JSON ExportTraceServiceRequest per line (ids in hex,
    as OTLP/JSON specifies)."""
    if not path.exists():
        return []
    spans = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        for resource_spans in json.loads(line).get("resourceSpans", []):
            resource = json_attributes(resource_spans.get("resource", {}).get("attributes", []))
            for scope_spans in resource_spans.get("scopeSpans", []):
                scope = scope_spans.get("scope", {}).get("name", "")
                for span in scope_spans.get("spans", []):
                    spans.append(
                        {
                            "traceId": span["traceId"],
                            "spanId": span["spanId"],
                            "parentSpanId": span.get("parentSpanId", ""),
                            "scope": scope,
                            "resource": resource,
                            "attributes": json_attributes(span.get("attributes", [])),
                        }
                    )
    return spans


def json_attributes(key_values: list[dict[str, Any]]) -> dict[str, Any]:
    attributes = {}
    for kv in key_values:
        ((kind, value),) = kv.get("value", {"stringValue": ""}).items()
        attributes[kv["key"]] = int(value) if kind == "intValue" else value
    return attributes
