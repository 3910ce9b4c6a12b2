"""`is_flagged`: the one reading of a result's label and score that records, report, gate and demo share."""

from __future__ import annotations

from tracescore.score import MetricResult, is_flagged


def _result(score: float | None, label: str | None) -> MetricResult:
    return MetricResult(metric="faithfulness", score=score, label=label, judge="offline")


def test_a_bad_label_flags_whatever_the_score() -> None:
    assert is_flagged(_result(0.5, "hallucinated"))
    assert is_flagged({"score": 0.9, "label": "hallucinated"})


def test_a_score_below_the_threshold_flags_whatever_the_label() -> None:
    assert is_flagged(_result(0.4, "faithful"))
    assert is_flagged(_result(0.6, "faithful"), threshold=0.7)
    assert not is_flagged(_result(0.6, "faithful"))
    assert is_flagged({"score": 0.2}) and not is_flagged({"score": 0.8, "label": "A"})


def test_unscored_results_are_never_flagged() -> None:
    assert not is_flagged(MetricResult.error("faithfulness", "timeout", judge="openai"))
    assert not is_flagged(None) and not is_flagged({"score": None, "label": "hallucinated"})
