"""Conversation records in the alert windows: each conversation one unit of the rolling estimate.

The estimate is the answers' (alert/_estimate.py), with a conversation where an answer was: the offline
judge's conversation record is the value every conversation has; the LLM judge's baseline record of a
conversation drawn whole (the sampling policy draws conversations uniformly, by their id) is its uniform
sample, paired with the offline value, all with the same weight (every conversation had the same chance).
Records of the cascade's targeted picks are left out of the estimate (counted as `excluded`), as are
baseline records missing turns (the budget stopped one: the conversation was not judged whole).
"""

from __future__ import annotations

from tracescore.alert._estimate import Observation, Signal
from tracescore.alert._notification import AlertKey
from tracescore.model import ConversationLabel, ConversationRecord, EvaluationRecord, Selection

__all__ = ["conversation_key", "conversation_observation", "record_key"]

_PARTIAL = "baseline_partial"  # not the uniform draw of a whole conversation: excluded


def conversation_key(record: ConversationRecord) -> AlertKey:
    return AlertKey(record.service_name, record.route, record.metric, "conversation")


def record_key(record: EvaluationRecord | ConversationRecord) -> AlertKey:
    """The alert a record feeds: its route and metric, for answers or for conversations."""
    if isinstance(record, ConversationRecord):
        return conversation_key(record)
    return AlertKey(record.service_name, record.route, record.metric)


def conversation_observation(record: ConversationRecord, signal: Signal) -> Observation | None:
    """The record as a unit of a window estimating `signal`; None when no turn was scored (judge health, as
    a failed evaluation). An LLM baseline record of part of the conversation stays in the window under a
    selection of its own, so the estimate leaves it out and counts it (`excluded`)."""
    if record.score is None:
        return None
    value = (
        record.score if signal == "conversation_score" else float(record.label == ConversationLabel.PASSED)
    )
    partial = record.selection == Selection.BASELINE and not record.complete
    return Observation(
        key=(record.conversation_id, record.started_at.isoformat()),
        at=record.timestamp,
        value=value,
        revision=record.revision,
        by_llm=record.annotator_kind == "LLM",
        selection=_PARTIAL if partial else record.selection,
    )
