"""BoundedSpanProcessor honours the application's sampling decision: only sampled spans are exported, as with
the OpenTelemetry SDK's own processors. The app's provider and sampler are real SDK objects; the exporter
is the SDK's in-memory one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, Decision, ParentBased, Sampler, StaticSampler
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tracescore.export import BoundedSpanProcessor

RECORD_ONLY = StaticSampler(Decision.RECORD_ONLY)
# An upstream service's traceparent, sampled (flags 01) or not (flags 00).
UPSTREAM = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-{flags}"


class Pipeline:
    def __init__(self, sampler: Sampler) -> None:
        self.exporter = InMemorySpanExporter()
        self.processor = BoundedSpanProcessor(self.exporter, schedule_delay_s=0.01)
        self.provider = TracerProvider(sampler=sampler)
        self.provider.add_span_processor(self.processor)
        self.tracer = self.provider.get_tracer("tracescore")

    def span(self, name: str, upstream_flags: str | None = None) -> None:
        parent = None
        if upstream_flags is not None:
            carrier = {"traceparent": UPSTREAM.format(flags=upstream_flags)}
            parent = TraceContextTextMapPropagator().extract(carrier)
        with self.tracer.start_as_current_span(name, context=parent):
            pass

    def exported(self) -> list[str]:
        assert self.processor.force_flush(10_000)
        return sorted(s.name for s in self.exporter.get_finished_spans())


@pytest.fixture
def pipelines() -> Iterator[list[Pipeline]]:
    made: list[Pipeline] = []
    yield made
    for pipeline in made:
        pipeline.provider.shutdown()


def make(pipelines: list[Pipeline], sampler: Sampler) -> Pipeline:
    pipelines.append(Pipeline(sampler))
    return pipelines[-1]


def test_a_record_only_span_is_not_exported_and_not_counted_as_dropped(pipelines: list[Pipeline]) -> None:
    pipeline = make(pipelines, RECORD_ONLY)
    pipeline.span("recorded, not sampled")
    assert pipeline.exported() == []
    assert pipeline.processor.accounting.dropped == {}, "the app chose this; nothing was lost"
    assert pipeline.processor.accounting.delivered == 0


def test_a_parent_based_sampler_follows_the_upstream_decision(pipelines: list[Pipeline]) -> None:
    # Recording under a "not sampled" upstream (for local processors, e.g. span metrics), sampling otherwise.
    pipeline = make(pipelines, ParentBased(ALWAYS_ON, remote_parent_not_sampled=RECORD_ONLY))
    pipeline.span("under a sampled upstream", upstream_flags="01")
    pipeline.span("under a not-sampled upstream", upstream_flags="00")
    pipeline.span("root")
    assert pipeline.exported() == ["root", "under a sampled upstream"]
    assert pipeline.processor.accounting.delivered == 2
    assert pipeline.processor.accounting.dropped == {}


def test_the_default_parent_based_sampler_under_a_not_sampled_upstream_exports_nothing(
    pipelines: list[Pipeline],
) -> None:
    pipeline = make(pipelines, ParentBased(ALWAYS_ON))
    pipeline.span("under a not-sampled upstream", upstream_flags="00")
    assert pipeline.exported() == []
