"""Alert rules on `signal: label`: the share of answers the label rule passes (README, What "hallucinated"
means), from both judges like the score estimate, against `signal: score` (the mean score)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alert_records import T0, llm_record, record
from click.testing import CliRunner

from tracescore.alert import (
    AlertConfig,
    AlertConfigError,
    AlertEvaluator,
    EstimateWindow,
    InProcessAlerts,
    Notification,
    RuleConfig,
    load_alert_config,
)
from tracescore.cli import main
from tracescore.model import EvaluationRecord


def labelled(score: float, label: str, at_s: float = 0, start: datetime = T0) -> EvaluationRecord:
    """An offline record with the metric's own label, as the consumer writes it."""
    return record(score, start + timedelta(seconds=at_s)).model_copy(update={"label": label})


def fed(signal: str, answers: list[tuple[float, str]]) -> list[Notification]:
    rule = RuleConfig(signal=signal, window_count=50, min_samples=10, warning=0.7, critical=0.5)  # type: ignore[arg-type]
    ev = AlertEvaluator(AlertConfig(rules=[rule]))
    notes: list[Notification] = []
    for i, (score, label) in enumerate(answers):
        r = labelled(score, label, i)
        key = ev.add(r)
        assert key is not None
        notes += ev.evaluate(key, r.timestamp)
    return notes


def test_the_default_rule_watches_the_label_and_the_file_can_choose(tmp_path: Path) -> None:
    assert RuleConfig().signal == "label"
    path = tmp_path / "alert.yaml"
    path.write_text("rules:\n  - signal: score\n  - routes: ['/faq']\n")
    config = load_alert_config(path)
    assert [r.signal for r in config.rules] == ["score", "label"]


def test_an_unknown_signal_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "alert.yaml"
    path.write_text("rules:\n  - signal: mean\n")
    valid = r"'score', 'label', 'conversation_label' or 'conversation_score'"
    with pytest.raises(AlertConfigError, match=rf"rules\.0\.signal: Input should be {valid}"):
        load_alert_config(path)


def test_label_fires_on_answers_with_an_invented_claim_that_the_score_mean_lets_pass() -> None:
    # Every answer: three supported claims and one invented (0.75), hallucinated by the label rule.
    answers = [(0.75, "hallucinated")] * 20
    assert fed("score", answers) == []
    notes = fed("label", answers)
    assert [(n.state, n.severity, n.signal) for n in notes] == [("firing", "critical", "label")]
    assert notes[0].value == pytest.approx(0.0)
    assert "signal label: share of answers the label rule passes" in notes[0].summary
    assert "LLM labels" in notes[0].summary
    assert notes[0].to_json()["signal"] == "label"


def test_score_fires_on_partly_supported_answers_that_the_label_passes() -> None:
    # Every claim PARTIALLY_SUPPORTED: 0.5, faithful by the label rule (nothing unsupported).
    answers = [(0.5, "faithful")] * 20
    assert fed("label", answers) == []
    notes = fed("score", answers)
    assert [(n.state, n.signal) for n in notes] == [("firing", "score")]
    assert "signal score: mean score" in notes[0].summary


def test_a_result_without_a_known_label_counts_as_failing_below_half() -> None:
    window = EstimateWindow(10, "label")
    for score in (0.2, 0.4, 0.6, 0.9):
        window.add(record(score))  # label None: a custom metric, or an older consumer
    estimate = window.estimate(0.9)
    assert estimate is not None and estimate.value == pytest.approx(0.5) and estimate.signal == "label"


