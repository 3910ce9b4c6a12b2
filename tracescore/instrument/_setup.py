"""`tracescore.init()`: wire RAG spans to Kafka, reusing the application's TracerProvider when it has one."""

from __future__ import annotations

import logging
import threading

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracescore.export import KafkaSpanExporter
from tracescore.instrument._decorators import SCOPE_NAME

__all__ = ["InstrumentSettings", "Instrumentation", "init", "shutdown"]

_log = logging.getLogger("tracescore.instrument")


class InstrumentSettings(BaseSettings):
    """SDK settings; every field falls back to a TRACESCORE_* environment variable."""

    model_config = SettingsConfigDict(env_prefix="TRACESCORE_")

    service_name: str = "unknown_service"
    kafka_bootstrap: str | None = None
    topic: str = "otlp_spans"
    # Only tracescore's RAG spans go to Kafka by default; the app's other spans keep their own exporters.
    export_all_spans: bool = False
    batch_delay_ms: int = Field(default=1000, ge=1)


class _RagSpansOnly(SpanProcessor):
    """Forwards only spans created by `@tracescore.rag` to the wrapped processor."""

    def __init__(self, inner: SpanProcessor) -> None:
        self._inner = inner

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        scope = span.instrumentation_scope
        if scope is not None and scope.name == SCOPE_NAME:
            self._inner.on_end(span)

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self._inner.force_flush(timeout_millis)


class Instrumentation:
    """What `init()` set up; `shutdown()` flushes every queued span and stops exporting."""

    def __init__(self, provider: TracerProvider, processor: SpanProcessor) -> None:
        self.provider = provider
        self.processor = processor

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.processor.force_flush(timeout_millis)

    def shutdown(self) -> None:
        # Shutting down our processor flushes it; the app's own provider (if any) stays the app's to stop.
        self.processor.shutdown()


_state_lock = threading.Lock()
_current: Instrumentation | None = None


def init(
    service_name: str | None = None,
    kafka_bootstrap: str | None = None,
    topic: str | None = None,
    *,
    exporter: SpanExporter | None = None,
    settings: InstrumentSettings | None = None,
) -> Instrumentation:
    """Export RAG spans to Kafka (or to `exporter`). Uses the global TracerProvider if the app set one, and
    never replaces it; otherwise installs one with `service.name = service_name`. Idempotent."""
    global _current
    overrides = {
        k: v
        for k, v in {"service_name": service_name, "kafka_bootstrap": kafka_bootstrap, "topic": topic}.items()
        if v is not None
    }
    settings = (settings or InstrumentSettings()).model_copy(update=overrides)
    with _state_lock:
        if _current is not None:
            _log.warning("tracescore.init() called again; keeping the first configuration")
            return _current
        if exporter is None:
            if not settings.kafka_bootstrap:
                raise ValueError(
                    "tracescore.init needs kafka_bootstrap= (or TRACESCORE_KAFKA_BOOTSTRAP) or exporter="
                )
            exporter = KafkaSpanExporter(settings.kafka_bootstrap, settings.topic)
        batch = BatchSpanProcessor(exporter, schedule_delay_millis=settings.batch_delay_ms)
        processor: SpanProcessor = batch if settings.export_all_spans else _RagSpansOnly(batch)
        provider = _provider_for(settings.service_name)
        provider.add_span_processor(processor)
        _current = Instrumentation(provider, processor)
        return _current


def shutdown() -> None:
    """Flush and stop what `init()` started. Safe to call when init() never ran."""
    global _current
    with _state_lock:
        if _current is not None:
            _current.shutdown()
            _current = None


def _provider_for(service_name: str) -> TracerProvider:
    existing = trace.get_tracer_provider()
    if isinstance(existing, TracerProvider):
        return existing
    if not isinstance(existing, trace.ProxyTracerProvider):
        raise RuntimeError(
            f"the global TracerProvider is a {type(existing).__name__}, which cannot take span processors; "
            "install an opentelemetry-sdk TracerProvider, or pass spans to tracescore through a Collector"
        )
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service_name}))
    trace.set_tracer_provider(provider)
    return provider
