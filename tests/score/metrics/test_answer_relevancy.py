"""Answer relevancy: the direct rating, reverse questions embedded over real HTTP, and explicit failures."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from pydantic import BaseModel

from tracescore.model import MetricStatus, RagRecord, Usage
from tracescore.score.judges import JudgeError, Judgement, JudgeTask, OpenAIEmbedder, OpenAIEmbedderSettings
from tracescore.score.judges._embeddings import Embedder
from tracescore.score.metrics import AnswerRelevancy
from tracescore.score.metrics._analysis import AnalysisInput, AnswerAnalysis, SentenceClaims
from tracescore.score.metrics._answer_relevancy import cosine
from tracescore.testing.judge_server import JudgeServer, hashed_embedding

QUESTION = "Where is the Oberoi Group's head office?"
RECORD = RagRecord(
    id="r1",
    query=QUESTION,
    contexts=("The Oberoi Group is a hotel company with its head office in Delhi.",),
    answer="The head office is in Delhi. It is a hotel company.",
)


class AnalysisJudge:
    """Answers the shared answer analysis with a fixed output; records what it was asked."""

    name = "analysis-stub"

    def __init__(
        self,
        *,
        relevance: int = 3,
        questions: Sequence[str] = (),
        noncommittal: bool = False,
        error: JudgeError | None = None,
    ) -> None:
        self._analysis = AnswerAnalysis(
            sentences=[SentenceClaims(sentence_index=0, claims=["The head office is in Delhi."])],
            questions=list(questions),
            noncommittal=noncommittal,
            relevance=relevance,
            relevance_reason=f"rated {relevance}",
        )
        self._error = error
        self.inputs: list[AnalysisInput] = []

    async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
        assert task.name == "answer.analysis", "answer relevancy asks nothing but the shared analysis"
        assert isinstance(data, AnalysisInput)
        self.inputs.append(data)
        if self._error is not None:
            raise self._error
        return Judgement(self._analysis, Usage(calls=1, prompt_tokens=7, completion_tokens=3))


class RecordingEmbedder:
    """An Embedder with fixed vectors per text (for exact similarity arithmetic)."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self._vectors = vectors
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self._vectors[t] for t in texts]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as running:
        yield running


def embedder_for(server: JudgeServer) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        OpenAIEmbedderSettings(base_url=server.base_url, api_key="x", max_retries=0, timeout_s=5)
    )


# -- direct mode (no embedder) ----------------------------------------------------------------------------


@pytest.mark.parametrize(("rating", "expected"), [(1, 0.0), (2, 0.25), (3, 0.5), (4, 0.75), (5, 1.0)])
async def test_direct_mode_normalises_the_analysis_rating(rating: int, expected: float) -> None:
    judge = AnalysisJudge(relevance=rating, questions=["Where is the head office?"])
    result = await AnswerRelevancy().score(RECORD, judge)
    assert result.status is MetricStatus.OK
    assert result.score == pytest.approx(expected)
    assert result.details["method"] == "direct_rating"
    assert result.details["relevance_rating"] == rating
    assert result.details["reason"] == f"rated {rating}"
    assert result.label == ("relevant" if expected >= 0.5 else "not_relevant")
    assert result.usage == Usage(calls=1, prompt_tokens=7, completion_tokens=3)
    assert result.judge == "analysis-stub"


async def test_the_analysis_input_is_the_question_and_the_answer_sentences() -> None:
    judge = AnalysisJudge()
    await AnswerRelevancy().score(RECORD, judge)
    [data] = judge.inputs
    assert data.question == QUESTION
    assert data.answer_sentences == ["The head office is in Delhi.", "It is a hotel company."]


async def test_a_custom_threshold_decides_the_label() -> None:
    result = await AnswerRelevancy(threshold=0.8).score(RECORD, AnalysisJudge(relevance=4))
    assert result.score == pytest.approx(0.75) and result.label == "not_relevant"


async def test_a_noncommittal_answer_scores_zero_even_with_a_high_rating() -> None:
    judge = AnalysisJudge(relevance=5, questions=[QUESTION], noncommittal=True)
    embedder = RecordingEmbedder({})
    result = await AnswerRelevancy(embedder=embedder).score(RECORD, judge)
    assert result.status is MetricStatus.OK
    assert result.score == 0.0 and result.label == "not_relevant"
    assert result.details["method"] == "noncommittal" and result.details["noncommittal"] is True
    assert embedder.calls == [], "no embeddings are paid for a noncommittal answer"


