"""Export: spans leave the application as OTLP protobuf on Kafka (or through an OpenTelemetry Collector)."""

from tracescore.export._kafka import KafkaSpanExporter, encode_trace_messages

__all__ = ["KafkaSpanExporter", "encode_trace_messages"]
