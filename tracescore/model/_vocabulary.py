"""The shared words: values several stages write or compare, as enums whose members are the strings records
and spans carry (a StrEnum member equals its string, so the wire format is the same text).

`Verdict` (a claim's verdict) lives with the results it belongs to (`tracescore.model._results`).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ContextSourceKind",
    "ConversationLabel",
    "GroundingStatus",
    "NotRejudgedReason",
    "OpenInferenceSpanKind",
    "Selection",
]


class Selection(StrEnum):
    """How the LLM judge behind the sampling policy came to score an interaction (an evaluation record's
    `selection`; a conversation record's, for its tier)."""

    CASCADE = "cascade"  # among the most suspicious the budget allows: a biased, targeted sample
    BASELINE = "baseline"  # uniform on the conversation (else trace) id: unbiased, for rolling estimates
    # Uniform on the same id, on the cascade's budget where targeting shows no lift (sample/_lift.py).
    UNIFORM = "uniform"


class ConversationLabel(StrEnum):
    """A conversation record's label: whether any scored turn was flagged."""

    PASSED = "passed"
    FLAGGED = "flagged"


class ContextSourceKind(StrEnum):
    """How one judged document was read (`ContextSource.kind`; `context_sources[].kind` in records)."""

    RETRIEVER = "retriever"  # a retrieval span's documents
    RERANKER = "reranker"  # a reranker's output documents (read instead of the retrieval's)
    TOOL = "tool"  # a tool span's result
    TOOL_MESSAGE = "tool_message"  # a tool result passed to the next LLM call as a message
    SPAN = "span"  # documents recorded on the interaction span itself
    INPUT = "input"  # documents a step was given as its input
    EARLIER_TURN = "earlier_turn"  # an earlier turn's tool result kept in the LLM call's input
    INSTRUCTIONS = "instructions"  # the documents under a label in the model's instructions (system message)
    PROMPT = "prompt"  # the documents under a label in the last user message the model was given


class GroundingStatus(StrEnum):
    """What grounding across turns made of a held turn (`tracescore conversations`; the record's
    `details.earlier_turns.status`)."""

    GROUNDED = "grounded"  # an earlier turn's documents support its unsupported claims: a revision
    UNSUPPORTED = "unsupported"  # judged again, still unsupported
    NOT_REJUDGED = "not_rejudged"  # not judged again (why: the record's note)
    ERROR = "error"  # the judge failed
    SUPERSEDED = "superseded"  # a newer record of the turn replaced the one a revision was written for
    PAIRED = "paired"  # the offline record follows the LLM record's grounding


class NotRejudgedReason(StrEnum):
    """Why a held turn was not judged again (`details.earlier_turns.why`, with `status: not_rejudged`)."""

    NOT_CAPTURED = "not_captured"  # its earlier turns have no documents held (content capture off, cut...)
    NO_JUDGE = "no_judge"  # an LLM judge's record, and the service was not given that judge


class OpenInferenceSpanKind(StrEnum):
    """OpenInference span kinds (`openinference.span.kind`) that tracescore writes or reads (not OTel's
    SpanKind, which says client or server)."""

    CHAIN = "CHAIN"
    AGENT = "AGENT"
    LLM = "LLM"
    TOOL = "TOOL"
    RETRIEVER = "RETRIEVER"
    RERANKER = "RERANKER"
    EMBEDDING = "EMBEDDING"
    EVALUATOR = "EVALUATOR"
