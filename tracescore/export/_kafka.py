"""KafkaSpanExporter: spans as OTLP protobuf on a Kafka topic, byte-compatible with the Collector.

The OpenTelemetry Collector's kafka exporter (encoding `otlp_proto`, `partition_traces_by_id: true`)
writes one serialized `ExportTraceServiceRequest` per trace, keyed by the 32-char hex trace id. We write
the same, so a Collector and this exporter can feed the same topic and any consumer reads both.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["KafkaSpanExporter", "encode_trace_messages"]

_log = logging.getLogger("tracescore.export")


def encode_trace_messages(spans: Sequence[ReadableSpan]) -> list[tuple[bytes, bytes]]:
    """(key, value) Kafka messages: one OTLP ExportTraceServiceRequest per trace, key = hex trace id."""
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        by_trace[span.context.trace_id].append(span)
    return [
        (format(trace_id, "032x").encode(), encode_spans(group).SerializeToString())
        for trace_id, group in by_trace.items()
    ]


class KafkaSpanExporter(SpanExporter):
    """Exports spans to `topic`. The producer is created lazily, so a broker that is down at application
    start delays spans instead of failing the application; every failed batch is logged and counted."""

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str = "otlp_spans",
        *,
        producer: KafkaProducer | None = None,
        timeout_s: float = 10.0,
        **producer_config: Any,
    ) -> None:
        self.topic = topic
        self._bootstrap_servers = bootstrap_servers
        self._producer = producer
        self._producer_config = {"acks": "all", "linger_ms": 5, **producer_config}
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._shutdown = False
        self.exported_spans = 0
        self.failed_spans = 0

    def send(self, spans: Sequence[ReadableSpan]) -> list[Future[Any]]:
        """Queue the spans on the producer and return the delivery futures (for callers that batch acks)."""
        producer = self._get_producer()
        return [
            producer.send(self.topic, key=key, value=value) for key, value in encode_trace_messages(spans)
        ]

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        # Our own producer traffic must never be traced, or exporting would create spans to export.
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            for future in self.send(spans):
                future.get(timeout=self._timeout_s)
        except (KafkaError, OSError) as exc:
            self.failed_spans += len(spans)
            _log.error("could not export %d spans to Kafka topic %r: %s", len(spans), self.topic, exc)
            return SpanExportResult.FAILURE
        finally:
            detach(token)
        self.exported_spans += len(spans)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        if self._producer is not None:
            self._producer.flush(timeout=timeout_millis / 1000)
        return True

    def shutdown(self) -> None:
        self._shutdown = True
        if self._producer is not None:
            self._producer.flush(timeout=self._timeout_s)
            self._producer.close(timeout=self._timeout_s)

    def _get_producer(self) -> KafkaProducer:
        with self._lock:
            if self._producer is None:
                self._producer = KafkaProducer(
                    bootstrap_servers=self._bootstrap_servers, **self._producer_config
                )
            return self._producer