@pytest.mark.parametrize("answer", ["", "   ", "\n\t"])
async def test_an_empty_answer_is_not_applicable_without_a_judge_call(answer: str) -> None:
    judge = AnalysisJudge()
    result = await AnswerRelevancy().score(RECORD.model_copy(update={"answer": answer}), judge)
    assert result.status is MetricStatus.NOT_APPLICABLE and result.score is None
    assert result.reason == "the answer is empty" and result.label is None
    assert judge.inputs == []


async def test_a_judge_error_is_an_error_result_with_the_cause_and_usage() -> None:
    judge = AnalysisJudge(error=JudgeError("HTTP 500 after 3 attempts", usage=Usage(calls=3)))
    result = await AnswerRelevancy().score(RECORD, judge)
    assert result.status is MetricStatus.ERROR and result.score is None and result.label is None
    assert result.reason == "HTTP 500 after 3 attempts"
    assert result.usage.calls == 3


# -- embeddings mode ---------------------------------------------------------------------------------------


async def test_questions_identical_to_the_real_one_score_one_over_real_http(server: JudgeServer) -> None:
    judge = AnalysisJudge(relevance=1, questions=[QUESTION, QUESTION, QUESTION])
    result = await AnswerRelevancy(embedder=embedder_for(server)).score(RECORD, judge)
    assert result.status is MetricStatus.OK
    assert result.details["method"] == "reverse_questions"
    assert result.score == pytest.approx(1.0) and 0.0 <= result.score <= 1.0
    assert result.details["similarities"] == pytest.approx([1.0, 1.0, 1.0])
    assert result.details["generated_questions"] == [QUESTION] * 3
    assert result.label == "relevant"
    # One batched embeddings request: the real question first, then the generated ones.
    assert server.stats.embedding_requests == 1 and server.stats.chat_requests == 0
    [request] = server.requests
    assert request.path.endswith("/embeddings")
    assert request.body["input"] == [QUESTION, QUESTION, QUESTION, QUESTION]
    assert result.usage.calls == 1, "embeddings are not judge calls"


async def test_unrelated_questions_score_lower_than_related_ones(server: JudgeServer) -> None:
    metric = AnswerRelevancy(embedder=embedder_for(server))
    related = await metric.score(
        RECORD, AnalysisJudge(questions=["Where is the head office of the Oberoi Group?"])
    )
    unrelated = await metric.score(
        RECORD, AnalysisJudge(questions=["How do bees make honey?", "Why did the Roman empire fall?"])
    )
    assert related.status is unrelated.status is MetricStatus.OK
    assert related.score > 0.5 > unrelated.score >= 0.0
    assert unrelated.label == "not_relevant"


async def test_blank_generated_questions_are_ignored(server: JudgeServer) -> None:
    judge = AnalysisJudge(questions=["  ", QUESTION, ""])
    result = await AnswerRelevancy(embedder=embedder_for(server)).score(RECORD, judge)
    assert result.details["generated_questions"] == [QUESTION]
    assert server.requests[0].body["input"] == [QUESTION, QUESTION]


def _opposite_words() -> tuple[str, str]:
    """Two words whose 1-dimensional hashed embeddings point in opposite directions (cosine -1)."""
    signs: dict[float, str] = {}
    for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"):
        signs.setdefault(hashed_embedding(word, 1)[0], word)
        if len(signs) == 2:
            return signs[1.0], signs[-1.0]
    raise AssertionError("no pair of words with opposite signs")


async def test_negative_cosine_is_clamped_to_zero_over_real_http() -> None:
    plus, minus = _opposite_words()
    record = RECORD.model_copy(update={"query": plus})
    with JudgeServer(embedding_dim=1) as server:
        result = await AnswerRelevancy(embedder=embedder_for(server)).score(
            record, AnalysisJudge(questions=[minus])
        )
    assert result.details["similarities"] == pytest.approx([-1.0])
    assert result.score == 0.0 and result.status is MetricStatus.OK


