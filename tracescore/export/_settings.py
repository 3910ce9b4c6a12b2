"""Typed settings of the Kafka producer the SDK exports through, SASL/SSL included.

Part of `InstrumentSettings`: env `TRACESCORE_KAFKA__*`, e.g. TRACESCORE_KAFKA__SASL_MECHANISM=SCRAM-SHA-512.
Defaults favour the application: records are retried for two minutes (a broker restart loses nothing), but
nothing the app calls ever waits on the broker.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

__all__ = ["KafkaProducerSettings"]


class KafkaProducerSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    # Delivery: the idempotent producer (no duplicates on retry) needs acks=all.
    acks: Literal["all"] = "all"
    enable_idempotence: bool = True
    compression_type: Literal["gzip", "snappy", "lz4", "zstd"] | None = "gzip"
    linger_ms: int = Field(default=50, ge=0)
    batch_size: int = Field(default=256 * 1024, ge=1024)
    max_request_size: int = Field(default=4 * 1024 * 1024, ge=1024)
    # How long an accepted record may take to reach the broker, retries included, before it counts as dropped.
    delivery_timeout_ms: int = Field(default=120_000, ge=1_000)
    request_timeout_ms: int = Field(default=30_000, ge=1_000)
    # Longest the export thread (never the app) waits for a broker or a new topic's metadata; shutdown() is
    # bounded on its own, so a long wait here costs the application nothing.
    max_block_ms: int = Field(default=60_000, ge=0)
    client_id: str = "tracescore-sdk"

    # Security: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL with PLAIN or SCRAM.
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: SecretStr | None = None
    ssl_check_hostname: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> KafkaProducerSettings:
        uses_sasl = self.security_protocol.startswith("SASL_")
        if uses_sasl and (
            self.sasl_mechanism is None or not self.sasl_username or self.sasl_password is None
        ):
            raise ValueError(
                f"security_protocol {self.security_protocol} needs sasl_mechanism, sasl_username and "
                "sasl_password (TRACESCORE_KAFKA__SASL_MECHANISM, __SASL_USERNAME, __SASL_PASSWORD)"
            )
        if self.sasl_mechanism is not None and not uses_sasl:
            raise ValueError(
                f"sasl_mechanism {self.sasl_mechanism} needs security_protocol SASL_PLAINTEXT or SASL_SSL"
            )
        return self

    def producer_config(self) -> dict[str, Any]:
        """kafka-python `KafkaProducer` keyword arguments (secrets revealed only here)."""
        config: dict[str, Any] = {
            "acks": self.acks,
            "enable_idempotence": self.enable_idempotence,
            "compression_type": self.compression_type,
            "linger_ms": self.linger_ms,
            "batch_size": self.batch_size,
            "max_request_size": self.max_request_size,
            "delivery_timeout_ms": self.delivery_timeout_ms,
            "request_timeout_ms": self.request_timeout_ms,
            "max_block_ms": self.max_block_ms,
            "bootstrap_timeout_ms": max(self.max_block_ms, 1),
            "client_id": self.client_id,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism is not None:
            config["sasl_mechanism"] = self.sasl_mechanism
            config["sasl_plain_username"] = self.sasl_username
            config["sasl_plain_password"] = (
                self.sasl_password.get_secret_value() if self.sasl_password else None
            )
        if self.security_protocol in ("SSL", "SASL_SSL"):
            config["ssl_check_hostname"] = self.ssl_check_hostname
            for key in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                if getattr(self, key) is not None:
                    config[key] = getattr(self, key)
            if self.ssl_password is not None:
                config["ssl_password"] = self.ssl_password.get_secret_value()
        return config
