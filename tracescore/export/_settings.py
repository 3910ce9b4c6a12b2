"""The SDK producer's settings: the Kafka settings every tracescore process reads (`TRACESCORE_KAFKA__*`,
e.g. TRACESCORE_KAFKA__SASL_MECHANISM=SCRAM-SHA-512), security and producer tuning in one model."""

from __future__ import annotations

from tracescore._kafka_config import KafkaSettings

__all__ = ["KafkaProducerSettings"]

# The name the SDK has always documented; one class, so the SDK and the services cannot drift apart.
KafkaProducerSettings = KafkaSettings
