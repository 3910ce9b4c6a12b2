"""`tracescore.init()`: wire tracescore's spans to Kafka (or OTLP), reusing the application's TracerProvider.

Settings are read once, here, with one precedence: `init()` arguments > `TRACESCORE_*` environment variables
> defaults. The broker address is `TRACESCORE_BOOTSTRAP_SERVERS`, the same name the consumer reads.
"""

from __future__ import annotations

import inspect
import logging
import os
import threading
import warnings
from typing import Any, Literal

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from tracescore import semconv
from tracescore._kafka_config import SPANS_TOPIC, TopicSettings
from tracescore.export import (
    BoundedSpanProcessor,
    KafkaProducerSettings,
    KafkaSpanExporter,
    SpanAccounting,
    otlp_configured,
    otlp_span_exporter,
)
from tracescore.instrument._content import ContentPolicy, ContentSettings, Redactor
from tracescore.instrument._recorders import set_policy, use_provider

__all__ = ["InstrumentSettings", "Instrumentation", "force_flush", "init", "shutdown"]

_log = logging.getLogger("tracescore.instrument")
_BROKER_VARIABLE = "TRACESCORE_BOOTSTRAP_SERVERS"  # bootstrap_servers, under InstrumentSettings' prefix
_OLD_BROKER_VARIABLE = "TRACESCORE_KAFKA_BOOTSTRAP"


class InstrumentSettings(TopicSettings):
    """SDK settings; every field falls back to a TRACESCORE_* environment variable (nested ones with `__`:
    TRACESCORE_CONTENT__CAPTURE=false, TRACESCORE_KAFKA__SASL_MECHANISM=PLAIN)."""

    model_config = SettingsConfigDict(env_prefix="TRACESCORE_", env_nested_delimiter="__")

    service_name: str = Field(
        default="unknown_service",
        description="service.name of the spans, when tracescore installs the TracerProvider.",
    )
    bootstrap_servers: str | None = Field(
        default=None, description="Kafka brokers, host:port[,...]; the name the consumer reads too."
    )
    kafka_bootstrap: str | None = Field(
        default=None,
        exclude=True,
        description="Deprecated name of bootstrap_servers; still read, with a warning.",
    )
    topic: str = Field(default=SPANS_TOPIC, description="Kafka topic the spans are written to.")
    exporter: Literal["kafka", "otlp"] | None = Field(
        default=None,
        description="kafka (needs bootstrap_servers) or otlp (the standard OTEL_EXPORTER_OTLP_* variables); "
        "unset: kafka when a broker is configured, else otlp when an OTLP endpoint is.",
    )
    export_all_spans: bool = Field(
        default=False,
        description="Export the application's other spans too; by default only tracescore's are exported "
        "(the app's spans keep their own exporters).",
    )
    batch_delay_ms: int = Field(default=1000, ge=1, description="Longest wait before a batch is exported.")
    max_queue_size: int = Field(
        default=2048,
        ge=1,
        description="Finished spans waiting for export; past it they are dropped, counted.",
    )
    max_export_batch_size: int = Field(default=512, ge=1, description="Spans exported at once.")
    shutdown_timeout_s: float = Field(
        default=5.0, ge=0, description="shutdown() delivers what it can within this time, never raises."
    )
    drop_log_interval_s: float = Field(
        default=60.0, gt=0, description="At most one log line about dropped spans this often."
    )
    kafka: KafkaProducerSettings = Field(
        default_factory=KafkaProducerSettings, description="Kafka security and producer tuning."
    )
    content: ContentSettings = Field(
        default_factory=ContentSettings,
        description="What text goes on the spans: capture, limits, redaction.",
    )

    @model_validator(mode="after")
    def _old_broker_name(self) -> InstrumentSettings:
        if self.kafka_bootstrap is not None:
            _deprecated(
                f"{_OLD_BROKER_VARIABLE} (kafka_bootstrap) is deprecated: use {_BROKER_VARIABLE}"
                " (bootstrap_servers), the name the consumer reads too"
            )
            if self.bootstrap_servers is None:
                self.bootstrap_servers = self.kafka_bootstrap
            self.kafka_bootstrap = None
        return self


class Instrumentation:
    """What `init()` set up. `stats()` says how many spans were delivered and dropped (by reason)."""

    def __init__(self, provider: TracerProvider, processor: BoundedSpanProcessor) -> None:
        self.provider = provider
        self.processor = processor

    @property
    def accounting(self) -> SpanAccounting:
        return self.processor.accounting

    def stats(self) -> dict[str, Any]:
        return {"delivered": self.accounting.delivered, "dropped": dict(self.accounting.dropped)}

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.processor.force_flush(timeout_millis)

    def shutdown(self, timeout_s: float | None = None) -> None:
        # Our processor only; the app's own provider (if any) stays the app's to stop.
        self.processor.shutdown(None if timeout_s is None else timeout_s * 1000)


_state_lock = threading.Lock()
_current: Instrumentation | None = None


