"""Export: spans leave the application as OTLP protobuf on Kafka (or over plain OTLP), through a bounded
queue that never blocks the application and accounts for every span."""

from tracescore.export._accounting import DROP_REASONS, SpanAccounting
from tracescore.export._kafka import KafkaSpanExporter
from tracescore.export._layout import encode_partition_messages, encode_trace_messages
from tracescore.export._otlp import otlp_configured, otlp_span_exporter
from tracescore.export._processor import BoundedSpanProcessor
from tracescore.export._settings import KafkaProducerSettings

__all__ = [
    "DROP_REASONS",
    "BoundedSpanProcessor",
    "KafkaProducerSettings",
    "KafkaSpanExporter",
    "SpanAccounting",
    "encode_partition_messages",
    "encode_trace_messages",
    "otlp_configured",
    "otlp_span_exporter",
]
