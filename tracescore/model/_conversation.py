"""The conversation record: one JSON object per (conversation, metric, judge tier) on the
`tracescore.conversations` topic, written by `tracescore conversations` when a conversation goes quiet and
read by `tracescore alert` (conversation rules) and anyone downstream."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from tracescore.model._record import SCHEMA_VERSION, AnnotatorKind, SchemaVersion, read_versioned
from tracescore.model._results import MetricStatus
from tracescore.model._vocabulary import ConversationLabel

__all__ = [
    "CONVERSATIONS_TOPIC",
    "CONVERSATION_KEY",
    "ConversationRecord",
    "WorstTurn",
    "read_conversation_record",
]

# Where `tracescore conversations` writes the records and `tracescore alert` reads them, unless told.
CONVERSATIONS_TOPIC = "tracescore.conversations"


class WorstTurn(BaseModel):
    """The conversation's worst turn of this tier: a flagged one before any that passes, then the lowest
    score (the first in turn order of equals)."""

    trace_id: str = Field(description="The turn's trace id.")
    span_id: str = Field(description="The turn's scored span id.")
    score: float = Field(description="Its score, 0..1.")
    label: str | None = Field(description="Its label, e.g. hallucinated.")
    reason: str | None = Field(default=None, description="The judge's explanation, cut to 300 characters.")


class ConversationRecord(BaseModel):
    """Versioned wire format. Add fields freely; renaming or removing one bumps `schema_version`.

    A reader keeps, per (service_name, conversation_id, started_at, metric, judge, selection), the record of
    the highest `revision`: a turn that arrives after the conversation's record was written revises it."""

    schema_version: SchemaVersion = Field(
        default=SCHEMA_VERSION, description="Version of this format; readers skip versions they do not know."
    )
    conversation_id: str = Field(
        description="The turns' session.id / gen_ai.conversation.id (the producer's thread or session id), "
        "or, where none was named (tracescore consume's infer_conversations), the id inferred from the "
        "history their prompts resent (`history:` and 24 hex digits; the turns' records say "
        "conversation_source history) or joined from the chain of response ids a model service that keeps "
        "the history names (`responses:` and 24 hex digits; conversation_source response_chain)."
    )
    service_name: str = Field(description="service.name of the turns: a conversation is (service, id).")
    route: str = Field(description="The route of the conversation's first turn.")
    started_at: datetime = Field(
        description="When the conversation's first turn reached tracescore conversations (UTC); with the id, "
        "what tells two conversations of one id apart (a turn after `forget_seconds` of silence starts a "
        "new one)."
    )
    metric: str = Field(description="The metric of the turns' records: faithfulness, ...")
    judge: str = Field(description='The judge of the turns\' records: "offline" or "openai:<model>".')
    annotator_kind: AnnotatorKind = Field(description="CODE (offline judge) or LLM (a model).")
    selection: str | None = Field(
        description="Which of the LLM judge's records: baseline (the conversation was drawn uniformly, by "
        "its id), cascade (suspicious turns only: a targeted sample), or None (a judge that scores every "
        "turn). Tiers are never mixed in one record."
    )
    revision: int = Field(default=0, ge=0, description="0 for the first record; n+1 when it replaces n.")
    supersedes: int | None = Field(
        default=None, description="The revision this record replaces (None for revision 0)."
    )
    turns: int = Field(
        description="Turns of the conversation with a record of this metric from any judge (each turn once, "
        "its latest revision), at most `max_turns`."
    )
    turns_judged: int = Field(description="Turns this judge tier wrote a record for (any status).")
    turns_scored: int = Field(description="Of those, turns with a score (status ok).")
    turns_passed: int = Field(
        description="Scored turns the metric's label rule passes (for faithfulness: faithful turns)."
    )
    turns_flagged: int = Field(
        description="Scored turns the label rule flags (for faithfulness: unfaithful turns)."
    )
    complete: bool = Field(
        description="Every turn of the conversation has a record of this tier: for the LLM baseline, the "
        "conversation was judged whole."
    )
    score: float | None = Field(
        description="The share of scored turns the label rule passes (turns_passed / turns_scored); null "
        "when no turn was scored."
    )
    share_lower: float | None = Field(description="Lower bound of that share (Wilson score interval).")
    share_upper: float | None = Field(description="Upper bound of that share (Wilson score interval).")
    confidence: float = Field(description="Two-sided confidence of the interval.")
    label: ConversationLabel | None = Field(
        description="flagged when any scored turn is flagged, passed when none is; null when none scored."
    )
    status: MetricStatus = Field(
        description="ok (a turn was scored), not_applicable (no turn had anything to check) or error (no "
        "turn scored, a judge failed on some): a conversation record without a score says why."
    )
    reason: str = Field(description="One line: how many turns passed, and the worst one.")
    worst_turn: WorstTurn | None = Field(
        description="The worst scored turn (flagged first, then the lowest score); null when none was scored."
    )
    trace_ids: list[str] = Field(
        description="The judged turns' trace ids, in turn order (when each turn's scored span started)."
    )
    span_ids: list[str] = Field(description="The judged turns' scored span ids, aligned with trace_ids.")
    first_turn_at: datetime = Field(
        description="When the first judged turn's span started (its record's timestamp for records without "
        "span_started_at)."
    )
    last_turn_at: datetime = Field(description="When the last judged turn's span started (likewise).")
    records_past_cap: int = Field(
        default=0,
        description="Records of turns beyond `max_turns`, ignored (a session id shared by unrelated "
        "users): records, not turns, since a turn ignored is not remembered.",
    )
    timestamp: datetime = Field(description="When the record was written (UTC).")

    def to_kafka(self) -> tuple[bytes, bytes]:
        """(key, value): keyed by conversation id, so a conversation's revisions stay in order."""
        return self.conversation_id.encode(), self.model_dump_json().encode()


# What tells a conversation record from an evaluation record in a message (a topic may hold both): the field
# only a conversation record has. Named here, by the model, so a reader never spells it (tests/model check it
# stays a field of ConversationRecord and of no EvaluationRecord).
CONVERSATION_KEY = "conversation_id"


def read_conversation_record(value: bytes | None) -> ConversationRecord:
    """The record in a Kafka message's value, or UnreadableRecord (`invalid_record`,
    `unknown_schema_version`)."""
    return read_versioned(ConversationRecord, "a conversation record", value)
