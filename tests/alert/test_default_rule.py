"""The rule run without a config: its thresholds read an estimate only once the LLM judge's baseline
calibrates it by enough of the route's pairs; before, the route's level pages nothing, and the stop summary
says why."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from alert_records import T0, llm_record, record

from tracescore.alert import AlertConfig, AlertEvaluator, AlertKey, default_rule
from tracescore.alert._estimate import TUNING_PAIRS

KEY = AlertKey("rag-api", "/billing", "faithfulness")


def fed(evaluator: AlertEvaluator, pairs: int, answers: int = 40) -> list[str]:
    """`answers` the offline judge fails, the LLM judge's baseline (its inclusion probability 1/2) agreeing
    on the first `pairs`: calibrated, the level 0. The alerts that fired."""
    out = []
    for i in range(answers):
        offline = record(0.0, T0 + timedelta(seconds=i))
        batch = [offline] + ([llm_record(offline, 0.0, "baseline", 0.5)] if i < pairs else [])
        for r in batch:
            evaluator.add(r)
            notes = evaluator.evaluate(KEY, r.timestamp)
            out += [f"{n.alertname}:{n.severity}" for n in notes if n.state == "firing"]
    return out


def test_the_thresholds_wait_for_enough_pairs_then_read_the_calibrated_estimate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.alert")
    few = AlertEvaluator(AlertConfig.model_construct(rules=[default_rule()]))
    assert fed(few, pairs=TUNING_PAIRS - 1) == []  # calibrated by 9 pairs: a few answers' correction
    estimate = few.estimate(KEY, T0 + timedelta(seconds=40))
    assert estimate is not None and estimate.calibrated and not estimate.settled
    (standing,) = few.standings(T0 + timedelta(seconds=40))
    waits = "thresholds wait for the LLM judge's baseline: 9 of the 10 pairs it needs"
    assert waits in standing.describe()
    # Its drop part is still learning the route's normal (the cold start): the line says from when it pages.
    meanwhile = (
        "drop alerts watch it meanwhile, once its normal is learned (after 3,000 answers at the earliest)"
    )
    assert f"rag-api /billing faithfulness: {waits}; {meanwhile}\n" in caplog.text

    enough = AlertEvaluator(AlertConfig.model_construct(rules=[default_rule()]))
    assert fed(enough, pairs=TUNING_PAIRS) == ["TracescoreFaithfulnessDropped:critical"]
    assert "calibrated by the LLM judge's baseline (10 pairs); thresholds apply" in caplog.text
