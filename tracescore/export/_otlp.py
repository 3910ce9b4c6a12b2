"""Plain OTLP export, configured only through the standard `OTEL_EXPORTER_OTLP_*` variables (endpoint,
headers, protocol, compression, timeout), for a Collector or any OTLP backend instead of Kafka."""

from __future__ import annotations

import os

from opentelemetry.sdk.trace.export import SpanExporter

from tracescore._extras import install_line

__all__ = ["otlp_configured", "otlp_span_exporter"]


def otlp_configured() -> bool:
    return bool(
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    )


def otlp_span_exporter() -> SpanExporter:
    """The OpenTelemetry OTLP exporter for `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` (default http/protobuf)."""
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

            return Grpc()
        if protocol != "http/protobuf":
            raise ValueError(f"OTLP protocol {protocol!r} is not supported: use http/protobuf or grpc")
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

        return Http()
    except ImportError:
        extra = "otlp-grpc" if protocol == "grpc" else "otlp"
        raise ImportError(
            f"OTLP export over {protocol} needs the {extra} extra: {install_line(extra)}"
        ) from None
