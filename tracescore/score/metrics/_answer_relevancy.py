"""Answer relevancy: does the answer address the question that was asked?

With an embedder: the answer analysis (shared with faithfulness) writes questions the answer would answer;
the score is their mean cosine similarity to the real question, clamped to [0, 1], and 0 for a
noncommittal answer. Without one: the analysis' direct 1-5 relevance rating, normalised. Either way no
judge call beyond the shared analysis.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tracescore.model import MetricResult, RagRecord, Usage
from tracescore.score._segment import split_sentences
from tracescore.score.judges._embeddings import Embedder
from tracescore.score.judges._protocol import Judge, JudgeError, Judgement
from tracescore.score.metrics._analysis import ANALYSIS_TASK, AnswerAnalysis, analyse_answer
from tracescore.score.metrics._protocol import question_missing

__all__ = ["AnswerRelevancy", "cosine"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class AnswerRelevancy:
    name = "answer_relevancy"
    tasks = (ANALYSIS_TASK,)

    def __init__(self, *, embedder: Embedder | None = None, threshold: float = 0.5) -> None:
        self._embedder = embedder
        self.threshold = threshold

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        sentences = split_sentences(record.answer)
        if not sentences:
            return MetricResult.not_applicable(self.name, "the answer is empty", judge=judge.name)
        unasked = question_missing(self.name, record, judge, "answer relevancy compares the answer with it")
        if unasked is not None:
            return unasked
        try:
            analysed = await analyse_answer(record.query, sentences, judge)
        except JudgeError as exc:
            return MetricResult.error(self.name, exc.cause, judge=judge.name, usage=exc.usage)
        result = await self._from_analysis(record, analysed, judge)
        result.warnings.extend(analysed.warnings)
        return result

    async def _from_analysis(
        self, record: RagRecord, analysed: Judgement[AnswerAnalysis], judge: Judge
    ) -> MetricResult:
        analysis = analysed.output
        details: dict[str, object] = {
            "noncommittal": analysis.noncommittal,
            "relevance_rating": analysis.relevance,
            "reason": analysis.relevance_reason,
        }
        if analysis.noncommittal:
            return self._result(judge, 0.0, analysed.usage, details={**details, "method": "noncommittal"})
        questions = [q for q in analysis.questions if q.strip()]
        if self._embedder is not None and questions:
            try:
                vectors = await self._embedder.embed([record.query, *questions])
            except Exception as exc:  # the embeddings endpoint is a separate service with its own faults
                reason = f"embeddings failed: {type(exc).__name__}: {exc}"
                return MetricResult.error(self.name, reason, judge=judge.name, usage=analysed.usage)
            similarities = [cosine(vectors[0], v) for v in vectors[1:]]
            score = min(1.0, max(0.0, sum(similarities) / len(similarities)))
            details |= {
                "method": "reverse_questions",
                "generated_questions": questions,
                "similarities": similarities,
            }
            return self._result(judge, score, analysed.usage, details=details)
        score = (analysis.relevance - 1) / 4
        return self._result(judge, score, analysed.usage, details={**details, "method": "direct_rating"})

    def _result(
        self, judge: Judge, score: float, usage: Usage, *, details: dict[str, object] | None = None
    ) -> MetricResult:
        return MetricResult(
            metric=self.name,
            score=score,
            label="relevant" if score >= self.threshold else "not_relevant",
            judge=judge.name,
            details=details or {},
            usage=usage,
        )
