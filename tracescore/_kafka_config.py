"""One Kafka client configuration for every process: the SDK's producer, `tracescore consume` and
`tracescore alert` read the same `TRACESCORE_KAFKA__*` variables into the same model, so one environment
(one ConfigMap, one `.env`) configures them all.

- `KafkaSecurity`: how a client authenticates and encrypts (used by every client of every process).
- `ProducerTuning`: the SDK producer's knobs; accepted by every process, used only by the SDK (the
  services' own producers are tuned for their outputs).
- `KafkaSettings`: both, the model behind `TRACESCORE_KAFKA__*`. Unknown names are refused.
- `KafkaConnection`: what a client needs to reach the cluster (bootstrap servers, connect timeout, security).
- The settings every consumer group member of ours has, each defined here once: `session_timeout_field`,
  `rebalance_protocol_field`, `connect_timeout_field`.
- Kafka's topic naming rule, checked on every topic setting of every process (`TopicSettings`).
- The defaults every process shares, each written here once: the brokers (`DEFAULT_BOOTSTRAP_SERVERS`), the
  spans topic the SDK writes and the services read (`SPANS_TOPIC`), the largest message a service writes
  (`max_message_bytes_field`).

Pydantic only: importing this module imports no Kafka client, so the SDK's light install stays light.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "DEFAULT_BOOTSTRAP_SERVERS",
    "PRODUCER_ONLY",
    "SPANS_TOPIC",
    "TOPIC_NAME_RULE",
    "KafkaConnection",
    "KafkaSecurity",
    "KafkaSettings",
    "ProducerTuning",
    "RebalanceProtocol",
    "SaslMechanism",
    "SecurityProtocol",
    "SettingOrigin",
    "TopicSettings",
    "connect_timeout_field",
    "is_topic_name",
    "kafka_settings_from_env",
    "max_message_bytes_field",
    "rebalance_protocol_field",
    "session_timeout_field",
]

# Where every command looks for Kafka when neither a flag, the environment nor a config file says.
DEFAULT_BOOTSTRAP_SERVERS = "127.0.0.1:9092"
# The OTLP spans topic: what the SDK's exporter writes, `tracescore consume` scores and `tracescore
# conversations` writes its evaluation spans back to (the Collector's Kafka exporter uses the same name).
SPANS_TOPIC = "otlp_spans"

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaSecurity(BaseModel):
    """Security of every Kafka client: TRACESCORE_KAFKA__SECURITY_PROTOCOL, __SASL_MECHANISM, ..."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    security_protocol: SecurityProtocol = Field(
        default="PLAINTEXT", description="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."
    )
    # No default mechanism: a SASL client that guessed one would fail at the broker with a vaguer error.
    sasl_mechanism: SaslMechanism | None = Field(
        default=None, description="PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (needed with SASL_*)."
    )
    sasl_username: str | None = Field(default=None, description="SASL user.")
    # Never logged: SecretStr prints as '**********'.
    sasl_password: SecretStr | None = Field(
        default=None, description="SASL password (prefer the environment variable to the flag)."
    )
    ssl_cafile: Path | None = Field(default=None, description="CA bundle (PEM) to verify the brokers.")
    ssl_certfile: Path | None = Field(default=None, description="Client certificate (PEM), for mTLS.")
    ssl_keyfile: Path | None = Field(default=None, description="Client key (PEM), for mTLS.")
    ssl_password: SecretStr | None = Field(default=None, description="Password of the client key.")
    ssl_check_hostname: bool = Field(default=True, description="Check the broker's certificate hostname.")

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
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

    def secrets(self) -> list[str]:
        """The secret values, for redaction in client logs."""
        return [s.get_secret_value() for s in (self.sasl_password, self.ssl_password) if s is not None]

    def client_config(self) -> dict[str, Any]:
        """kafka-python keyword arguments, shared by KafkaConsumer, KafkaProducer and KafkaAdminClient
        (secrets revealed only here)."""
        config: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl_mechanism is not None:
            config["sasl_mechanism"] = self.sasl_mechanism
            config["sasl_plain_username"] = self.sasl_username
            config["sasl_plain_password"] = (
                self.sasl_password.get_secret_value() if self.sasl_password else None
            )
        if self.security_protocol.endswith("SSL"):
            config["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                if (path := getattr(self, name)) is not None:
                    config[name] = str(path)
            if self.ssl_password is not None:
                config["ssl_password"] = self.ssl_password.get_secret_value()
        return config


class ProducerTuning(BaseModel):
    """The SDK producer's delivery settings. Defaults favour the application: records are retried for two
    minutes (a broker restart loses nothing), but nothing the app calls ever waits on the broker."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    acks: Literal["all"] = Field(
        default="all", description="The idempotent producer (no duplicates on retry) needs acks=all."
    )
    enable_idempotence: bool = Field(default=True, description="No duplicate spans when a send is retried.")
    compression_type: Literal["gzip", "snappy", "lz4", "zstd"] | None = Field(
        default="gzip", description="Compression of the producer's batches."
    )
    linger_ms: int = Field(default=50, ge=0, description="Wait this long to fill a batch.")
    batch_size: int = Field(
        default=256 * 1024, ge=1024, description="Bytes per producer batch; also the largest span message."
    )
    max_request_size: int = Field(default=4 * 1024 * 1024, ge=1024, description="Largest request to Kafka.")
    delivery_timeout_ms: int = Field(
        default=120_000,
        ge=1_000,
        description="How long an accepted span may take to reach the broker, retries included, before it "
        "counts as dropped.",
    )
    request_timeout_ms: int = Field(default=30_000, ge=1_000, description="Wait for one broker answer.")
    # shutdown() is bounded on its own, so a long wait here costs the application nothing.
    max_block_ms: int = Field(
        default=60_000,
        ge=0,
        description="Longest the export thread (never the app) waits for a broker or a new topic's metadata.",
    )
    client_id: str = Field(default="tracescore-sdk", description="Kafka client id, in the broker's logs.")
    # The exporter's choice, not a kafka-python argument. Either way a trace's spans share a partition.
    trace_messages: Literal["per_partition", "per_trace"] = Field(
        default="per_partition",
        description="per_partition: per export, one message per partition holding the traces whose trace-id "
        "key maps there; per_trace: one message per trace keyed by its trace id (the Collector's layout).",
    )

    def span_message_max_bytes(self) -> int:
        """Largest value the exporter packs into one per-partition message: one producer batch (so a
        compressed batch stays far below the broker's default 1 MB `message.max.bytes`), and always inside
        `max_request_size` with room for the record's own framing (batch header, key, varints)."""
        return min(self.batch_size, self.max_request_size - _RECORD_FRAMING)


# Bytes of a one-record batch besides its value, rounded up (61-byte batch header, 32-byte key, varints).
_RECORD_FRAMING = 512
# Fields of ProducerTuning the exporter reads itself: never passed to KafkaProducer.
_EXPORTER_ONLY = frozenset({"trace_messages"})


# Fields of KafkaSettings that only the SDK's producer reads (the services offer no flag for them).
PRODUCER_ONLY = frozenset(ProducerTuning.model_fields)


class KafkaSettings(KafkaSecurity, ProducerTuning):
    """Everything `TRACESCORE_KAFKA__*` may set, for every process: security (all clients) and the SDK
    producer's tuning (ignored by the services, never an error there)."""

    def producer_config(self) -> dict[str, Any]:
        """kafka-python `KafkaProducer` keyword arguments of the SDK's producer."""
        tuning = {
            name: getattr(self, name) for name in ProducerTuning.model_fields if name not in _EXPORTER_ONLY
        }
        return {
            **tuning,
            "bootstrap_timeout_ms": max(self.max_block_ms, 1),
            **self.client_config(),
        }

    def security(self) -> KafkaSecurity:
        return KafkaSecurity(**{name: getattr(self, name) for name in KafkaSecurity.model_fields})


# cooperative: a rebalance moves only the partitions that change owner (KIP-429, kafka-python's
# cooperative-sticky assignor); eager: every member gives up every partition at each rebalance.
RebalanceProtocol = Literal["cooperative", "eager"]


def connect_timeout_field() -> Any:
    return Field(
        default=30.0, gt=0, description="Give up with an error if no broker answers within this many seconds."
    )


def session_timeout_field(groups: str = "its consumer group") -> Any:
    return Field(
        default=45_000,
        ge=1_000,
        description=f"Kafka's session.timeout.ms of {groups}: how long a crashed member holds its partitions "
        "before the group gives them to the others (the broker bounds it, 6 s to 30 min by default).",
    )


def max_poll_interval_field(description: str) -> Any:
    return Field(
        default=300_000,  # kafka-python's (and Kafka's) own
        ge=1_000,
        description="Kafka's max.poll.interval.ms: how long a member may go without polling before it "
        "leaves its group, and how long a rebalance waits for the members to rejoin. " + description,
    )


def rebalance_protocol_field(groups: str = "its consumer group") -> Any:
    return Field(
        default="cooperative",
        description=f"The rebalance protocol of {groups}. cooperative: only the partitions that change owner "
        "move, the others keep being read (KIP-429, kafka-python's cooperative-sticky assignor). eager: "
        "every member gives up every partition at each rebalance; every member of a group must use the same "
        "one.",
    )


def max_message_bytes_field(description: str) -> Any:
    # Below Kafka's default 1 MB message.max.bytes (and the producer's max.request.size) with room for the
    # record batch's own overhead.
    return Field(default=900_000, ge=1024, description=description)


class SettingOrigin(BaseModel):
    """Which source gave a setting its value (flags > variables > a config file > the default), said in a
    message that asks the user to change it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["flag", "variable", "file", "default"]
    name: str | None = Field(default=None, description="The variable's name, or the config file's path.")


class KafkaConnection(BaseModel):
    """How a service's clients reach the cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str
    connect_timeout_s: float = connect_timeout_field()
    security: KafkaSecurity = Field(default_factory=KafkaSecurity)
    bootstrap_origin: SettingOrigin | None = Field(
        default=None, description="Where bootstrap_servers came from, if known: said when no broker answers."
    )

    def client_config(self) -> dict[str, Any]:
        return {"bootstrap_servers": self.bootstrap_servers, **self.security.client_config()}


# What Kafka accepts as a topic name (kafka.common.internals.Topic.validate): these characters, 1 to 249 of
# them, and neither "." nor "..". The broker refuses any other (InvalidTopicException): said at start.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
TOPIC_NAME_RULE = "a Kafka topic name is 1 to 249 letters, digits, '.', '_' and '-', and not '.' or '..'"


def is_topic_name(name: str) -> bool:
    """Whether Kafka accepts `name` as a topic name (`TOPIC_NAME_RULE`)."""
    return bool(_TOPIC_NAME.fullmatch(name)) and name not in (".", "..")


def _is_topic_setting(field: str) -> bool:
    """Whether the setting `field` names a Kafka topic: `topic` (consume's input) and every `*_topic`."""
    return field == "topic" or field.endswith("_topic")


class TopicSettings(BaseSettings):
    """Settings whose topic settings (`topic`, `*_topic`) are checked against Kafka's naming rule
    (`TOPIC_NAME_RULE`), whichever source gave them: every command's (`FileSettings`) and the SDK's."""

    @field_validator("*")
    @classmethod
    def _kafka_accepts_the_topic(cls, value: Any, info: ValidationInfo) -> Any:
        """Every topic setting of every command (`topic`, `*_topic`), derived or given: a name the broker
        would refuse is a config error naming the setting, at start, not an InvalidTopicException once
        running. Empty: no topic, where allowed."""
        name = info.field_name or ""
        optional = type(None) in get_args(cls.model_fields[name].annotation)
        checked = _is_topic_setting(name) and isinstance(value, str) and (value or not optional)
        if checked and not is_topic_name(value):
            raise ValueError(f"{value!r} is not a topic Kafka accepts: {TOPIC_NAME_RULE}")
        return value


class _KafkaEnvironment(BaseSettings):
    # Only the `kafka` table of TRACESCORE_*: the other variables belong to other settings.
    model_config = SettingsConfigDict(env_prefix="TRACESCORE_", env_nested_delimiter="__", extra="ignore")

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)


def kafka_settings_from_env(**overrides: Any) -> KafkaSettings:
    """`TRACESCORE_KAFKA__*` with `overrides` (flags) on top; raises pydantic's ValidationError."""
    given = {name: value for name, value in overrides.items() if value is not None}
    return _KafkaEnvironment(kafka=given).kafka  # type: ignore[arg-type]
