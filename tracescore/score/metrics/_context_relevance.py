"""Context relevance: how much of what the retriever returned bears on the question.

Every chunk is rated in one batched judge call (0 irrelevant, 1 partly, 2 relevant). The score is the mean
rating (normalised to [0, 1]); details add the relevant-chunk count, a position-weighted score (rank i
weighs 0.9**i: a relevant first chunk matters more than a relevant fifth) and precision@k.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tracescore.model import MetricResult, RagRecord, Usage
from tracescore.score.judges._protocol import Judge, JudgeError, JudgeTask, TaskKind
from tracescore.score.metrics._protocol import UsesContexts, question_missing

__all__ = [
    "CONTEXT_RELEVANCE_TASK",
    "ChunkRating",
    "ContextRatings",
    "ContextRelevance",
    "ContextRelevanceInput",
]


class ContextRelevanceInput(BaseModel):
    question: str
    chunks: list[str] = Field(description="Retrieved chunks in rank order.")


class ChunkRating(BaseModel):
    chunk_index: int
    rating: int = Field(ge=0, le=2, description="0 irrelevant, 1 partly relevant, 2 relevant.")
    reason: str = ""


class ContextRatings(BaseModel):
    ratings: list[ChunkRating]


CONTEXT_RELEVANCE_TASK: JudgeTask[ContextRelevanceInput, ContextRatings] = JudgeTask(
    name="context.relevance",
    instruction=(
        "Rate every chunk for the question: 2 if it contains information needed to answer it, 1 if it is on "
        "the topic but does not help answer it, 0 if it is unrelated. One rating per chunk, in chunk order."
    ),
    input_model=ContextRelevanceInput,
    output_model=ContextRatings,
    kind=TaskKind.CHUNK_RATINGS,
    examples=(
        (
            ContextRelevanceInput(
                question="Where is the Oberoi Group's head office?",
                chunks=[
                    "The Oberoi Group has its head office in Delhi.",
                    "Delhi has a humid subtropical climate.",
                ],
            ),
            ContextRatings(
                ratings=[
                    ChunkRating(chunk_index=0, rating=2, reason="States the head office."),
                    ChunkRating(chunk_index=1, rating=0, reason="About Delhi's climate, not the company."),
                ]
            ),
        ),
    ),
)


class ContextRelevance:
    name = "context_relevance"
    tasks = (CONTEXT_RELEVANCE_TASK,)
    uses_contexts = UsesContexts.NEEDED

    def __init__(self, *, k: int | None = None, decay: float = 0.9, threshold: float = 0.5) -> None:
        if not 0 < decay <= 1:
            raise ValueError(f"decay must be within (0, 1], got {decay}")
        if k is not None and k < 1:
            raise ValueError(f"k must be at least 1 (or None for all chunks), got {k}")
        self.k = k
        self.decay = decay
        self.threshold = threshold

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        chunks = [c for c in record.contexts if c.strip()]
        if not chunks:
            return MetricResult.not_applicable(self.name, "no retrieved context", judge=judge.name)
        unasked = question_missing(self.name, record, judge, "context relevance rates the documents for it")
        if unasked is not None:
            return unasked
        try:
            judged = await judge.run(
                CONTEXT_RELEVANCE_TASK, ContextRelevanceInput(question=record.query or "", chunks=chunks)
            )
        except JudgeError as exc:
            return MetricResult.error(self.name, exc.cause, judge=judge.name, usage=exc.usage)
        by_index = {r.chunk_index: r for r in judged.output.ratings}
        # A chunk the judge did not rate counts as irrelevant rather than vanishing from the mean.
        ratings = [by_index[i].rating if i in by_index else 0 for i in range(len(chunks))]
        result = self.result_from(
            ratings, [by_index.get(i) for i in range(len(chunks))], judge.name, judged.usage
        )
        result.warnings.extend(judged.warnings)
        return result

    def result_from(
        self, ratings: list[int], rated: list[ChunkRating | None], judge_name: str, usage: Usage
    ) -> MetricResult:
        scores = [r / 2 for r in ratings]
        weights = [self.decay**i for i in range(len(scores))]
        k = min(self.k or len(scores), len(scores))
        relevant = [rating == 2 for rating in ratings]  # 1 is "on topic but does not help answer"
        mean = sum(scores) / len(scores)
        return MetricResult(
            metric=self.name,
            score=mean,
            label="relevant" if mean >= self.threshold else "not_relevant",
            judge=judge_name,
            usage=usage,
            details={
                "mean": mean,
                "relevant_chunks": sum(relevant),
                "total_chunks": len(scores),
                "position_weighted": sum(w * s for w, s in zip(weights, scores, strict=True)) / sum(weights),
                "k": k,
                "precision_at_k": sum(relevant[:k]) / k,
                "chunks": [
                    {
                        "rating": rating,
                        "reason": r.reason if r else "the judge returned no rating for this chunk",
                    }
                    for rating, r in zip(ratings, rated, strict=True)
                ],
            },
        )