async def test_score_is_clamped_to_the_unit_interval() -> None:
    # Vectors that are not normalised can push a cosine a hair above 1 in floating point.
    vectors = {"q": [1e-8, 3.0, 4.0], "same": [1e-8, 3.0, 4.0], "opposite": [-1e-8, -3.0, -4.0]}
    high = await AnswerRelevancy(embedder=RecordingEmbedder(vectors)).score(
        RECORD.model_copy(update={"query": "q"}), AnalysisJudge(questions=["same", "same"])
    )
    low = await AnswerRelevancy(embedder=RecordingEmbedder(vectors)).score(
        RECORD.model_copy(update={"query": "q"}), AnalysisJudge(questions=["opposite"])
    )
    assert 0.0 <= low.score <= high.score <= 1.0
    assert high.score == pytest.approx(1.0) and low.score == 0.0


async def test_the_score_is_the_mean_similarity() -> None:
    vectors = {"q": [1.0, 0.0], "a": [1.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0]}
    embedder = RecordingEmbedder(vectors)
    result = await AnswerRelevancy(embedder=embedder).score(
        RECORD.model_copy(update={"query": "q"}), AnalysisJudge(questions=["a", "b", "c"])
    )
    assert result.details["similarities"] == pytest.approx([1.0, 0.0, 2**-0.5])
    assert result.score == pytest.approx((1.0 + 0.0 + 2**-0.5) / 3)
    assert embedder.calls == [["q", "a", "b", "c"]]


async def test_an_embeddings_failure_is_an_error_result_that_keeps_the_judge_usage(closed_port: int) -> None:
    embedder = OpenAIEmbedder(
        OpenAIEmbedderSettings(
            base_url=f"http://127.0.0.1:{closed_port}/v1", api_key="x", max_retries=0, timeout_s=2
        )
    )
    result = await AnswerRelevancy(embedder=embedder).score(RECORD, AnalysisJudge(questions=[QUESTION]))
    assert result.status is MetricStatus.ERROR and result.score is None and result.label is None
    assert result.reason.startswith("embeddings failed: APIConnectionError")
    assert result.usage.calls == 1, "the analysis call was paid and is still reported"


async def test_an_embedder_exception_of_any_kind_is_an_error_result() -> None:
    class Broken:
        async def embed(self, texts: Sequence[str]) -> list[list[float]]:
            raise RuntimeError("dimension mismatch")

    assert isinstance(Broken(), Embedder)
    result = await AnswerRelevancy(embedder=Broken()).score(RECORD, AnalysisJudge(questions=[QUESTION]))
    assert result.status is MetricStatus.ERROR
    assert result.reason == "embeddings failed: RuntimeError: dimension mismatch"


@pytest.mark.parametrize("questions", [[], ["", "   "]])
async def test_an_analysis_without_questions_falls_back_to_the_direct_rating(
    questions: list[str], server: JudgeServer
) -> None:
    judge = AnalysisJudge(relevance=4, questions=questions)
    result = await AnswerRelevancy(embedder=embedder_for(server)).score(RECORD, judge)
    assert result.status is MetricStatus.OK
    assert result.details["method"] == "direct_rating"
    assert result.score == pytest.approx(0.75)
    assert server.stats.embedding_requests == 0


# -- cosine ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0, 0.0], [1.0, 0.0], 1.0),
        ([1.0, 0.0], [0.0, 2.0], 0.0),
        ([1.0, 2.0], [-1.0, -2.0], -1.0),
        ([3.0, 4.0], [6.0, 8.0], 1.0),
        ([0.0, 0.0], [1.0, 1.0], 0.0),
        ([1.0, 1.0], [0.0, 0.0], 0.0),
        ([0.0, 0.0], [0.0, 0.0], 0.0),
        ([], [], 0.0),
    ],
)
def test_cosine(a: list[float], b: list[float], expected: float) -> None:
    assert cosine(a, b) == pytest.approx(expected)


def test_cosine_rejects_vectors_of_different_lengths() -> None:
    with pytest.raises(ValueError):
        cosine([1.0, 0.0], [1.0])


def test_the_cli_switches_to_embeddings_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracescore.score import make_metrics

    monkeypatch.delenv("TRACESCORE_EMBEDDINGS_MODEL", raising=False)
    monkeypatch.delenv("TRACESCORE_EMBEDDINGS_BASE_URL", raising=False)
    (direct,) = make_metrics(["answer_relevancy"])
    assert direct._embedder is None
    monkeypatch.setenv("TRACESCORE_EMBEDDINGS_BASE_URL", "http://127.0.0.1:1/v1")
    (embedding,) = make_metrics(["answer_relevancy"])
    assert embedding._embedder is not None