def cascade_route(with_offline_label: bool, with_offline_records: bool) -> list[EvaluationRecord]:
    """40 answers, 30 faithful. The offline judge: hallucinations 0.75 `hallucinated`; 10 faithful answers
    also `hallucinated` at 0.75 (false suspicion), the rest 1.0 `faithful`. A perfect LLM judge rescores the
    20 suspicious ones (cascade, π = 1) and every other faithful-looking one (baseline, π = 0.5)."""
    out: list[EvaluationRecord] = []
    for t in range(40):
        i = t * 13 % 40
        good = i >= 10
        offline = labelled(0.75 if i < 20 else 1.0, "hallucinated" if i < 20 else "faithful", t)
        if with_offline_records:
            out.append(offline)
        if i < 20 or i % 2 == 0:
            selection, pi = ("cascade", 1.0) if i < 20 else ("baseline", 0.5)
            llm = llm_record(offline, 1.0 if good else 0.75, selection, pi)
            update: dict[str, Any] = {"label": "faithful" if good else "hallucinated"}
            update["offline_label"] = offline.label if with_offline_label else None
            out.append(llm.model_copy(update=update))
    return out


@pytest.mark.parametrize(
    ("with_offline_label", "with_offline_records"), [(True, True), (True, False), (False, True)]
)
def test_under_label_the_llm_label_corrects_the_offline_label(
    with_offline_label: bool, with_offline_records: bool
) -> None:
    window = EstimateWindow(100, "label")
    for r in cascade_route(with_offline_label, with_offline_records):
        window.add(r)
    estimate = window.estimate(0.9)
    assert estimate is not None
    if with_offline_records:
        assert estimate.n == 40 and estimate.value == pytest.approx(0.75)  # 30 of 40 faithful
        assert estimate.unpaired == 0 and estimate.calibrated
    else:
        # LLM records alone: the 20 escalated ones (10 faithful), the 10 of the baseline paired with the
        # offline label they carry.
        assert estimate.n == 30 and estimate.value == pytest.approx(20 / 30)


def test_the_pair_is_the_offline_label_not_its_score() -> None:
    # 10 answers the offline judge alone scored (faithful); 10 of the baseline whose offline record is not
    # in the window: the offline judge labelled them hallucinated at 0.8 (one invented claim of five), the
    # LLM judge agrees. 10 of 20 faithful; pairing the LLM label with the offline score 0.8 would say 0.1.
    window = EstimateWindow(100, "label")
    for t in range(10):
        window.add(labelled(1.0, "faithful", t))
        offline = labelled(0.8, "hallucinated", 10 + t)
        llm = llm_record(offline, 0.8, "baseline", 0.5)
        window.add(llm.model_copy(update={"label": "hallucinated", "offline_label": "hallucinated"}))
    estimate = window.estimate(0.9)
    assert estimate is not None and estimate.n == 20 and estimate.value == pytest.approx(0.5)


def test_an_llm_label_with_no_offline_label_to_pair_is_left_out_and_counted() -> None:
    # An older consumer's baseline record (offline_score, no offline_label), its offline record not in the
    # window: under label it is not paired with the score.
    window = EstimateWindow(100, "label")
    for t in range(10):
        window.add(labelled(1.0, "faithful", t))
    old = labelled(0.75, "hallucinated", 20)
    window.add(llm_record(old, 0.75, "baseline", 0.5).model_copy(update={"label": "hallucinated"}))
    estimate = window.estimate(0.9)
    assert estimate is not None
    assert (estimate.n, estimate.unpaired, estimate.value) == (10, 1, pytest.approx(1.0))
    scores = EstimateWindow(100, "score")
    scores.add(llm_record(old, 0.75, "baseline", 0.5))
    assert scores.estimate(0.9) is not None  # under score, its offline_score pairs it


def test_the_in_process_alert_follows_its_signal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.alert")
    by_default = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=10)
    on_score = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=10, signal="score")
    fired = {"label": [], "score": []}  # type: dict[str, list[Notification]]
    now = datetime.now(UTC)  # the consumer's alert evaluates on the wall clock
    for t in range(10):
        fired["label"] += by_default.observe(labelled(0.75, "hallucinated", t - 10, now))
        fired["score"] += on_score.observe(labelled(0.75, "hallucinated", t - 10, now))
    assert [n.state for n in fired["label"]] == ["firing"] and fired["score"] == []
    assert "signal label" in caplog.text


def test_the_consume_flag_takes_label_or_score() -> None:
    result = CliRunner().invoke(main, ["consume", "--alert-signal", "mean"])
    assert result.exit_code == 2
    assert "'mean' is not one of 'label', 'score'" in result.output
