"""Context relevance: one batched judge call per record, mean score and ranking-aware details."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from pydantic import BaseModel

from tracescore.model import MetricStatus, RagRecord, Usage
from tracescore.score.judges import JudgeError, Judgement, JudgeTask
from tracescore.score.metrics import ContextRelevance
from tracescore.score.metrics._context_relevance import (
    ChunkRating,
    ContextRatings,
    ContextRelevanceInput,
)

QUESTION = "Where is the Oberoi Group's head office?"


def record(*contexts: str) -> RagRecord:
    return RagRecord(id="r1", query=QUESTION, contexts=contexts, answer="Delhi.")


class RatingJudge:
    """Rates chunk i with ratings[i]; indices in `skip` are left out of the reply."""

    name = "ratings-stub"

    def __init__(self, ratings: Sequence[int], *, skip: Sequence[int] = ()) -> None:
        self._ratings = list(ratings)
        self._skip = set(skip)
        self.inputs: list[ContextRelevanceInput] = []

    async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
        assert task.name == "context.relevance"
        assert isinstance(data, ContextRelevanceInput)
        self.inputs.append(data)
        rated = [
            ChunkRating(chunk_index=i, rating=r, reason=f"chunk {i} rated {r}")
            for i, r in enumerate(self._ratings)
            if i not in self._skip
        ]
        return Judgement(ContextRatings(ratings=rated), Usage(calls=1, prompt_tokens=11, completion_tokens=4))


async def score(ratings: Sequence[int], metric: ContextRelevance | None = None, **kw: object):
    chunks = [f"chunk number {i}" for i in range(len(ratings))]
    return await (metric or ContextRelevance()).score(record(*chunks), RatingJudge(ratings, **kw))


async def test_details_count_mean_and_relevant_chunks() -> None:
    result = await score([2, 0, 2, 0])
    assert result.status is MetricStatus.OK
    assert result.score == pytest.approx(0.5) and result.details["mean"] == pytest.approx(0.5)
    assert result.details["relevant_chunks"] == 2 and result.details["total_chunks"] == 4
    assert [c["rating"] for c in result.details["chunks"]] == [2, 0, 2, 0]
    assert result.details["chunks"][1]["reason"] == "chunk 1 rated 0"
    assert result.label == "relevant"
    assert result.usage == Usage(calls=1, prompt_tokens=11, completion_tokens=4)
    assert result.judge == "ratings-stub"


async def test_the_score_is_the_normalised_mean_rating() -> None:
    assert (await score([2, 2, 2])).score == 1.0
    assert (await score([0, 0])).score == 0.0
    assert (await score([2, 1, 0])).score == pytest.approx(0.5)
    low = await score([1, 0, 0])
    assert low.score == pytest.approx(1 / 6) and low.label == "not_relevant"


async def test_position_weighting_prefers_a_relevant_first_chunk() -> None:
    first = await score([2, 0])
    last = await score([0, 2])
    assert first.score == last.score == pytest.approx(0.5), "the plain mean ignores rank"
    assert first.details["position_weighted"] == pytest.approx(1 / 1.9)
    assert last.details["position_weighted"] == pytest.approx(0.9 / 1.9)
    assert first.details["position_weighted"] > last.details["position_weighted"]


async def test_position_weighting_decay_is_configurable() -> None:
    flat = await score([0, 2], ContextRelevance(decay=1.0))
    steep = await score([0, 0, 2], ContextRelevance(decay=0.5))
    assert flat.details["position_weighted"] == pytest.approx(0.5)
    assert steep.details["position_weighted"] == pytest.approx(0.25 / 1.75)


async def test_precision_at_k() -> None:
    at_1_hit = await score([2, 0, 0], ContextRelevance(k=1))
    at_1_miss = await score([0, 2, 2], ContextRelevance(k=1))
    assert at_1_hit.details["k"] == 1 and at_1_hit.details["precision_at_k"] == 1.0
    assert at_1_miss.details["precision_at_k"] == 0.0
    at_2 = await score([0, 2, 2], ContextRelevance(k=2))
    assert at_2.details["precision_at_k"] == pytest.approx(0.5)


async def test_precision_without_k_covers_every_chunk_and_k_is_capped() -> None:
    everything = await score([2, 0, 2, 0])
    assert everything.details["k"] == 4 and everything.details["precision_at_k"] == pytest.approx(0.5)
    capped = await score([2, 0], ContextRelevance(k=10))
    assert capped.details["k"] == 2 and capped.details["precision_at_k"] == pytest.approx(0.5)


async def test_a_chunk_the_judge_did_not_rate_counts_as_zero_with_a_reason() -> None:
    result = await score([2, 2, 2], skip=[1])
    assert result.details["total_chunks"] == 3
    assert result.score == pytest.approx(2 / 3)
    assert result.details["relevant_chunks"] == 2
    skipped = result.details["chunks"][1]
    assert skipped == {"rating": 0, "reason": "the judge returned no rating for this chunk"}


async def test_ratings_for_chunks_that_do_not_exist_are_ignored() -> None:
    class Overeager(RatingJudge):
        async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
            extra = [ChunkRating(chunk_index=i, rating=2) for i in (-1, 1, 5)]
            return Judgement(ContextRatings(ratings=extra), Usage(calls=1))

    result = await ContextRelevance().score(record("a", "b"), Overeager([]))
    assert result.details["total_chunks"] == 2
    assert [c["rating"] for c in result.details["chunks"]] == [0, 2]


async def test_all_chunks_go_to_one_batched_call_in_rank_order() -> None:
    chunks = [f"passage {i} about the Oberoi Group" for i in range(7)]
    judge = RatingJudge([2] * 7)
    result = await ContextRelevance().score(record(*chunks), judge)
    assert len(judge.inputs) == 1, "one judge call whatever the number of chunks"
    assert judge.inputs[0].chunks == chunks and judge.inputs[0].question == QUESTION
    assert result.usage.calls == 1


async def test_blank_chunks_are_not_sent_and_not_counted() -> None:
    judge = RatingJudge([2, 0])
    result = await ContextRelevance().score(record("relevant", "   ", "", "unrelated"), judge)
    assert judge.inputs[0].chunks == ["relevant", "unrelated"]
    assert result.details["total_chunks"] == 2 and result.score == pytest.approx(0.5)


@pytest.mark.parametrize("contexts", [(), ("",), ("  ", "\n\t")])
async def test_no_context_is_not_applicable_without_a_judge_call(contexts: tuple[str, ...]) -> None:
    judge = RatingJudge([])
    result = await ContextRelevance().score(record(*contexts), judge)
    assert result.status is MetricStatus.NOT_APPLICABLE and result.score is None
    assert result.reason == "no retrieved context" and result.label is None
    assert judge.inputs == []
    assert result.usage == Usage()


async def test_a_judge_error_is_an_error_result_with_the_cause_and_usage() -> None:
    class Failing(RatingJudge):
        async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
            raise JudgeError("timeout after 4 attempts (30s each)", usage=Usage(calls=4))

    result = await ContextRelevance().score(record("a chunk"), Failing([]))
    assert result.status is MetricStatus.ERROR and result.score is None and result.label is None
    assert result.reason == "timeout after 4 attempts (30s each)"
    assert result.usage.calls == 4


@pytest.mark.parametrize("decay", [0.0, -0.5, 1.01, 2.0])
def test_invalid_decay_is_rejected_at_construction(decay: float) -> None:
    with pytest.raises(ValueError, match="decay"):
        ContextRelevance(decay=decay)


def test_decay_of_one_is_allowed() -> None:
    assert ContextRelevance(decay=1.0).decay == 1.0


async def test_a_custom_threshold_decides_the_label() -> None:
    result = await score([2, 2, 0], ContextRelevance(threshold=0.8))
    assert result.score == pytest.approx(2 / 3) and result.label == "not_relevant"


@pytest.mark.parametrize("k", [0, -1])
def test_k_below_one_is_rejected(k: int) -> None:
    with pytest.raises(ValueError, match="k must be at least 1"):
        ContextRelevance(k=k)
