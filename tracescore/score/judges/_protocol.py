"""The Judge seam: a metric states a typed task, a judge answers it with a validated output.

A task is a pydantic input model, an instruction, a pydantic output model and few-shot examples. An LLM
judge renders it into a prompt and parses the reply into the output model; the offline judge computes the
same output model deterministically. Metrics never see which one answered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from tracescore.model import Usage

__all__ = ["Judge", "JudgeError", "JudgeTask", "Judgement", "TaskKind", "can_answer", "unanswerable"]

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)


class TaskKind(StrEnum):
    """What a task asks, independent of which metric asks it: a judge without a language model answers
    the kinds it can compute and refuses the rest (free-form criteria) before any record is scored."""

    ANSWER_CLAIMS = "answer_claims"  # the answer's claims per sentence, plus its relevance to the question
    CLAIM_VERDICTS = "claim_verdicts"  # one verdict per claim against the context
    CHUNK_RATINGS = "chunk_ratings"  # one relevance rating per retrieved chunk
    CRITERIA = "criteria"  # free-form criteria (a rubric): needs a language model


@dataclass(frozen=True)
class JudgeTask(Generic[InT, OutT]):
    """A structured question for a judge. Module-level constants; never mutated."""

    name: str
    instruction: str
    input_model: type[InT]
    output_model: type[OutT]
    examples: tuple[tuple[InT, OutT], ...] = ()
    kind: TaskKind = TaskKind.CRITERIA
    # Distinct samples of one question are distinct calls: per-record call sharing keys on it.
    sample: int = 0


@dataclass(frozen=True)
class Judgement(Generic[OutT]):
    output: OutT
    usage: Usage
    # What the caller should know about how the output was obtained (e.g. an input trimmed to fit).
    warnings: tuple[str, ...] = ()


class JudgeError(Exception):
    """The judge could not produce a valid output (after its retries). `cause` is one short line."""

    def __init__(self, cause: str, *, usage: Usage | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.usage = usage or Usage()


@runtime_checkable
class Judge(Protocol):
    """Answers judge tasks. Implementations are safe to share across concurrent records."""

    @property
    def name(self) -> str: ...

    async def run(self, task: JudgeTask[InT, OutT], data: InT) -> Judgement[OutT]: ...


def can_answer(judge: Judge, task: JudgeTask[Any, Any]) -> bool:
    """Whether `judge` can answer `task`. Judges that do not say (LLM judges) are assumed to answer all."""
    check = getattr(judge, "can_answer", None)
    return True if check is None else bool(check(task))


def unanswerable(judge: Judge, metrics: Iterable[Any]) -> dict[str, list[str]]:
    """Metric name -> names of its tasks `judge` cannot answer, for metrics that list their `tasks`."""
    refused: dict[str, list[str]] = {}
    for metric in metrics:
        names = [t.name for t in getattr(metric, "tasks", ()) if not can_answer(judge, t)]
        if names:
            refused[metric.name] = names
    return refused
