"""Consume: read OTLP spans from Kafka in a consumer group, find RAG spans, score them, commit."""

from tracescore.consume._consumer import ConsumerStats, EvaluationConsumer, OutputNotAcknowledged
from tracescore.consume._decode import DecodedSpan, NotOtlp, RagSpan, Skip, classify, decode_message
from tracescore.consume._settings import ConsumerSettings

__all__ = [
    "ConsumerSettings",
    "ConsumerStats",
    "DecodedSpan",
    "EvaluationConsumer",
    "NotOtlp",
    "OutputNotAcknowledged",
    "RagSpan",
    "Skip",
    "classify",
    "decode_message",
]
