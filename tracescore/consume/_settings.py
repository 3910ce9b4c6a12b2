"""Consumer configuration: a typed value object; every field falls back to a TRACESCORE_* env variable."""

from __future__ import annotations

import re

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracescore.consume._assemble import AssemblySettings

__all__ = ["ConsumerSettings"]

_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class ConsumerSettings(BaseSettings):
    # Nested settings from the environment: TRACESCORE_ASSEMBLY__GRACE_S=5
    model_config = SettingsConfigDict(env_prefix="TRACESCORE_", env_nested_delimiter="__")

    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "otlp_spans"
    group_id: str = "tracescore"
    evaluations_topic: str = "tracescore.evaluations"
    dlq_topic: str = "tracescore.dlq"
    # Evaluation spans join the scored trace; by default they go where the app's spans go, so a Collector
    # reading that topic forwards them to the same backend. The consumer recognises and skips its own.
    evaluation_spans_topic: str | None = None
    auto_offset_reset: str = "earliest"
    poll_timeout_ms: int = Field(default=500, ge=1)
    # A batch must be scored within max_poll_interval_ms or the group moves its partitions elsewhere: with
    # a slow LLM judge, poll fewer records.
    max_poll_records: int = Field(default=200, ge=1)
    max_poll_interval_ms: int = Field(default=300_000, ge=1_000)
    ack_timeout_s: float = Field(default=30.0, gt=0)
    max_records: int | None = Field(default=None, ge=1)
    idle_timeout_s: float | None = Field(default=None, gt=0)
    # How long spans wait for the rest of their trace, and how much may wait at once.
    assembly: AssemblySettings = Field(default_factory=AssemblySettings)

    @field_validator("topic", "evaluations_topic", "dlq_topic", "evaluation_spans_topic")
    @classmethod
    def _legal_topic(cls, name: str | None) -> str | None:
        # Kafka's own rule; checked here so a typo fails at startup, not at the first produced record.
        if (name is not None and not _TOPIC.fullmatch(name)) or name in (".", ".."):
            raise ValueError(f"{name!r} is not a legal Kafka topic name (1-249 of [a-zA-Z0-9._-])")
        return name

    @property
    def spans_out_topic(self) -> str:
        return self.evaluation_spans_topic or self.topic
