"""SDK spans as Phoenix reads them: an app process exports over plain OTLP/HTTP (`OTEL_EXPORTER_OTLP_*`, the
alternative to Kafka) to a real Phoenix, whose REST API returns the kinds, documents and input/output."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import uuid
from typing import Any

import httpx2
from _zygote import run
from service_processes import checkout_env

from tracescore.testing import run_guarded
from tracescore.testing.phoenix import PhoenixServer, install_phoenix_otel

APP = """
import json, sys
from opentelemetry import trace
import tracescore

instrumentation = tracescore.init(sys.argv[1])

@tracescore.retriever
def search(query):
    return [{"content": "Paris is the capital of France.", "id": "doc-1", "score": 0.92},
            {"content": "France is in Europe.", "id": "doc-2", "score": 0.41}]

@tracescore.generation(model="gpt-4o-mini")
def generate(messages):
    return "Paris."

@tracescore.rag(route="/geo")
def answer(query):
    search(query)
    seen.append(trace.get_current_span().get_span_context().trace_id)
    return generate([{"role": "user", "content": query}])

seen = []
answer("Capital of France?")
trace_id = seen[0]
tracescore.shutdown(timeout_s=30)
print(json.dumps({"trace_id": format(trace_id, "032x"), **instrumentation.stats()}))
"""


def _spans(api: httpx2.Client, trace_id: str, timeout_s: float = 60.0) -> dict[str, dict[str, Any]]:
    """The trace's spans by name, once Phoenix (which inserts asynchronously) has all three."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = api.get("/v1/projects/default/spans", params={"limit": 1000})
        if response.status_code == 200:
            mine = {s["name"]: s for s in response.json()["data"] if s["context"]["trace_id"] == trace_id}
            if len(mine) == 3:
                return mine
        if time.monotonic() > deadline:
            raise AssertionError(
                f"trace {trace_id} not in Phoenix after {timeout_s:.0f}s: {response.text[:2000]}"
            )
        time.sleep(0.3)


def test_phoenix_reads_the_kinds_documents_and_input_output(phoenix_server: PhoenixServer) -> None:
    service = f"sdk-{uuid.uuid4().hex[:8]}"  # service.name of the app
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env |= {
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix_server.base_url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    done = run([sys.executable, "-c", textwrap.dedent(APP), service], timeout=120, env=checkout_env(env))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["delivered"], report["dropped"]) == (3, {})

    with httpx2.Client(base_url=phoenix_server.base_url, timeout=10.0) as api:
        spans = _spans(api, report["trace_id"])
    assert {name: s["span_kind"] for name, s in spans.items()} == {
        "answer": "CHAIN",
        "search": "RETRIEVER",
        "generate": "LLM",
    }
    rag, retriever, llm = (spans[n]["attributes"] for n in ("answer", "search", "generate"))
    assert (
        spans["search"]["parent_id"]
        == spans["generate"]["parent_id"]
        == spans["answer"]["context"]["span_id"]
    )
    expected = [("doc-1", 0.92, "Paris is the capital of France."), ("doc-2", 0.41, "France is in Europe.")]
    for attrs in (retriever, rag):  # the retriever's documents, and the same rolled up onto the rag span
        prefix = "retrieval.documents.{}.document."
        fields = [tuple(attrs[prefix.format(i) + f] for f in ("id", "score", "content")) for i in range(2)]
        assert fields == expected
    assert (rag["input.value"], rag["output.value"]) == ("Capital of France?", "Paris.")
    assert retriever["input.value"] == retriever["gen_ai.retrieval.query.text"] == "Capital of France?"
    assert llm["output.value"] == llm["llm.output_messages.0.message.content"] == "Paris."
    assert llm["llm.input_messages.0.message.content"] == "Capital of France?"
    assert llm["llm.model_name"] == "gpt-4o-mini"
    assert [
        rag["gen_ai.operation.name"],
        retriever["gen_ai.operation.name"],
        llm["gen_ai.operation.name"],
    ] == [
        "invoke_workflow",
        "retrieval",
        "chat",
    ]


REGISTERED_APP = """
import json, sys
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from phoenix.otel import register
import tracescore

provider = register(project_name=sys.argv[2], endpoint=sys.argv[1] + "/v1/traces", batch=False, verbose=False)
ours = InMemorySpanExporter()
tracescore.init(
    service_name=sys.argv[2], exporter=ours, settings=tracescore.InstrumentSettings(export_all_spans=True)
)
with provider.get_tracer("app").start_as_current_span("app-step") as span:
    trace_id = format(span.get_span_context().trace_id, "032x")
tracescore.shutdown(timeout_s=30)
provider.shutdown()
print(json.dumps({"trace_id": trace_id, "ours": [s.name for s in ours.get_finished_spans()]}))
"""


def test_an_app_registered_with_phoenix_keeps_sending_it_its_spans_after_tracescore_init(
    phoenix_server: PhoenixServer,
) -> None:
    """`phoenix.otel.register()` (the real arize-phoenix-otel), then `tracescore.init()`: Phoenix's provider
    drops its own exporter when a processor is added unless told not to. The app's span reaches Phoenix and
    ours."""
    project = f"registered-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_", "PHOENIX_"))}
    python = str(install_phoenix_otel())
    done = run_guarded(  # another interpreter than this one: not the zygote's fork
        [python, "-c", textwrap.dedent(REGISTERED_APP), phoenix_server.base_url, project],
        timeout_s=120,
        capture_output=True,
        text=True,
        env=checkout_env(env),
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ours"] == ["app-step"], "export_all_spans: tracescore's exporter got the app's span"
    deadline = time.monotonic() + 60
    with httpx2.Client(base_url=phoenix_server.base_url, timeout=10.0) as api:
        while True:
            response = api.get(f"/v1/projects/{project}/spans", params={"limit": 100})
            names = [s["name"] for s in response.json()["data"]] if response.status_code == 200 else []
            if names == ["app-step"]:
                break
            assert time.monotonic() < deadline, f"the app's span never reached Phoenix: {response.text[:500]}"
            time.sleep(0.3)
