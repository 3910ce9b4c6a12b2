"""What is scored and what comes back: the value objects every metric, judge, sampler and sink shares."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from tracescore.model._run import Run

__all__ = ["MetricResult", "MetricStatus", "RagRecord", "Usage", "Verdict", "has_question"]


class RagRecord(BaseModel):
    """One RAG interaction: the question, what the retriever returned, and the answer.

    `query` is None (or blank) when the question was not recorded, e.g. an agent called with a message list
    its instrumentation does not write down: the answer can still be checked against the documents
    (faithfulness), while the metrics that compare with the question say `not_applicable`. `run` is what
    an agent did to answer (tool calls, LLM calls, steps), when the trace shows it: the run metrics read
    it."""

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    query: str | None
    contexts: tuple[str, ...] = ()
    answer: str
    run: Run | None = None


def has_question(record: RagRecord) -> bool:
    """Whether the record carries the user's question (None or blank: it was not recorded)."""
    return bool(record.query and record.query.strip())


class Usage(BaseModel):
    """Judge cost of one piece of work; added up per metric and per record."""

    model_config = ConfigDict(frozen=True)

    calls: int = Field(default=0, description="Judge calls (requests to a model).")
    prompt_tokens: int = Field(default=0, description="Prompt tokens of those calls.")
    completion_tokens: int = Field(default=0, description="Completion tokens of those calls.")
    cost_usd: float = Field(default=0.0, description="USD, from the judge's configured prices.")

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class Verdict(StrEnum):
    """What the judge said of one claim of the answer, against the retrieved documents (faithfulness)."""

    FULLY_SUPPORTED = "FULLY_SUPPORTED"
    PARTIALLY_SUPPORTED = "PARTIALLY_SUPPORTED"
    NO_EVIDENCE = "NO_EVIDENCE"
    CONTRADICTORY = "CONTRADICTORY"


class MetricStatus(StrEnum):
    OK = "ok"
    # The record had nothing the metric can check (a refusal, an empty answer): the score is None on purpose.
    NOT_APPLICABLE = "not_applicable"
    # The judge failed after its retries; `reason` carries the cause.
    ERROR = "error"


class MetricResult(BaseModel):
    """The outcome of one metric on one record. `score` is None exactly when status is not OK."""

    metric: str
    score: float | None
    status: MetricStatus = MetricStatus.OK
    label: str | None = None
    reason: str | None = None
    judge: str
    details: dict[str, Any] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    # Caveats on a valid score, e.g. a 100k-character context trimmed before judging.
    warnings: list[str] = Field(default_factory=list)

    @classmethod
    def error(
        cls,
        metric: str,
        reason: str,
        *,
        judge: str,
        usage: Usage | None = None,
        details: dict[str, Any] | None = None,
    ) -> MetricResult:
        """The judge (or the metric) failed: no score, and `reason` says why in one line."""
        return cls._unscored(MetricStatus.ERROR, metric, reason, judge, usage, details)

    @classmethod
    def not_applicable(
        cls,
        metric: str,
        reason: str,
        *,
        judge: str,
        usage: Usage | None = None,
        details: dict[str, Any] | None = None,
    ) -> MetricResult:
        """Nothing the metric can check (a refusal, no context): no score on purpose, `reason` says why."""
        return cls._unscored(MetricStatus.NOT_APPLICABLE, metric, reason, judge, usage, details)

    @classmethod
    def _unscored(
        cls,
        status: MetricStatus,
        metric: str,
        reason: str,
        judge: str,
        usage: Usage | None,
        details: dict[str, Any] | None,
    ) -> MetricResult:
        return cls(
            metric=metric,
            score=None,
            status=status,
            reason=reason,
            judge=judge,
            usage=usage or Usage(),
            details=details or {},
        )
