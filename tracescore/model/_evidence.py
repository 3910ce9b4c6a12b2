"""The documents of one conversation turn, as `tracescore consume` hands them to `tracescore conversations`
(the `tracescore.conversations.evidence` topic): evaluation records carry no documents, and a follow-up's
claim may rest on what an earlier turn retrieved. One JSON object per interaction with a conversation id,
written whether or not the interaction was scored (sampled out, judge error), cut to a size that fits."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from tracescore.model._record import SchemaVersion, none_unwritten, read_versioned

__all__ = ["EVIDENCE_TOPIC", "EvidenceDocument", "TurnEvidence", "read_turn_evidence"]

# Where `tracescore consume` writes a turn's documents and `tracescore conversations` reads them, unless told.
EVIDENCE_TOPIC = "tracescore.conversations.evidence"


def _empty_unwritten(value: list[str]) -> bool:
    return not value  # written only where it says something: other turns' documents stay as they were


class EvidenceDocument(BaseModel):
    text: str = Field(description="The document as it was judged (cut when the turn's documents were cut).")
    kind: str = Field(
        description="How it was read in its trace: retriever, reranker, tool, tool_message, span, input, "
        "instructions (under a label in the model's instructions), earlier_turn (an earlier turn's result "
        "the app resent in this turn's prompt)."
    )
    span_id: str = Field(description="The span that held it, in the turn's trace.")
    turns_back: int = Field(default=0, ge=0, description="For kind earlier_turn: how many turns back, there.")


class TurnEvidence(BaseModel):
    """Versioned wire format. Add fields freely; renaming or removing one bumps `schema_version`."""

    schema_version: SchemaVersion = 1
    trace_id: str = Field(description="The turn's trace id.")
    span_id: str = Field(description="The interaction's span id (the scored span of its records).")
    service_name: str
    route: str
    session_id: str = Field(description="The conversation id, as on the turn's records.")
    user_id: str | None = Field(default=None, description="The end user who asked, as on the records.")
    question: str | None = Field(default=None, description="The turn's question, cut to 2,000 characters.")
    turn_digest: str | None = Field(
        default=None,
        description="With an inferred conversation: the digest of the turn's (question, answer) pair, "
        "which a follow-up's history names to use these documents.",
    )
    history_turns: list[str] = Field(
        default_factory=list,
        exclude_if=_empty_unwritten,
        description="With a conversation inferred from the resent history: the digests of the (question, "
        "answer) pairs the turn's prompt resent, oldest first, as on the records (a turn that continues a "
        "conversation is known by them where its resent history no longer holds the first turn).",
    )
    response_id: str | None = Field(
        default=None,
        exclude_if=none_unwritten,
        description="With an inferred conversation: the id of the response that answered (a follow-up names "
        "it, previous_response_id), as on the records.",
    )
    previous_response_id: str | None = Field(
        default=None,
        exclude_if=none_unwritten,
        description="With an inferred conversation: the response the turn followed, as on the records.",
    )
    span_started_at: datetime | None = Field(description="When the turn started: what orders the turns.")
    revision: int = Field(default=0, ge=0, description="As the records': late spans changed the turn.")
    documents: list[EvidenceDocument] = Field(default_factory=list)
    documents_total: int = Field(ge=0, description="Documents the turn was judged against.")
    documents_dropped: int = Field(default=0, ge=0, description="Left out to fit (the last ones).")
    chars_dropped: int = Field(default=0, ge=0, description="Characters cut or left out to fit.")
    timestamp: datetime = Field(description="When it was written (UTC).")


def read_turn_evidence(value: bytes | None) -> TurnEvidence:
    """The evidence in a Kafka message's value, or UnreadableRecord: of a version this one does not read, it
    says so (a newer tracescore wrote it: upgrade), as the records do."""
    return read_versioned(TurnEvidence, "a turn's documents (evidence)", value)
