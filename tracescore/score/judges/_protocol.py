"""The Judge seam: a metric states a typed task, a judge answers it with a validated output.

A task is a pydantic input model, an instruction, a pydantic output model and few-shot examples. An LLM
judge renders it into a prompt and parses the reply into the output model; the offline judge computes the
same output model deterministically. Metrics never see which one answered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel

from tracescore.score._types import Usage

__all__ = ["Judge", "JudgeError", "JudgeTask", "Judgement"]

InT = TypeVar("InT", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)


@dataclass(frozen=True)
class JudgeTask(Generic[InT, OutT]):
    """A structured question for a judge. Module-level constants; never mutated."""

    name: str
    instruction: str
    input_model: type[InT]
    output_model: type[OutT]
    examples: tuple[tuple[InT, OutT], ...] = ()


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