def init(
    service_name: str | None = None,
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    *,
    exporter: SpanExporter | None = None,
    settings: InstrumentSettings | None = None,
    redact: Redactor | None = None,
    kafka_bootstrap: str | None = None,
) -> Instrumentation:
    """Export tracescore's spans to Kafka (or OTLP, or `exporter`). Uses the global TracerProvider if the app
    set one, and never replaces it; otherwise installs one with `service.name = service_name`. `redact` runs
    on every text before it is put on a span. Idempotent: a second call keeps the first configuration."""
    global _current
    if kafka_bootstrap is not None:
        _deprecated("init(kafka_bootstrap=) is deprecated: use bootstrap_servers=")
        bootstrap_servers = bootstrap_servers or kafka_bootstrap
    overrides = {
        k: v
        for k, v in {
            "service_name": service_name,
            "bootstrap_servers": bootstrap_servers,
            "topic": topic,
        }.items()
        if v is not None
    }
    # The arguments validated as the environment is (a model copy is not): a topic Kafka would refuse fails
    # here, not at the first export.
    if settings is None:
        settings = InstrumentSettings(**overrides)
    else:
        settings = type(settings).model_validate({**dict(settings), **overrides})
    with _state_lock:
        if _current is not None:
            _log.warning("tracescore.init() called again; keeping the first configuration")
            return _current
        accounting = SpanAccounting(log_interval_s=settings.drop_log_interval_s)
        exporter = exporter or _exporter_for(settings, accounting)
        set_policy(ContentPolicy(settings.content, redact))
        processor = BoundedSpanProcessor(
            exporter,
            accept=None if settings.export_all_spans else _is_tracescore_span,
            accounting=getattr(exporter, "accounting", None) or accounting,
            max_queue_size=settings.max_queue_size,
            max_batch_size=settings.max_export_batch_size,
            schedule_delay_s=settings.batch_delay_ms / 1000,
            shutdown_timeout_s=settings.shutdown_timeout_s,
        )
        provider = _provider_for(settings.service_name)
        _add_beside_the_apps(provider, processor)
        use_provider(provider)
        _current = Instrumentation(provider, processor)
        return _current


def force_flush(timeout_s: float = 30.0) -> bool:
    """Wait until every span ended so far is delivered (or dropped and counted), at most `timeout_s`. True
    only when all were delivered. Call it before a serverless handler returns (AWS Lambda freezes the process
    right after): spans still in the Kafka producer are otherwise lost. Never raises; True without init()."""
    with _state_lock:
        current = _current
    if current is None:
        return True
    try:
        return current.force_flush(int(timeout_s * 1000))
    except Exception:
        _log.warning("tracescore force_flush failed", exc_info=True)
        return False


def shutdown(timeout_s: float | None = None) -> None:
    """Deliver what can be delivered within `timeout_s` (default `shutdown_timeout_s`, 5 s), count the rest as
    dropped, stop. Never raises into the application. Safe to call when init() never ran."""
    global _current
    with _state_lock:
        if _current is not None:
            try:
                _current.shutdown(timeout_s)
            except Exception:
                _log.warning("tracescore shutdown failed", exc_info=True)
            _current = None


def _deprecated(message: str) -> None:
    # A DeprecationWarning for test suites and -W flags, and a log line, which people actually see.
    warnings.warn(message, DeprecationWarning, stacklevel=3)
    _log.warning(message)


def _is_tracescore_span(span: ReadableSpan) -> bool:
    scope = span.instrumentation_scope
    return scope is not None and scope.name == semconv.SDK_SCOPE


def _exporter_for(settings: InstrumentSettings, accounting: SpanAccounting) -> SpanExporter:
    kind = settings.exporter or (
        "kafka" if settings.bootstrap_servers else "otlp" if otlp_configured() else None
    )
    if kind == "otlp":
        return otlp_span_exporter()
    if kind is None or not settings.bootstrap_servers:
        raise ValueError(
            f"tracescore.init needs a destination: bootstrap_servers= (or {_BROKER_VARIABLE}), "
            f"an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT), or exporter={_misspelt_broker_variables()}"
        )
    return KafkaSpanExporter(
        settings.bootstrap_servers, settings.topic, settings=settings.kafka, accounting=accounting
    )


def _misspelt_broker_variables() -> str:
    """The error's end when the broker's variable looks misspelt (`TRACESCORE_BOOTSTRAP_SERVER`): pydantic
    ignores a name it does not know, so the address was set and the SDK says it was given none."""
    from tracescore._environment import misspelt_variables  # only on this error: the SDK's import stays light

    meant_broker = {_BROKER_VARIABLE, _OLD_BROKER_VARIABLE}  # the deprecated name suggests the new one
    found = misspelt_variables(os.environ, [InstrumentSettings])
    names = sorted(name for name, meant in found.items() if meant in meant_broker)
    if not names:
        return ""
    return f"; {', '.join(names)} is set, but no setting has that name: did you mean {_BROKER_VARIABLE}?"


def _add_beside_the_apps(provider: TracerProvider, processor: SpanProcessor) -> None:
    """Add our processor to the app's provider, keeping every processor it had. Phoenix's `register()`
    provider drops its own exporter when a processor is added, unless told not to: the app's spans would stop
    reaching Phoenix, silently."""
    try:
        parameters = inspect.signature(provider.add_span_processor).parameters
    except (TypeError, ValueError):  # a provider whose method has no signature to read: the SDK's call
        parameters = {}
    if "replace_default_processor" in parameters:
        provider.add_span_processor(processor, replace_default_processor=False)  # type: ignore[call-arg]
    else:
        provider.add_span_processor(processor)


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
