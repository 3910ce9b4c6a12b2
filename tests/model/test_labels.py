"""`is_flagged`: the one reading of a result's label and score that records, report, gate and demo share."""

from __future__ import annotations

from tracescore.model import MetricResult, is_flagged


def _result(score: float | None, label: str | None) -> MetricResult:
    return MetricResult(metric="faithfulness", score=score, label=label, judge="offline")


def test_a_bad_label_flags_whatever_the_score() -> None:
    assert is_flagged(_result(0.5, "hallucinated"))
    assert is_flagged({"score": 0.9, "label": "hallucinated"})


def test_by_default_the_label_decides_and_unlabelled_scores_are_flagged_below_half() -> None:
    assert not is_flagged(_result(0.4, "faithful")), "the metric's own rule labelled it"
    assert is_flagged({"score": 0.2}) and not is_flagged({"score": 0.8, "label": "A"})
    assert is_flagged({"score": 0.4, "label": "B+"}), "an unknown label falls back to the score"


def test_a_threshold_set_by_the_caller_flags_any_score_below_it() -> None:
    assert is_flagged(_result(0.6, "faithful"), threshold=0.7)
    assert not is_flagged(_result(0.6, "faithful"), threshold=0.5)
    assert is_flagged(_result(0.9, "hallucinated"), threshold=0.5), "a bad label still flags"


def test_unscored_results_are_never_flagged() -> None:
    assert not is_flagged(MetricResult.error("faithfulness", "timeout", judge="openai"))
    assert not is_flagged(None) and not is_flagged({"score": None, "label": "hallucinated"})
