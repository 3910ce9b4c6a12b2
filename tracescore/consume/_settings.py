"""Consumer configuration: typed, validated, read once, with one precedence:
flags (init values) > TRACESCORE_* environment variables > config file (its `[consume]` table) > defaults.

The defaults live here and only here: the CLI generates its options from these fields (help text, env var
name and default shown), so a default is never written twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from tracescore._config import ConfigFileError, FileSettings, read_table
from tracescore._kafka_config import (
    DEFAULT_BOOTSTRAP_SERVERS,
    SPANS_TOPIC,
    KafkaConnection,
    KafkaSecurity,
    KafkaSettings,
    RebalanceProtocol,
    connect_timeout_field,
    max_message_bytes_field,
    max_poll_interval_field,
    rebalance_protocol_field,
    session_timeout_field,
)
from tracescore.consume._assemble import AssemblySettings
from tracescore.consume._learn import INFER_AUTO, InferConversations
from tracescore.emit import DLQ_TOPIC, EVIDENCE_CHARS
from tracescore.model import EVALUATIONS_TOPIC, EVIDENCE_TOPIC

__all__ = ["ConfigFileError", "ConsumerSettings", "KafkaSecurity"]


class ConsumerSettings(FileSettings):
    # Nested settings from the environment: TRACESCORE_ASSEMBLY__GRACE_S=5, TRACESCORE_KAFKA__SASL_USERNAME
    model_config = SettingsConfigDict(env_prefix="TRACESCORE_", env_nested_delimiter="__", extra="forbid")

    bootstrap_servers: str = Field(
        default=DEFAULT_BOOTSTRAP_SERVERS, description="Kafka brokers, host:port[,...]."
    )
    topic: str = Field(default=SPANS_TOPIC, description="Topic of OTLP spans (protobuf or JSON) to score.")
    group_id: str = Field(default="tracescore", description="Kafka consumer group; members share partitions.")
    evaluations_topic: str = Field(
        default=EVALUATIONS_TOPIC,
        description="The topic of the evaluation records: consume writes them there, tail reads them.",
    )
    dlq_topic: str = Field(default=DLQ_TOPIC, description="Where undecodable messages go.")
    evaluation_spans_topic: str | None = Field(
        default=None,
        description="Where evaluation spans go [default: the spans topic, so a Collector forwards them with "
        "the app's spans; the consumer skips its own by a message header, without decoding them].",
    )
    conversation_evidence_topic: str | None = Field(
        default=EVIDENCE_TOPIC,
        description="Where the documents of each interaction with a conversation id go, scored or not, for "
        "tracescore conversations to ground a follow-up's claims in what earlier turns retrieved; empty: "
        "not written (an interaction without a conversation id costs nothing here unless infer_conversations "
        "infers its service's).",
    )
    infer_conversations: InferConversations = Field(
        default=INFER_AUTO,
        description="Where the app names no conversation but resends its question/answer history in the "
        "prompt, infer the conversation from that history: a follow-up's records carry the inferred id "
        "(conversation_source history), and the documents of every interaction that names none are written "
        "to conversation_evidence_topic (a first turn cannot be told from a one-shot until a later turn "
        "resends it), for tracescore conversations to ground follow-ups in them. auto (the default): per "
        "service, from the first follow-up this instance reads that resends a turn it read (a fixed few-shot "
        "prompt never does): until then none inferred and none written, the last minutes' possible first "
        "turns held in memory and written then; a one-shot service pays no write. true "
        "(--infer-conversations): every service from the start; false (--no-infer-conversations): never.",
    )
    conversation_evidence_chars: int = Field(
        default=EVIDENCE_CHARS,
        ge=1_000,
        description="Characters of a turn's documents written there, in the order they were judged; the rest "
        "is cut and counted in the message (documents_dropped, chars_dropped). At most a sixth of "
        "max_message_bytes less 32 KB (lowered to it when not set; below 38 KB nothing is written).",
    )
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        default="earliest", description="Where a new group starts reading."
    )
    poll_timeout_ms: int = Field(default=500, ge=1, description="Longest wait in one poll.")
    max_poll_records: int = Field(default=500, ge=1, description="Records per poll.")
    max_poll_interval_ms: int = max_poll_interval_field(
        "The loop polls while judges run, so a slow judge never risks it."
    )
    session_timeout_ms: int = session_timeout_field()
    rebalance_protocol: RebalanceProtocol = rebalance_protocol_field()
    revoke_timeout_s: float = Field(
        default=10.0,
        ge=0,
        description="On a rebalance, wait up to this long (and at most a third of the session timeout) for "
        "the judge calls already running on the partitions being revoked; what is not finished by then is "
        "scored by the partitions' next owner.",
    )
    max_in_flight: int = Field(
        default=64,
        ge=1,
        description="Interactions being scored at once, across batches; past it partitions are paused.",
    )
    ack_timeout_s: float = Field(default=30.0, gt=0, description="Wait for Kafka's acknowledgements on exit.")
    close_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="On a stop, how long the last commit (with its retries while the group rebalances) and "
        "leaving the group wait for the broker, instead of kafka-python's 30 s per request; with the broker "
        "gone, what is not committed by then is read and scored again on restart (at least once).",
    )
    commit_interval_s: float = Field(default=1.0, ge=0, description="Commit finished offsets this often.")
    status_interval_s: float = Field(
        default=30.0, ge=0, description="Log a status line this often (0: never)."
    )
    drain_timeout_s: float = Field(
        default=60.0,
        ge=0,
        description="On SIGTERM/SIGINT, wait this long for interactions being scored (within "
        "stop_timeout_s).",
    )
    stop_timeout_s: float = Field(
        default=50.0,
        gt=0,
        description="On SIGTERM/SIGINT, the whole stop (the drain, the outputs' acknowledgements, the last "
        "commit, leaving the group) gets this long, counted from the signal: 10 s inside the 60 s grace "
        "period of deploy/k8s/consume.yaml. The drain ends early enough to keep each later step a tenth of "
        "it (at most close_timeout_s); what a step could not do is said in one line and read again on "
        "restart (at least once, nothing lost).",
    )
    connect_timeout_s: float = connect_timeout_field()
    max_message_bytes: int = max_message_bytes_field("Largest output message; bigger records are cut to fit.")
    max_records: int | None = Field(
        default=None,
        ge=1,
        description="Stop reading once this many interactions were handled; every interaction already "
        "read is still scored, so more may be handled (many more behind a slow judge).",
    )
    idle_timeout_s: float | None = Field(
        default=None,
        gt=0,
        description="Stop after this many seconds without a message, counted from the first assignment.",
    )
    gc_gen0_threshold: int = Field(
        default=50_000,
        ge=0,
        description="Python's generation-0 garbage collection threshold while the consumer runs (put back "
        "when it returns; 0: keep Python's 700). Decoding allocates many short-lived objects; collecting "
        "them every 700 costs ~12% of the unsampled path's CPU.",
    )
    assembly: AssemblySettings = Field(default_factory=AssemblySettings)
    # TRACESCORE_KAFKA__*, the model the SDK and `tracescore alert` read too: its security applies to every
    # client here; its producer tuning is the SDK's and is ignored here.
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)

    @field_validator("evaluation_spans_topic", "conversation_evidence_topic", mode="before")
    @classmethod
    def _empty_is_none(cls, name: object) -> object:
        return None if name == "" else name

    @model_validator(mode="after")
    def _evidence_fits(self) -> ConsumerSettings:
        # JSON takes at most 6 bytes a character; the question and the rest of the message fit in 32 KB.
        most = max(0, (self.max_message_bytes - 32 * 1024) // 6)
        if self.conversation_evidence_chars <= most or self.conversation_evidence_topic is None:
            return self
        if "conversation_evidence_chars" in self.model_fields_set:
            raise ValueError(
                f"conversation_evidence_chars ({self.conversation_evidence_chars}) must be at most {most} "
                f"with max_message_bytes {self.max_message_bytes}, so every evidence message fits"
            )
        if most >= 1_000:
            self.conversation_evidence_chars = most  # the default, within a lowered message limit
        else:  # a message limit below 38 KB holds no useful evidence: none is written
            self.conversation_evidence_topic = None
        return self

    @property
    def spans_out_topic(self) -> str:
        return self.evaluation_spans_topic or self.topic

    def connection(self) -> KafkaConnection:
        return KafkaConnection(
            bootstrap_servers=self.bootstrap_servers,
            connect_timeout_s=self.connect_timeout_s,
            security=self.kafka.security(),
            bootstrap_origin=self.origin("bootstrap_servers"),
        )

    def client_config(self) -> dict[str, Any]:
        return self.connection().client_config()

    @classmethod
    def load(cls, flags: Mapping[str, Any], config_file: Path | None = None) -> ConsumerSettings:
        """Settings from explicit flags, the environment and `config_file`, in that order of precedence."""
        return cls.from_sources(flags, read_table(config_file, "consume") if config_file else {}, config_file)
