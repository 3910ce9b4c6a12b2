"""A conversation turn's documents for `tracescore conversations` (`TurnEvidence`, in `tracescore.model`),
cut to a size that fits Kafka's limits by construction.

Only interactions with a conversation id (or a first turn's inferred one) have any; the rest cost one
attribute test. The documents are kept in the order the turn was judged against them (its own first), whole
while `max_chars` lasts; the one that crosses it is cut, the rest are left out, both counted in the evidence
(`documents_dropped`, `chars_dropped`). A character takes at most 6 bytes in JSON (`\\u00XX`), so
`max_chars` below a sixth of the message limit always fits.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tracescore.emit._records import started_at
from tracescore.model import HISTORY_TURNS_KEPT, EvidenceDocument, Interaction, TurnEvidence

__all__ = ["EVIDENCE_CHARS", "QUESTION_CHARS", "turn_evidence"]

# A turn's documents kept for its conversation: a typical RAG turn (five documents of 1,500 characters) whole,
# a tool's dump of a database cut. 96 KB of JSON at most: far below any message limit.
EVIDENCE_CHARS = 16_000
QUESTION_CHARS = 2_000
_MIN_CUT_CHARS = 200  # a document cut shorter than this says too little to be kept


def turn_evidence(
    interaction: Interaction, max_chars: int, revision: int = 0, now: datetime | None = None
) -> TurnEvidence | None:
    """The evidence of `interaction` (None without a conversation id, named or inferred: a first turn's
    documents go under the conversation it would open), documents within `max_chars`; `revision` as its
    records' (late spans changed the turn)."""
    session_id = interaction.session_id or interaction.opens_conversation
    if session_id is None:
        return None
    span, record, sources = interaction.span, interaction.record, interaction.context_sources
    documents: list[EvidenceDocument] = []
    left, dropped, chars_dropped = max_chars, 0, 0
    for index, text in enumerate(record.contexts):
        if left < min(len(text), _MIN_CUT_CHARS) or not text.strip():
            dropped += 1
            chars_dropped += len(text)
            continue
        kept = text[:left]
        chars_dropped += len(text) - len(kept)
        left -= len(kept)
        source = sources[index] if index < len(sources) else None
        documents.append(
            EvidenceDocument(
                text=kept,
                kind=source.kind if source else "span",
                span_id=source.span_id if source else span.span_id,
                turns_back=source.turns_back if source else 0,
            )
        )
    question = record.query if isinstance(record.query, str) else None
    return TurnEvidence(
        trace_id=span.trace_id,
        span_id=span.span_id,
        service_name=span.service_name,
        route=interaction.route,
        session_id=session_id,
        user_id=interaction.user_id,
        question=None if question is None else question[:QUESTION_CHARS],
        turn_digest=interaction.turn_digest,
        history_turns=list(interaction.history[-HISTORY_TURNS_KEPT:]) if interaction.session_id else [],
        response_id=interaction.response_id,
        previous_response_id=interaction.previous_response_id,
        span_started_at=started_at(interaction),
        revision=revision,
        documents=documents,
        documents_total=len(record.contexts),
        documents_dropped=dropped,
        chars_dropped=chars_dropped,
        timestamp=now or datetime.now(UTC),
    )
