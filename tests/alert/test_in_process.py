"""The consumer's in-process alert log: the alert service's evaluator with one rule from two flags."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import pytest

from tracescore.alert import InProcessAlerts
from tracescore.model import EvaluationRecord, MetricStatus


def record(score: float, route: str = "/billing", metric: str = "faithfulness") -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=uuid.uuid4().hex, span_id=uuid.uuid4().hex[:16], service_name="rag-api",
        route=route, metric=metric, score=score, label=None, status=MetricStatus.OK, judge="offline",
        timestamp=datetime.now(UTC),
    )  # fmt: skip


def feed(alerts: InProcessAlerts, scores: list[float], **kw: str) -> list[str]:
    return [f"{n.state}:{n.route}" for s in scores for n in alerts.observe(record(s, **kw))]


def test_a_drop_fires_once_and_a_recovery_resolves_once(caplog: pytest.LogCaptureFixture) -> None:
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=10)
    caplog.set_level(logging.INFO, logger="tracescore.alert")

    assert feed(alerts, [1.0] * 10) == []
    assert feed(alerts, [0.0] * 10) == ["firing:/billing"]  # one notification, not one per low score
    assert feed(alerts, [1.0] * 10) == ["resolved:/billing"]

    assert "[FIRING] faithfulness of rag-api /billing dropped" in caplog.text
    assert "[RESOLVED]" in caplog.text


def test_routes_are_separate_and_other_metrics_are_ignored() -> None:
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=5)
    assert feed(alerts, [0.0] * 5, route="/faq") == ["firing:/faq"]
    assert feed(alerts, [1.0] * 5, route="/billing") == []
    assert feed(alerts, [0.0] * 5, metric="answer_relevancy") == []


def test_a_few_low_scores_in_a_noisy_window_do_not_fire() -> None:
    # The service's statistical guard applies here too: a mean just under the threshold over a spread of
    # scores is not evidence enough.
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=10)
    assert feed(alerts, [1.0, 0.3] * 5) == []


@pytest.mark.parametrize("threshold", [0.0, 0.3, 1.0])
def test_any_threshold_the_flag_accepts_makes_a_valid_rule(threshold: float) -> None:
    # Valid means it works as the flag says: perfect scores never fire, a window of zeros fires below any
    # threshold above 0 (and nothing can be below 0).
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=threshold, window=10)
    assert feed(alerts, [1.0] * 10) == []
    assert feed(alerts, [0.0] * 10) == ([] if threshold == 0.0 else ["firing:/billing"])


def test_with_the_cascade_on_each_answer_counts_once_and_the_llm_corrects_the_offline_judge() -> None:
    # 100 answers, 80 faithful; the offline judge scores 35 low, the LLM judge rescores those (20 really
    # hallucinated). Averaging every record (0.61) paged; the estimate (0.80) does not.
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=200)
    fired = []
    for i in (t * 37 % 100 for t in range(100)):
        offline = record(0.2 if i < 20 else 0.3 if i < 35 else 0.9)
        fired += alerts.observe(offline)
        if i < 35:
            llm = offline.model_copy(
                update={"score": 0.0 if i < 20 else 1.0, "judge": "openai:m", "annotator_kind": "LLM",
                        "selection": "cascade", "inclusion_probability": 1.0, "offline_score": offline.score}
            )  # fmt: skip
            fired += alerts.observe(llm)
    assert fired == []


def test_its_log_line_says_it_is_the_consumer_s_hint_not_the_alert_service_s_rules(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A consumer logs on the same logger as `tracescore alert`; a person reading (or alerting on) the logs
    # must tell a consumer's one-rule hint from the service's page, and learn how to turn the hint off.
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=0.7, window=10)
    caplog.set_level(logging.INFO, logger="tracescore.alert")
    feed(alerts, [0.0] * 10)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("[FIRING] faithfulness of rag-api /billing dropped"), line
    assert line.endswith(
        " (tracescore consume's own hint: its partitions' share of the route against --alert-threshold 0.7, "
        "not tracescore alert's rules; --alert-threshold 0 turns it off)"
    ), line


def test_by_default_it_runs_the_alert_service_s_default_rule(caplog: pytest.LogCaptureFixture) -> None:
    # The offline judge alone passes 55% of a healthy route's long answers: far below 0.7, no page; its
    # fall below its own normal (once learned, as the alert service learns it) pages, saying whose hint it is.
    alerts = InProcessAlerts.for_threshold("faithfulness", threshold=None, window=20)
    caplog.set_level(logging.INFO, logger="tracescore.alert")
    assert feed(alerts, [1.0] * 11 + [0.0] * 9) == []
    assert feed(alerts, ([1.0] * 11 + [0.0] * 9) * 170) == []
    assert "drop alerts armed" in caplog.text
    assert "firing:/billing" in feed(alerts, [0.0] * 300)
    (page,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[FIRING]")]
    assert "fell" in page and "below its normal" in page, page
    assert page.endswith(
        " (tracescore consume's own hint: its partitions' share of the route against the rule tracescore "
        "alert runs without a config, not tracescore alert's rules; --alert-threshold 0 turns it off)"
    ), page
    # Its own lines, not only its pages: the route's thresholds waiting and its normal learned are the
    # consumer's hint too, or they read as the alert service's in a log that holds both.
    lines = [r.getMessage() for r in caplog.records]
    assert any("thresholds wait for the LLM judge's baseline" in line for line in lines), lines
    assert any("normal learned" in line for line in lines), lines
    for line in lines:
        assert line.endswith("--alert-threshold 0 turns it off)"), line
