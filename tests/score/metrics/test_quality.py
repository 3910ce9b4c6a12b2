"""Combined quality: weighted mean of the sub-metrics, grade, renormalisation and construction checks."""

from __future__ import annotations

import pytest

from tracescore.model import MetricResult, MetricStatus, RagRecord, Usage
from tracescore.score.judges import Judgement, JudgeTask, OfflineJudge
from tracescore.score.metrics import Metric, Quality, evaluate_record, letter_grade

RECORD = RagRecord(id="r1", query="Who wrote Hamlet?", contexts=("Shakespeare wrote Hamlet.",), answer="X.")


class NoJudge:
    name = "stub-judge"

    async def run(self, task: JudgeTask, data: object) -> Judgement:
        raise AssertionError("the stub sub-metrics never call the judge")


class Fixed:
    """A sub-metric returning a fixed result."""

    def __init__(
        self,
        name: str,
        score: float | None,
        *,
        status: MetricStatus | None = None,
        reason: str | None = None,
        usage: Usage | None = None,
    ) -> None:
        self.name = name
        self._score = score
        self._status = status or (MetricStatus.OK if score is not None else MetricStatus.NOT_APPLICABLE)
        self._reason = reason
        self._usage = usage or Usage()
        self.records: list[RagRecord] = []

    async def score(self, record: RagRecord, judge: object) -> MetricResult:
        self.records.append(record)
        return MetricResult(
            metric=self.name,
            score=self._score,
            status=self._status,
            reason=self._reason,
            judge="stub-judge",
            usage=self._usage,
        )


def three(f: float | None, ar: float | None, cr: float | None, **kw: object) -> list[Fixed]:
    return [Fixed("faithfulness", f, **kw), Fixed("answer_relevancy", ar), Fixed("context_relevance", cr)]


async def quality(subs: list[Fixed], **kw: object) -> MetricResult:
    return await Quality(subs, **kw).score(RECORD, NoJudge())


async def test_stub_sub_metrics_satisfy_the_metric_protocol() -> None:
    # Used where a Metric is expected (evaluate_record runs any list of metrics): each gives its own named
    # result, and Quality hands the record to every sub-metric.
    subs = three(1.0, 0.5, 0.0)
    metrics: list[Metric] = [Fixed("faithfulness", 1.0), Quality(subs)]
    results = await evaluate_record(RECORD, metrics, NoJudge())
    assert [(r.metric, r.status) for r in results] == [
        ("faithfulness", MetricStatus.OK),
        ("quality", MetricStatus.OK),
    ]
    assert results[0].score == 1.0 and results[1].score is not None and 0.0 < results[1].score < 1.0
    assert all(sub.records == [RECORD] for sub in subs)


async def test_weighted_mean_uses_default_weights() -> None:
    result = await quality(three(0.9, 0.8, 0.6))
    assert result.status is MetricStatus.OK
    assert result.metric == "quality" and result.judge == "stub-judge"
    assert result.score == pytest.approx(0.4 * 0.9 + 0.3 * 0.8 + 0.3 * 0.6)
    d = result.details
    assert d["weighted_mean"] == pytest.approx(0.78)
    assert d["weights"] == {"faithfulness": 0.4, "answer_relevancy": 0.3, "context_relevance": 0.3}
    assert d["components"] == {"faithfulness": 0.9, "answer_relevancy": 0.8, "context_relevance": 0.6}
    assert d["harmonic_mean"] == pytest.approx(3 / (1 / 0.9 + 1 / 0.8 + 1 / 0.6))
    assert d["minimum"] == 0.6
    assert d["grade"] == "C" and result.label == "C"
    assert d["unscored"] == {}


async def test_every_sub_metric_sees_the_record() -> None:
    subs = three(1.0, 1.0, 1.0)
    await quality(subs)
    assert all(s.records == [RECORD] for s in subs)


async def test_a_zero_component_makes_the_harmonic_mean_zero() -> None:
    result = await quality(three(1.0, 0.5, 0.0))
    assert result.score == pytest.approx(0.4 + 0.15)
    assert result.details["harmonic_mean"] == 0.0 and result.details["minimum"] == 0.0
    assert result.label == "F"


async def test_perfect_components_grade_a() -> None:
    result = await quality(three(1.0, 1.0, 1.0))
    assert result.score == pytest.approx(1.0) and result.details["harmonic_mean"] == pytest.approx(1.0)
    assert result.label == "A"


@pytest.mark.parametrize(
    ("score", "grade"),
    [
        (1.0, "A"),
        (0.9, "A"),
        (0.8999, "B"),
        (0.8, "B"),
        (0.7999, "C"),
        (0.7, "C"),
        (0.6999, "D"),
        (0.6, "D"),
        (0.5999, "F"),
        (0.0, "F"),
    ],
)
def test_letter_grade_boundaries(score: float, grade: str) -> None:
    assert letter_grade(score) == grade


async def test_custom_weights_and_sub_metrics() -> None:
    subs = [Fixed("a", 1.0), Fixed("b", 0.0)]
    result = await quality(subs, weights={"a": 3.0, "b": 1.0})
    assert result.score == pytest.approx(0.75)
    assert result.details["weights"] == {"a": 3.0, "b": 1.0}


