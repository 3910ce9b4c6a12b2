"""The evaluation record: one JSON object per (scored interaction, metric) on the `tracescore.evaluations`
topic, written by emit and read by alert, the status line and anyone downstream."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from tracescore.model._results import MetricStatus, Usage

__all__ = ["SCHEMA_VERSION", "AnnotatorKind", "EvaluationRecord", "annotator_kind"]

SCHEMA_VERSION = 1

AnnotatorKind = Literal["LLM", "CODE"]


def annotator_kind(judge_name: str) -> AnnotatorKind:
    """CODE for the deterministic offline judge ("offline"); every other judge ("openai:<model>", a custom
    judge wrapping a model) answers through an LLM."""
    return "CODE" if judge_name.split(":", 1)[0].strip().lower() == "offline" else "LLM"


class EvaluationRecord(BaseModel):
    """Versioned wire format. Add fields freely; renaming or removing one bumps `schema_version`."""

    schema_version: Literal[1] = SCHEMA_VERSION
    trace_id: str = Field(description="Scored span's trace id, 32 lowercase hex chars (as in OTLP JSON).")
    span_id: str = Field(description="Scored span's id, 16 lowercase hex chars.")
    evaluation_span_id: str | None = None
    service_name: str
    route: str
    metric: str
    score: float | None
    label: str | None
    status: MetricStatus
    reason: str | None = None
    judge: str
    # Derived from `judge` when absent (records written before this field existed read the same way).
    annotator_kind: AnnotatorKind = Field(default="LLM", description="CODE (offline judge) or LLM (a model).")
    selection: str | None = Field(
        default=None,
        description="Why an LLM judge behind the sampling policy scored it: cascade (suspicious offline), "
        "baseline (uniform, unbiased: use these for rolling estimates) or uniform (uniform too, drawn with "
        "the cascade's budget where targeting showed no lift); None otherwise.",
    )
    inclusion_probability: float | None = None
    targeted_share: float | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the split in force for the route and answer "
        "shape when it was decided, the share of the cascade's budget that targeted suspicious answers (the "
        "rest drew uniformly); None from consumers before the split, or without a cascade.",
    )
    offline_score: float | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the offline judge's score of the interaction "
        "and metric, so an estimate can pair them without the offline record.",
    )
    offline_label: str | None = Field(
        default=None,
        description="LLM records behind the sampling policy: the offline judge's label of the interaction "
        "and metric (alerts on the share of faithful answers pair labels, not scores).",
    )
    convention: str = Field(
        default="tracescore", description="Instrumentation convention the interaction was read from."
    )
    session_id: str | None = Field(
        default=None,
        description="Conversation the turn belongs to (session.id / gen_ai.conversation.id).",
    )
    revision: int = Field(
        default=0,
        ge=0,
        description="0 for an interaction's first scoring; n+1 when spans that arrived late changed what "
        "was judged (question, documents, answer) and it was scored again.",
    )
    supersedes: str | None = Field(
        default=None,
        description="Key of the revision this record replaces, `<trace_id>:<span_id>:<revision>`: a reader "
        "keeps the latest revision of each (trace_id, span_id).",
    )
    timestamp: datetime
    details: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)

    @model_validator(mode="before")
    @classmethod
    def _annotator_from_judge(cls, data: Any) -> Any:
        if isinstance(data, dict) and "annotator_kind" not in data and isinstance(data.get("judge"), str):
            return {**data, "annotator_kind": annotator_kind(data["judge"])}
        return data

    def to_kafka(self) -> tuple[bytes, bytes]:
        """(key, value): keyed by trace id so a trace's evaluations stay in one partition, in order."""
        return self.trace_id.encode(), self.model_dump_json().encode()
