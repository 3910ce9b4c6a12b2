"""The Vercel AI SDK page's OpenTelemetry setup, as a Node 20 team copies it: the `telemetry.mjs` lines the
page shows run as shown (only `serviceName` and `collectorUrl` set, as the page says) with the npm packages
the repo records with, and export spans with the service named; and what the page says of the environment
variables holds for those packages (NodeTracerProvider reads no OTEL_SERVICE_NAME; `envDetector` does; the
exporter without a url reads OTEL_EXPORTER_OTLP_ENDPOINT). The spans go to a loopback OTLP receiver: the
Collector and Kafka part is tests/collectors/test_vercel_ai_app.py's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pages import DOCS, REPO, blocks

FIXTURES = REPO / "tests" / "extract" / "fixtures"
sys.path[:0] = [str(FIXTURES), str(FIXTURES / "scenarios")]

from _otlp_receiver import OtlpReceiver  # noqa: E402
from peers import NodeEnv, ensure_node_env  # noqa: E402

PAGE = DOCS / "integrations" / "vercel-ai.md"
APP = FIXTURES / "scenarios" / "vercel_ai"
SERVICE = "aurora-support"
NODE_TIMEOUT_S = 60
_INCLUDE = re.compile(r'^\s*--8<-- "(?P<path>[^":]+):(?P<section>[\w-]+)"\s*$')
_MARKER = re.compile(r"^\s*// --8<-- \[(?:start|end):[\w-]+\]\s*$")

# Spans to the receiver at $RECEIVER, then a JSON line: what the app's code left for the test to see.
_EMIT = """
import { trace } from "@opentelemetry/api";
trace.getTracer("page-check").startSpan("page-check").end();
await provider.shutdown();
"""


def _section(path: Path, name: str) -> str:
    """What the site shows for `path:name`: the lines between its markers, other sections' markers out."""
    text = path.read_text(encoding="utf-8")
    start, end = f"// --8<-- [start:{name}]", f"// --8<-- [end:{name}]"
    inner = text.split(start, 1)[1].split("\n", 1)[1].split(end, 1)[0].rsplit("\n", 1)[0]
    return "\n".join(line for line in inner.splitlines() if not _MARKER.match(line))


def _setup_block() -> str:
    """The page's code block that sets up the provider (the one including telemetry.mjs), as shown."""
    for block in blocks(PAGE):
        lines = block.body.splitlines()
        if block.lang == "js" and any("telemetry.mjs:" in line for line in lines):
            shown = []
            for line in lines:
                match = _INCLUDE.match(line)
                shown.append(_section(REPO / match["path"], match["section"]) if match else line)
            return "\n".join(shown)
    raise AssertionError(f"{PAGE.relative_to(REPO)}: no js block includes telemetry.mjs")


@pytest.fixture(scope="module")
def node_env() -> Path:
    return ensure_node_env(NodeEnv(APP))


@pytest.fixture
def scratch(node_env: Path) -> Iterator[Path]:
    """A folder beside the recorded packages' node_modules (Node resolves packages upwards from a file)."""
    path = Path(tempfile.mkdtemp(prefix="page.", dir=node_env))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run(scratch: Path, code: str, env: dict[str, str]) -> None:
    (scratch / "app.mjs").write_text(code, encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        ["node", "app.mjs"],
        cwd=scratch,
        env={**clean, "NODE_OPTIONS": "", **env},
        capture_output=True,
        text=True,
        timeout=NODE_TIMEOUT_S,
    )
    assert done.returncode == 0, f"the page's code failed as shown:\n{code}\n{done.stderr}"


def _service_names(bodies: list[bytes]) -> list[str]:
    names = []
    for body in bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for spans in request.resource_spans:
            attrs = {a.key: a.value.string_value for a in spans.resource.attributes}
            names.append(attrs.get("service.name", ""))
    return names


def test_the_pages_telemetry_setup_runs_as_shown_and_names_the_service(scratch: Path) -> None:
    prelude = f"const serviceName = {json.dumps(SERVICE)};\nconst collectorUrl = process.env.RECEIVER;\n"
    with OtlpReceiver() as receiver:
        _run(scratch, prelude + _setup_block() + _EMIT, {"RECEIVER": receiver.base_url})
        assert _service_names(receiver.take()) == [SERVICE]
        assert receiver.other_requests == []


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("", "unknown_service:node"),  # the page: NodeTracerProvider reads no OTEL_SERVICE_NAME
        ("resource: detectResources({ detectors: [envDetector] }),", "from-env"),  # the page's way to
    ],
    ids=["no-resource", "env-detector"],
)
def test_what_the_page_says_of_the_environment_holds(scratch: Path, resource: str, expected: str) -> None:
    if resource:
        assert resource.removeprefix("resource: ").rstrip(",") in PAGE.read_text(encoding="utf-8")
    code = f"""
import {{ OTLPTraceExporter }} from "@opentelemetry/exporter-trace-otlp-proto";
import {{ detectResources, envDetector }} from "@opentelemetry/resources";
import {{ BatchSpanProcessor, NodeTracerProvider }} from "@opentelemetry/sdk-trace-node";
const provider = new NodeTracerProvider({{
  {resource}
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
}});
provider.register();
"""
    with OtlpReceiver() as receiver:
        env = {"OTEL_SERVICE_NAME": "from-env", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.base_url}
        _run(scratch, code + _EMIT, env)
        assert _service_names(receiver.take()) == [expected]
        assert receiver.other_requests == []
