"""Consume: read OTLP spans from Kafka in a consumer group, assemble whole traces, score them, commit."""

from tracescore.consume._assemble import AssemblySettings, TraceAssembler
from tracescore.consume._consumer import ConsumerStats, EvaluationConsumer, OutputNotAcknowledged
from tracescore.consume._decode import NotOtlp, decode_message
from tracescore.consume._settings import ConsumerSettings

__all__ = [
    "AssemblySettings",
    "ConsumerSettings",
    "ConsumerStats",
    "EvaluationConsumer",
    "NotOtlp",
    "OutputNotAcknowledged",
    "TraceAssembler",
    "decode_message",
]
