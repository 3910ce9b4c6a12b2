"""The `tracescore conversations` configuration: validated once, with the precedence every command has:
flags > environment variables (TRACESCORE_CONVERSATIONS_...) > the file's `conversations` table > the defaults
written here (and only here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from tracescore._config import ConfigFileError, ServiceSettings, group_topic_field, load_service_settings
from tracescore._kafka_config import SPANS_TOPIC, max_message_bytes_field
from tracescore.model import CONVERSATIONS_TOPIC, EVALUATIONS_TOPIC, EVIDENCE_TOPIC

__all__ = ["ConversationsConfig", "ConversationsConfigError", "load_conversations_config"]


class ConversationsConfigError(ConfigFileError):
    """The configuration is impossible; the message names every problem, one per clause."""


class ConversationsConfig(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="TRACESCORE_CONVERSATIONS_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    evaluations_topic: str = Field(
        default=EVALUATIONS_TOPIC, description="The evaluation records whose turns are gathered."
    )
    conversations_topic: str = Field(
        default=CONVERSATIONS_TOPIC,
        description="Where conversation records go (their own topic: readers of evaluation records never see "
        "them).",
    )
    group_id: str = Field(
        default="tracescore-conversations",
        description="Consumer group of the conversations instances; its internal topics (turns_topic, "
        "state_topic) are its own.",
    )
    turns_topic: str = group_topic_field(
        "tracescore.conversations.turns",
        "{group_id}.turns",
        "The records again, keyed by (service, conversation id), so each instance owns whole conversations "
        "however many instances run.",
    )
    turns_partitions: int = Field(
        default=6,
        ge=1,
        description="Partitions of the turns topic when the service creates it: at most this many instances "
        "share the conversations. A turns topic already there keeps its own count, which the service runs "
        "on, saying so at start when it differs. To change it, give turns_topic and state_topic new names "
        "(the conversations held start anew); partitions added to the turns topic in place (kafka-topics "
        "--alter) stop the service, running or starting.",
    )
    state_topic: str = group_topic_field(
        "tracescore.conversations.changelog",
        "{group_id}.turns.changelog",
        "Compacted, partitioned like the turns topic (a conversation's state on its turns' partition "
        "number): each remembered conversation as of its last record, so a restart or rebalance reads back "
        "only its partitions' conversations and re-reads only the turns since.",
    )
    legacy_state_topic: str | None = group_topic_field(
        "tracescore.conversations.state",
        None,
        "The single-partition state topic of versions before the partitioned one: read once, when a "
        "partition of state_topic is first used, to carry its conversations over; unset: none.",
    )
    spans_topic: str | None = Field(
        default=SPANS_TOPIC,
        description="Where a conversation's evaluation span goes (a child of its last turn's span, linked "
        "to every turn), for a Collector to forward; unset: none.",
    )
    quiet_seconds: float = Field(
        default=900.0,
        gt=0,
        description="A conversation's record is written once no turn arrived for this long.",
    )
    forget_seconds: float = Field(
        default=86_400.0,
        gt=0,
        description="A conversation is remembered this long after its last turn: a turn within it revises "
        "the record, a later one starts a new conversation of the same id.",
    )
    max_turns: int = Field(
        default=200,
        ge=1,
        description="Turns kept per conversation; records of further turns (a session id shared by "
        "unrelated users) are ignored and counted in the record (records_past_cap).",
    )
    max_conversations: int = Field(
        default=50_000,
        ge=1,
        description="Conversations held per instance; past it the least recently active is written early "
        "and forgotten (counted: evicted). As many links of response chains are held (a history the model's "
        "service keeps), and as many of sliding windows (a history the app resends only its last turns of), "
        "the least recently changed dropped past it (counted: chain_links_evicted, window_links_evicted).",
    )
    confidence: float = Field(
        default=0.95, gt=0.5, lt=1, description="Two-sided confidence of a record's interval."
    )
    tick_seconds: float = Field(
        default=1.0, gt=0, description="How often quiet conversations are looked for."
    )
    max_message_bytes: int = max_message_bytes_field(
        "Largest state message; a bigger one drops its turns' reasons (a held turn, its documents)."
    )
    evidence_topic: str | None = Field(
        default=EVIDENCE_TOPIC,
        description="The documents of every conversation turn, scored or not (tracescore consume's "
        "conversation_evidence_topic): a turn's claim its own documents do not support is judged again "
        "against what earlier turns of its conversation (same user) retrieved, and its record revised when "
        "they support it. Empty: no grounding across turns.",
    )
    evidence_chars: int = Field(
        default=32_000,
        ge=1_000,
        le=100_000,
        description="Characters of documents held per conversation (the most recent turns' first: the oldest "
        "turns' documents are dropped past it, counted), which is also the most a claim is judged against "
        "again (about 8,000 tokens for an LLM judge).",
    )
    max_evidence_chars: int = Field(
        default=100_000_000,
        ge=100_000,
        description="Characters of documents and claims held per instance across conversations (the process "
        "holds about 3 bytes each, see the docs); past it the least recently active conversation's "
        "turns are dropped (counted: evidence_evicted).",
    )
    phoenix_endpoint: str | None = Field(
        default=None,
        description="Also post each record to this Arize Phoenix as a session annotation (API key from "
        "TRACESCORE_PHOENIX_API_KEY or PHOENIX_API_KEY).",
    )

    @field_validator("evidence_topic", mode="before")
    @classmethod
    def _empty_is_none(cls, name: object) -> object:
        return None if name == "" else name

    @model_validator(mode="after")
    def _possible(self) -> ConversationsConfig:
        if self.forget_seconds < self.quiet_seconds:
            raise ValueError(
                f"forget_seconds ({self.forget_seconds:g}) is below quiet_seconds ({self.quiet_seconds:g}): "
                "conversations would be forgotten before their record is written"
            )
        return self


def load_conversations_config(path: str | Path | None = None, **flags: Any) -> ConversationsConfig:
    """The configuration from flags (None means not given), the environment, `path` and the defaults."""
    return load_service_settings(ConversationsConfig, "conversations", ConversationsConfigError, path, flags)
