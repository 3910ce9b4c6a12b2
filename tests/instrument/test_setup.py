"""`tracescore.init()`. The global TracerProvider can be set only once per process, so every scenario runs
in a fresh interpreter; the interpreters are started together, because importing tracescore (kafka,
pydantic) is most of each one's time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

PRELUDE = """
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import InstrumentSettings


@tracescore.rag
def answer(query, contexts):
    return "Paris."


def names(exporter):
    return sorted(s.name for s in exporter.get_finished_spans())
"""

SCENARIOS = {
    "installs_provider": """
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
        exporter = InMemorySpanExporter()
        instrumentation = tracescore.init("checkout-rag", exporter=exporter)
        provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider)
        assert instrumentation.provider is provider
        assert provider.resource.attributes[SERVICE_NAME] == "checkout-rag"
        answer("q", ["c"])
        tracescore.shutdown()
        [span] = exporter.get_finished_spans()
        assert span.resource.attributes[SERVICE_NAME] == "checkout-rag"
    """,
    "keeps_app_provider": """
        app_provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "app-service"}))
        trace.set_tracer_provider(app_provider)
        exporter = InMemorySpanExporter()
        instrumentation = tracescore.init("ignored-name", exporter=exporter)
        assert trace.get_tracer_provider() is app_provider
        assert instrumentation.provider is app_provider
        assert app_provider.resource.attributes[SERVICE_NAME] == "app-service"
        answer("q", ["c"])
        tracescore.shutdown()
        [span] = exporter.get_finished_spans()
        assert span.resource.attributes[SERVICE_NAME] == "app-service"
    """,
    "rag_spans_only": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter)
        with trace.get_tracer("app").start_as_current_span("POST /ask"):
            answer("q", ["c"])
        tracescore.shutdown()
        print(names(exporter))
    """,
    "export_all_spans": """
        exporter = InMemorySpanExporter()
        tracescore.init("svc", exporter=exporter, settings=InstrumentSettings(export_all_spans=True))
        with trace.get_tracer("app").start_as_current_span("POST /ask"):
            answer("q", ["c"])
        tracescore.shutdown()
        print(names(exporter))
    """,
    "no_destination": """
        tracescore.shutdown()  # harmless before init()
        try:
            tracescore.init("svc")
        except ValueError as exc:
            message = str(exc)
        else:
            raise AssertionError("init() without a destination must fail")
        assert "kafka_bootstrap" in message and "exporter" in message, message
        # Nothing was installed by the failed call.
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    """,
    "second_init": """
        first_exporter, second_exporter = InMemorySpanExporter(), InMemorySpanExporter()
        first = tracescore.init("svc", exporter=first_exporter)
        assert tracescore.init("other", exporter=second_exporter) is first
        answer("q", ["c"])
        tracescore.shutdown()
        assert names(first_exporter) == ["answer"]
        assert names(second_exporter) == []
    """,
    "shutdown_flushes": """
        exporter = InMemorySpanExporter()
        # A long batch delay: only the flush on shutdown can deliver these spans in time.
        tracescore.init("svc", exporter=exporter, settings=InstrumentSettings(batch_delay_ms=600_000))
        for _ in range(3):
            answer("q", ["c"])
        assert names(exporter) == []
        tracescore.shutdown()
        assert names(exporter) == ["answer", "answer", "answer"]
        tracescore.shutdown()  # a second call is harmless
    """,
    "noop_provider": """
        trace.set_tracer_provider(trace.NoOpTracerProvider())
        try:
            tracescore.init("svc", exporter=InMemorySpanExporter())
        except RuntimeError as exc:
            assert "NoOpTracerProvider" in str(exc), exc
        else:
            raise AssertionError("a NoOpTracerProvider cannot export spans")
    """,
}


Outcomes = dict[str, subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def outcomes() -> Iterator[Outcomes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    running = {
        name: subprocess.Popen(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name, code in SCENARIOS.items()
    }
    try:
        done: Outcomes = {}
        for name, proc in running.items():
            stdout, stderr = proc.communicate(timeout=60)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        yield done
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def stdout_of(outcomes: Outcomes, scenario: str) -> str:
    result = outcomes[scenario]
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_init_installs_a_provider_named_after_the_service(outcomes: Outcomes) -> None:
    stdout_of(outcomes, "installs_provider")


def test_init_adds_to_the_apps_provider_without_replacing_it(outcomes: Outcomes) -> None:
    stdout_of(outcomes, "keeps_app_provider")


def test_only_tracescore_spans_are_exported_by_default(outcomes: Outcomes) -> None:
    assert stdout_of(outcomes, "rag_spans_only") == "['answer']"


def test_export_all_spans_exports_the_apps_spans_too(outcomes: Outcomes) -> None:
    assert stdout_of(outcomes, "export_all_spans") == "['POST /ask', 'answer']"


def test_init_without_kafka_or_exporter_is_a_clear_value_error(outcomes: Outcomes) -> None:
    stdout_of(outcomes, "no_destination")


def test_second_init_returns_the_first_instrumentation(outcomes: Outcomes) -> None:
    stdout_of(outcomes, "second_init")


def test_shutdown_flushes_spans_ended_right_before_it(outcomes: Outcomes) -> None:
    stdout_of(outcomes, "shutdown_flushes")


def test_init_refuses_a_provider_that_cannot_take_processors(outcomes: Outcomes) -> None:
    stdout_of(outcomes, "noop_provider")