async def test_weights_are_renormalised_when_a_sub_metric_is_unscored() -> None:
    subs = three(None, 0.5, 1.0, reason="no retrieved context to check the answer against")
    result = await quality(subs)
    assert result.status is MetricStatus.OK
    assert result.score == pytest.approx((0.3 * 0.5 + 0.3 * 1.0) / 0.6)
    assert result.details["unscored"] == {
        "faithfulness": "not_applicable: no retrieved context to check the answer against"
    }
    assert result.details["components"]["faithfulness"] is None
    assert result.details["minimum"] == 0.5
    assert result.details["harmonic_mean"] == pytest.approx(2 / (1 / 0.5 + 1))
    assert result.label == "C"


async def test_an_errored_sub_metric_is_named_with_its_cause() -> None:
    subs = [
        Fixed("faithfulness", 0.5),
        Fixed("answer_relevancy", None, status=MetricStatus.ERROR, reason="HTTP 500 after 4 attempts"),
        Fixed("context_relevance", 0.5),
    ]
    result = await quality(subs)
    assert result.score == pytest.approx(0.5)
    assert result.details["unscored"] == {"answer_relevancy": "error: HTTP 500 after 4 attempts"}


async def test_all_sub_metrics_unscored_is_not_applicable_with_their_reasons() -> None:
    subs = [
        Fixed("faithfulness", None, reason="the answer is empty"),
        Fixed("answer_relevancy", None, reason="the answer is empty"),
        Fixed("context_relevance", None, status=MetricStatus.ERROR, reason="timeout"),
    ]
    result = await quality(subs)
    assert result.status is MetricStatus.NOT_APPLICABLE
    assert result.score is None and result.label is None
    assert result.reason.startswith("no sub-metric could be scored")
    for part in (
        "faithfulness not_applicable: the answer is empty",
        "answer_relevancy not_applicable: the answer is empty",
        "context_relevance error: timeout",
    ):
        assert part in result.reason
    assert result.details["components"] == dict.fromkeys(
        ["faithfulness", "answer_relevancy", "context_relevance"]
    )


async def test_usage_is_the_sum_of_the_sub_metrics() -> None:
    subs = [
        Fixed("faithfulness", 1.0, usage=Usage(calls=2, prompt_tokens=100, cost_usd=0.01)),
        Fixed("answer_relevancy", 1.0, usage=Usage(calls=0)),
        Fixed("context_relevance", None, usage=Usage(calls=1, completion_tokens=7)),
    ]
    result = await quality(subs)
    assert result.usage == Usage(calls=3, prompt_tokens=100, completion_tokens=7, cost_usd=0.01)


@pytest.mark.parametrize(
    ("subs", "weights", "missing"),
    [
        ([Fixed("custom", 1.0)], None, "custom"),
        (three(1.0, 1.0, 1.0), {"faithfulness": 0.5, "answer_relevancy": 0.5}, "context_relevance"),
        (three(1.0, 1.0, 1.0), {"faithfulness": 1, "answer_relevancy": 0, "context_relevance": 1}, None),
        (three(1.0, 1.0, 1.0), {"faithfulness": -1, "answer_relevancy": 1, "context_relevance": 1}, None),
    ],
)
def test_a_sub_metric_without_a_positive_weight_is_rejected_at_construction(
    subs: list[Fixed], weights: dict[str, float] | None, missing: str | None
) -> None:
    with pytest.raises(ValueError, match="no positive weight") as info:
        Quality(subs) if weights is None else Quality(subs, weights=weights)
    if missing:
        assert missing in str(info.value)


async def test_the_default_sub_metrics_are_the_three_builtins() -> None:
    result = await Quality().score(RECORD, OfflineJudge())
    assert list(result.details["components"]) == ["faithfulness", "answer_relevancy", "context_relevance"]
    assert result.usage == Usage()


async def test_a_sub_metric_that_raises_leaves_the_others_scored() -> None:
    class Broken(Fixed):
        async def score(self, record: RagRecord, judge: object) -> MetricResult:
            raise RuntimeError("boom")

    subs = [Broken("faithfulness", 1.0), Fixed("answer_relevancy", 0.8), Fixed("context_relevance", 0.6)]
    result = await quality(subs)
    assert result.score == pytest.approx((0.3 * 0.8 + 0.3 * 0.6) / 0.6)
    assert "boom" in result.details["unscored"]["faithfulness"]


async def test_weights_follow_the_sub_metric_name_even_if_its_result_says_otherwise() -> None:
    class Renamed(Fixed):
        async def score(self, record: RagRecord, judge: object) -> MetricResult:
            result = await super().score(record, judge)
            return result.model_copy(update={"metric": "something_else"})

    subs = [Renamed("faithfulness", 1.0), Fixed("answer_relevancy", 0.0), Fixed("context_relevance", 0.0)]
    result = await quality(subs)
    assert result.score == pytest.approx(0.4)
