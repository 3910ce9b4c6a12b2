"""AlertEvaluator: when an alert fires, resolves, repeats and stays quiet, on an explicit clock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alert_records import T0, evaluator, record

from tracescore.alert import AlertEvaluator, AlertKey, EstimateWindow, Notification
from tracescore.model import MetricStatus

KEY = AlertKey("rag-api", "/billing", "faithfulness")


def feed(
    ev: AlertEvaluator, scores: list[float | None], start_s: float = 0, route: str = "/billing"
) -> list[Notification]:
    out = []
    for i, score in enumerate(scores):
        at = T0 + timedelta(seconds=start_s + i)
        key = ev.add(record(score, at, route=route))
        assert key is not None
        out += ev.evaluate(key, at)
    return out


def test_fires_once_when_the_window_is_confidently_below_the_threshold() -> None:
    ev = evaluator()
    notes = feed(ev, [0.2, 0.3, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    assert [(n.state, n.severity, n.alertname) for n in notes] == [
        ("firing", "warning", "TracescoreFaithfulnessDropped")
    ]
    assert notes[0].bound is not None and notes[0].bound < 0.7
    assert notes[0].labels()["tracescore_route"] == "/billing"


def test_needs_the_minimum_sample_count() -> None:
    assert feed(evaluator(), [0.0, 0.0, 0.0, 0.0]) == []


def test_a_noisy_window_whose_mean_is_barely_low_does_not_fire() -> None:
    # Mean 0.65 but the scores swing between 0.3 and 1.0: the upper bound is above 0.7.
    scores = [1.0, 0.3, 1.0, 0.3, 1.0, 0.3]
    window = EstimateWindow(10)
    for score in scores:
        window.add(record(score))
    estimate = window.estimate(0.9)
    assert estimate is not None and estimate.value < 0.7 < estimate.upper and not estimate.calibrated
    assert feed(evaluator(), scores) == []


def test_de_escalates_to_warning_then_resolves_only_above_threshold_plus_hysteresis() -> None:
    ev = evaluator(window_count=6, min_samples=6)
    notes = feed(ev, [0.1] * 6)
    assert [(n.state, n.severity) for n in notes] == [("firing", "critical")]
    # Back to 0.6-ish: above critical (0.4 + 0.05) but still below warning: de-escalated, not recovered. The
    # critical alert's resolve (Alertmanager ends it by it) says it was superseded, never "recovered".
    notes = feed(ev, [0.6] * 6, start_s=10)
    assert [(n.headline, n.severity) for n in notes] == [
        ("DE-ESCALATED", "warning"),
        ("SUPERSEDED", "critical"),
    ]
    assert [(n.state, n.change) for n in notes] == [("firing", "de-escalated"), ("resolved", "de-escalated")]
    assert (notes[0].from_severity, notes[1].to_severity) == ("critical", "warning")
    assert "de-escalated from critical to warning" in notes[0].summary
    assert "critical superseded by warning" in notes[1].summary
    assert all("recovered to" not in n.summary for n in notes)
    # 0.72 is above 0.7 but inside the hysteresis band: still firing, no flapping.
    assert feed(ev, [0.72] * 6, start_s=20) == []
    notes = feed(ev, [0.9] * 6, start_s=30)
    assert [(n.state, n.severity) for n in notes] == [("resolved", "warning")]
    assert notes[0].ends_at is not None


def test_escalation_from_warning_to_critical_reads_as_an_escalation_never_as_a_recovery() -> None:
    ev = evaluator(window_count=6, min_samples=6)
    assert [(n.state, n.severity) for n in feed(ev, [0.6] * 6)] == [("firing", "warning")]
    notes = feed(ev, [0.1] * 6, start_s=10)
    assert [(n.headline, n.state, n.severity) for n in notes] == [
        ("ESCALATED", "firing", "critical"),
        ("SUPERSEDED", "resolved", "warning"),
    ]
    assert "escalated from warning to critical" in notes[0].summary
    assert "warning superseded by critical" in notes[1].summary and "not recovered" in notes[1].summary
    assert all("recovered to" not in n.summary for n in notes)
    assert notes[1].ends_at is not None  # Alertmanager ends the warning alert by it


def test_cooldown_holds_a_refire_after_resolve() -> None:
    ev = evaluator(window_count=5, min_samples=5, cooldown_seconds=300, critical=None)
    feed(ev, [0.1] * 5)
    assert [n.state for n in feed(ev, [1.0] * 5, start_s=10)] == ["resolved"]
    assert feed(ev, [0.1] * 5, start_s=20) == []  # within 300 s of the resolve
    assert ev.suppressed_by_cooldown > 0
    assert [n.state for n in feed(ev, [0.1] * 5, start_s=400)] == ["firing"]


def test_renotifies_while_firing_and_ages_out_old_scores() -> None:
    ev = evaluator(renotify_seconds=60, no_data_seconds=None)
    feed(ev, [0.1] * 5)
    assert ev.tick(T0 + timedelta(seconds=30)) == []
    repeat = ev.tick(T0 + timedelta(seconds=70))
    assert [(n.state, n.repeat) for n in repeat] == [("firing", True)]
    # After the window (900 s) the scores are gone: too little evidence, the alert holds rather than resolves.
    assert ev.tick(T0 + timedelta(seconds=1000))[0].samples == 0


def test_the_window_holds_the_newest_scores_whatever_order_they_arrive_in() -> None:
    # After lag, a route's records arrive interleaved from several partitions. Healthy answers from the last
    # minute are read first, then failures from ten minutes ago: the window must stay the newest answers.
    ev = evaluator(window_count=6, min_samples=6, no_data_seconds=None)
    assert feed(ev, [1.0] * 6, start_s=600) == []
    assert feed(ev, [0.0] * 6, start_s=0) == []
    now = T0 + timedelta(seconds=610)
    assert ev.tick(now) == []
    # And failures newer than the window's scores, read late, do displace them.
    notes = feed(ev, [0.0] * 6, start_s=620)
    assert ("firing", "critical") in [(n.state, n.severity) for n in notes]


def test_scores_read_out_of_order_age_out_by_their_own_time() -> None:
    ev = evaluator(window_count=10, min_samples=3, window_seconds=100, no_data_seconds=None, critical=None)
    for offset in (50, 10, 90, 30, 70):  # read out of order
        key = ev.add(record(0.1, T0 + timedelta(seconds=offset)))
    assert key is not None
    # At 135 s the window reaches back to 35 s: 50, 70 and 90 remain, not whatever was read first.
    notes = ev.evaluate(key, T0 + timedelta(seconds=135))
    assert [(n.state, n.samples) for n in notes] == [("firing", 3)]


def test_no_data_alert_fires_for_a_quiet_route_and_resolves_when_records_return() -> None:
    ev = evaluator(no_data_seconds=600)
    feed(ev, [0.9] * 5)
    assert ev.tick(T0 + timedelta(seconds=300)) == []
    notes = ev.tick(T0 + timedelta(seconds=700))
    assert [(n.alertname, n.state) for n in notes] == [("TracescoreNoData", "firing")]
    notes = feed(ev, [0.9], start_s=800)
    assert [(n.alertname, n.state) for n in notes] == [("TracescoreNoData", "resolved")]


def test_judge_outage_is_a_judge_alert_never_a_faithfulness_drop() -> None:
    ev = evaluator()
    feed(ev, [0.9] * 5)
    out = []
    for i in range(10):
        at = T0 + timedelta(seconds=10 + i)
        err = record(None, at, status=MetricStatus.ERROR, reason="judge call timed out (ReadTimeout)")
        out += ev.evaluate(ev.add(err), at)  # type: ignore[arg-type]
    assert [(n.alertname, n.state) for n in out] == [("TracescoreJudgeUnhealthy", "firing")]
    assert "timeouts" in out[0].summary and "missing, not low" in out[0].summary
    out = feed(ev, [0.9] * 50, start_s=30)
    assert [(n.alertname, n.state) for n in out] == [("TracescoreJudgeUnhealthy", "resolved")]


def test_a_model_judge_down_behind_a_1_percent_baseline_pages_and_stays_firing_until_it_answers() -> None:
    # The offline judge scores every answer; the LLM judge one in a hundred (the baseline), and it is down.
    # One window for both read ~1% failed and never paged (a dead judge, found on call); then "healthy
    # again" while it was still down.
    ev = evaluator()
    out: list[Notification] = []

    def answer(i: int, llm_ok: bool | None) -> None:
        at = T0 + timedelta(seconds=i)
        out.extend(ev.evaluate(ev.add(record(0.9, at)), at))  # type: ignore[arg-type]
        if llm_ok is not None:
            reason = None if llm_ok else "HTTP 503 after 4 attempts"
            offline = record(0.9 if llm_ok else None, at, reason=reason)
            llm = offline.model_copy(update={"judge": "openai:gpt-4o-mini", "annotator_kind": "LLM"})
            out.extend(ev.evaluate(ev.add(llm), at))  # type: ignore[arg-type]

    for i in range(600):
        answer(i, llm_ok=False if i % 100 == 0 else None)
    assert [(n.alertname, n.state) for n in out] == [("TracescoreJudgeUnhealthy", "firing")]
    assert "5 of 5 evaluations failed" in out[0].summary
    out.clear()
    for i in range(600, 900):  # still down, the offline judge's answers keep coming
        answer(i, llm_ok=False if i % 100 == 0 else None)
    assert out == []
    for i in range(900, 1900):  # the judge answers again
        answer(i, llm_ok=True if i % 100 == 0 else None)
    assert [(n.alertname, n.state) for n in out] == [("TracescoreJudgeUnhealthy", "resolved")]


def test_routes_are_independent_and_unmatched_metrics_are_counted() -> None:
    ev = evaluator()
    notes = feed(ev, [0.1] * 5, route="/billing") + feed(ev, [0.95] * 5, route="/support")
    assert {(n.route, n.state) for n in notes} == {("/billing", "firing")}
    assert ev.add(record(0.1, metric="answer_relevancy")) is None
    assert ev.unmatched == 1


def test_thousands_of_routes_stay_bounded_evicting_idle_ones_first() -> None:
    ev = evaluator(max_routes=50)
    feed(ev, [0.1] * 5, route="/firing")
    for i in range(2000):
        ev.add(record(0.9, T0 + timedelta(seconds=i), route=f"/r{i}"))
    assert len(ev) == 50
    assert ev.evicted == 2000 + 1 - 50
    assert any(n.route == "/firing" for n in ev.firing(T0))  # the firing route was kept


@pytest.mark.parametrize("restored_level", ["warning", "ok"])
def test_restored_state_is_not_renotified_and_recovery_resolves(restored_level: str) -> None:
    from tracescore.alert import AlertState

    ev = evaluator()
    ev.restore(KEY, AlertState(level=restored_level, level_since=T0, notified_at=T0))
    for i in range(5):  # the rebuilt window: still low
        ev.add(record(0.5, T0 + timedelta(seconds=i)))
    notes = ev.evaluate(KEY, T0 + timedelta(seconds=10))
    assert [n.state for n in notes] == ([] if restored_level == "warning" else ["firing"])


def test_a_restored_route_that_stays_quiet_gets_its_no_data_alert_and_keeps_firing() -> None:
    from tracescore.alert import AlertState

    ev = evaluator(no_data_seconds=600)
    other = AlertKey("rag-api", "/elsewhere", "faithfulness")
    ev.restore(KEY, AlertState(level="warning", level_since=T0, notified_at=T0, last_seen=T0))
    ev.restore(other, AlertState(last_seen=T0))
    ev.adopt_restored(lambda key: 3 if key == KEY else None)  # this instance owns KEY's partition only
    assert len(ev) == 1
    notes = ev.tick(T0 + timedelta(seconds=700))
    assert [(n.alertname, n.state) for n in notes] == [("TracescoreNoData", "firing")]
    assert [(n.alertname, n.state) for n in ev.firing(T0)] == [
        ("TracescoreFaithfulnessDropped", "firing"),
        ("TracescoreNoData", "firing"),
    ]
