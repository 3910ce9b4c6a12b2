"""Retrieve-then-answer for one question, free of tracescore so it runs (and tests) without Kafka."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from .answerer import respond
from .questions import Question
from .retriever import Retriever

# (query, contexts, route, alteration) -> (answer, alteration applied or None)
AnswerFn = Callable[[str, list[str], str, str | None], tuple[str, str | None]]

TOP_K = 3


@dataclass(frozen=True)
class Result:
    route: str
    query: str
    contexts: list[str]
    answer: str
    altered: bool  # the answer was deliberately made unfaithful: the expected verdict is "hallucinated"
    alteration: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def plain_answer(
    query: str, contexts: list[str], route: str, alteration: str | None = None
) -> tuple[str, str | None]:
    return respond(query, contexts, alteration)


def run(
    question: Question, retriever: Retriever, answer_fn: AnswerFn = plain_answer, k: int = TOP_K
) -> Result:
    contexts = retriever.search(question.text, k)
    answer, applied = answer_fn(question.text, contexts, question.route, question.alter)
    return Result(question.route, question.text, contexts, answer, applied is not None, applied)


def expectation_key(query: str, answer: str) -> str:
    """Key of the --expected-out JSON: the scorer sees exactly this query and answer on the span."""
    return f"{query}\n{answer}"
