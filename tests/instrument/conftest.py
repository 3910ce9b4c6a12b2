"""`exporter`: every span the process ends, in memory. The global TracerProvider can be set once per process,
so the first test installs one and later ones add to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(scope="session")
def _module_exporter() -> InMemorySpanExporter:
    # The global TracerProvider can be set once per process: install one if nobody has, else add to it.
    # `_decorators._tracer` is a ProxyTracer, so it follows whichever provider is global.
    exporter = InMemorySpanExporter()
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(SimpleSpanProcessor(exporter))
    else:
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "decorator-tests"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    assert isinstance(trace.get_tracer_provider(), TracerProvider)
    return exporter


@pytest.fixture
def exporter(_module_exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    _module_exporter.clear()
    yield _module_exporter
    _module_exporter.clear()
