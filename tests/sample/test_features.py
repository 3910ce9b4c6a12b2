"""The suspicion score reads a typed view of the offline Faithfulness result, through named features and
named coefficients, and still ranks on long answers."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tracescore.model import FaithfulnessFindings, MetricResult, RagRecord
from tracescore.sample._calibration import (
    COLD_START,
    FEATURES,
    LogisticModel,
    SuspicionFeatures,
    coefficients,
    features,
)
from tracescore.sample._learning import SuspicionModels
from tracescore.score import Faithfulness, OfflineJudge


def claim(verdict: str, confidence: float | None, evidence: str = "quoted") -> dict[str, Any]:
    return {"claim": "c", "verdict": verdict, "confidence": confidence, "evidence": evidence}


def result(score: float | None, rows: list[dict[str, Any]], **details: Any) -> MetricResult:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    full = {"total_claims": len(rows), "verdict_counts": counts, "claims": rows} | details
    return MetricResult(metric="faithfulness", score=score, judge="offline", details=full)


def test_the_findings_are_a_typed_view_of_the_results_details() -> None:
    rows = [
        claim("FULLY_SUPPORTED", 0.7),
        claim("PARTIALLY_SUPPORTED", 0.5),
        claim("NO_EVIDENCE", 0.9),  # a figure the context lacks
        claim("NO_EVIDENCE", 0.6),
        claim("NO_EVIDENCE", 0.2, evidence=""),  # not aligned: the judge could not check it
        claim("CONTRADICTORY", None),  # a judge that gives no confidence: sure
    ]
    found = FaithfulnessFindings.of(result(0.25, rows, unsupported_claims=3))
    assert (found.claims, found.supported, found.partial, found.no_evidence, found.contradicted) == (
        6,
        1,
        1,
        3,
        1,
    )
    assert found.unsupported == 4 and found.confidently_unsupported == 3
    assert found.near_certain == 2, "0.9 and the one without a confidence"
    assert found.aligned == 5
    assert found.weakest_aligned == 1.0 and found.most_confident == 1.0
    without_sure = FaithfulnessFindings.of(result(0.25, rows[:5], unsupported_claims=2))
    assert without_sure.weakest_aligned == 0.9 and without_sure.near_certain == 1


@pytest.mark.parametrize(
    "details",
    [
        {},
        {"total_claims": "many", "verdict_counts": ["NO_EVIDENCE"], "claims": "none"},
        {"verdict_counts": {"NO_EVIDENCE": -3, "FULLY_SUPPORTED": True}, "claims": [None, 3]},
    ],
)
def test_malformed_details_read_as_absent_never_raise(details: dict[str, Any]) -> None:
    found = FaithfulnessFindings.of(
        MetricResult(metric="faithfulness", score=0.5, judge="offline", details=details)
    )
    assert found.claims == 0 and found.unsupported == 0 and found.most_confident == 0.0
    assert all(
        math.isfinite(v)
        for v in features(MetricResult(metric="faithfulness", score=0.5, judge="offline", details=details))
    )


def test_counts_without_claim_rows_read_as_sure_and_aligned() -> None:
    details = {"total_claims": 4, "verdict_counts": {"NO_EVIDENCE": 1, "FULLY_SUPPORTED": 3}}
    found = FaithfulnessFindings.of(
        MetricResult(metric="faithfulness", score=0.75, judge="offline", details=details)
    )
    assert (found.confidently_unsupported, found.near_certain, found.aligned, found.most_confident) == (
        1,
        1,
        4,
        1.0,
    )


def test_features_are_named_and_ordered_by_name() -> None:
    assert FEATURES == ("bias", "unsupported", "most_confident", "confident_share", "claims")
    rows = [claim("FULLY_SUPPORTED", 0.7)] * 2 + [
        claim("NO_EVIDENCE", 0.9),
        claim("NO_EVIDENCE", 0.2, evidence=""),
    ]
    named = dict(zip(FEATURES, features(result(0.5, rows, unsupported_claims=1)), strict=True))
    assert named["unsupported"] == 0.5 and named["most_confident"] == 0.9 and named["confident_share"] == 0.25
    assert named["bias"] == 1.0 and named["claims"] == pytest.approx(math.log1p(4) / math.log1p(20))
    found = FaithfulnessFindings.of(result(0.5, rows, unsupported_claims=1))
    assert SuspicionFeatures.of(found).vector() == tuple(named.values())


def test_the_cold_start_is_named_coefficients() -> None:
    assert list(COLD_START) == list(FEATURES)
    shuffled = dict(reversed(list(COLD_START.items())))
    x = features(result(0.5, [claim("NO_EVIDENCE", 0.9), claim("FULLY_SUPPORTED", 0.7)]))
    # By name, not by position: the same coefficients in another order are the same model.
    assert LogisticModel.cold_start(shuffled).probability(x) == LogisticModel.cold_start().probability(x)
    assert coefficients(shuffled) == coefficients(COLD_START)
    with pytest.raises(ValueError, match="missing: claims"):
        SuspicionModels(cold_start={k: v for k, v in COLD_START.items() if k != "claims"})
    with pytest.raises(ValueError, match="unknown: answer_length"):
        LogisticModel.cold_start({**COLD_START, "answer_length": 1.0})


PASSAGE = (
    "The city council of Northbridge approved a new public library on Tuesday. "
    "The library will cost 12 million dollars and is due to open in March 2026. "
    "It was designed by the architect Maria Lindqvist, who also built the town's concert hall. "
    "The old library on Mill Street will not close until the new building opens. "
    "Mayor Tom Reyes said the project would create 80 jobs."
)
SUMMARY = [
    "Northbridge's city council has approved a new public library.",
    "The library is expected to cost 12 million dollars and to open in March 2026.",
    "The architect Maria Lindqvist, who built the concert hall, designed it.",
    "The old library on Mill Street will not close before the new building opens.",
    "According to Mayor Tom Reyes, the project will create 80 jobs.",
]


async def test_a_long_answer_with_one_changed_figure_is_more_suspicious_than_its_faithful_twin() -> None:
    changed = [*SUMMARY]
    changed[1] = "The library is expected to cost 15 million dollars and to open in March 2026."
    metric, judge, model = Faithfulness(), OfflineJudge(), LogisticModel.cold_start()
    probabilities = []
    for sentences in (SUMMARY, changed):
        record = RagRecord(
            query="Summarize the following passage.", contexts=(PASSAGE,), answer=" ".join(sentences)
        )
        probabilities.append(model.probability(features(await metric.score(record, judge))))
    faithful, hallucinated = probabilities
    assert hallucinated > 0.5 > faithful, probabilities
