"""What a person paged by a drop rule reads adds up: the levels the test compared, the drop their difference
and its bound no larger, alike in the summary, the notification's fields, every sink and the stop summary;
also when the LLM judge's baseline correction reads a level past 0..1, which the alert then says."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest
import test_drop_rules as drop_rules
from alert_records import T0, llm_record, record
from test_drop_rules import Route

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertKey,
    DropConfig,
    Estimate,
    LogSink,
    Notification,
    RuleConfig,
    stop_summary,
)
from tracescore.alert._notes import score_note
from tracescore.alert._sinks import alertmanager_alert, slack_message

KEY = AlertKey("rag-api", "/billing", "faithfulness")
# The reporter's rule: `tracescore alert` with a drop rule on /billing.
DROP = DropConfig(min_drop=0.1, window_count=50, min_samples=20, normal_count=200, min_normal_samples=100)
NUMBER = r"(-?\d\.\d\d)"
# "fell 1.00 below its normal: 0.04 over 50 answers against its normal 1.04 over 168"
FELL = re.compile(rf"fell {NUMBER} below its normal: {NUMBER} over \d+ answers against its normal {NUMBER}")
BOUND = re.compile(rf"at least {NUMBER} at")
STANDING = re.compile(
    rf"{NUMBER} over \d+ answers against its normal {NUMBER}, a drop of {NUMBER} \(at least {NUMBER};"
)


def drifted() -> tuple[AlertEvaluator, list[Notification]]:
    """The reporter's three phases: healthy with the LLM judge on (its baseline passes the answers the offline
    judge wrongly fails: a correction of +0.1), healthy with the offline judge alone (every answer passes it:
    the normal reads 1.1), then a drift the offline judge fails throughout (the window reads 0.1)."""
    rule = RuleConfig(
        warning=None, critical=None, window_count=20, window_seconds=86_400, cooldown_seconds=0,
        renotify_seconds=None, no_data_seconds=None, drop=DROP,
    )  # fmt: skip
    ev = AlertEvaluator(AlertConfig(rules=[rule]))
    at, notes = T0, []
    for phase, n in (("healthy, LLM", 200), ("healthy", 200), ("drift", 60)):
        for i in range(n):
            at += timedelta(seconds=10)
            offline = record(
                0.0 if phase == "drift" or (phase == "healthy, LLM" and i % 10 == 0) else 1.0, at
            )
            ev.add(offline)
            if phase == "healthy, LLM" and i % 2 == 0:
                ev.add(llm_record(offline, 1.0, "baseline", 0.5))
            notes += ev.evaluate(KEY, at)
    reading = ev.drop_status(KEY, at)
    assert reading is not None and reading.normal > 1.0  # what the estimator reads: past 0..1
    return ev, notes


def test_a_drop_read_past_0_1_by_the_baseline_correction_is_shown_in_figures_that_add_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ev, notes = drifted()
    (page,) = [n for n in notes if n.state == "firing"]
    match, bound = FELL.search(page.summary), BOUND.search(page.summary)
    assert match and bound, page.summary
    drop, window, normal = (float(x) for x in match.groups())
    assert drop == pytest.approx(normal - window) and float(bound[1]) <= drop, page.summary
    assert normal > 1.0 and "a level past 0..1: the correction from the LLM judge's baseline" in page.summary
    # The fields say what the summary says.
    assert page.value is not None and page.normal is not None and page.drop is not None
    assert page.drop_lower is not None
    assert page.drop == pytest.approx(page.normal - page.value) and page.drop_lower <= page.drop
    assert (f"{page.value:.2f}", f"{page.normal:.2f}") == match.group(2, 3)
    assert page.drop == pytest.approx(drop, abs=0.011)
    # Every sink says it alike: the log, Alertmanager's annotation, Slack, the webhook body.
    with caplog.at_level(logging.WARNING, "tracescore.alert"):
        LogSink().send(page)
    assert page.summary in caplog.text
    assert alertmanager_alert(page)["annotations"]["summary"] == page.summary
    assert slack_message(page)["text"].endswith(page.summary)
    assert page.to_json()["drop"] == page.drop
    # And so does the summary at a stop.
    (line,) = [s for s in stop_summary(ev.standings(T0 + timedelta(seconds=4600))) if "drop rule" in s]
    standing = STANDING.search(line)
    assert standing, line
    window, normal, drop, lower = (float(x) for x in standing.groups())
    assert drop == pytest.approx(normal - window) and lower <= drop and normal > 1.0, line
    assert "a level past 0..1" in line


def test_a_drop_alert_held_by_its_hysteresis_claims_no_bound_it_does_not_have() -> None:
    route = Route(drop_rules.evaluator())
    route.answers(1500, 0.9)
    assert drop_rules.pages(route.answers(300, 0.5))
    route.answers(250, 0.84)  # back, partly: the bound under min_drop (0.1), the drop above half of it
    (held,) = [n for n in route.ev.firing(route.at) if n.alertname == drop_rules.DROP]
    lower = BOUND.search(held.summary)
    assert lower and float(lower[1]) < 0.1, held.summary
    assert ">= warning drop" not in held.summary, held.summary
    assert (
        "; held until the drop is under 0.05 in the whole window and its newest answers (now up to 0.07;"
        in (held.summary)
    ), held.summary


def test_a_threshold_alert_s_value_is_the_share_its_summary_shows() -> None:
    # The estimate is unclipped (unbiased); what a notification shows of it reads 0..1 in text and fields.
    estimate = Estimate(
        value=1.04, lower=0.97, upper=1.0, n=40, offline_n=40, llm_n=4, calibrated=True, confidence=0.9,
        signal="label",
    )  # fmt: skip
    rule = RuleConfig()
    note = score_note(KEY, rule, estimate, "resolved", "warning", T0, T0)
    assert "recovered to 1.00 [0.97, 1.00]" in note.summary and note.value == 1.0


def test_a_drop_alert_de_escalated_while_held_by_its_hysteresis_says_so() -> None:
    # Back from critical to warning with its bound under min_drop: the warning fires on only by the
    # hysteresis, which the page says, rather than "at least -0.11 ..., warning drop 0.10".
    route = Route(drop_rules.evaluator(critical_drop=0.35))
    route.answers(1500, 0.9)
    assert drop_rules.pages(route.answers(300, 0.2))
    notes = route.answers(200, 0.84)  # the window's 200 answers: back to 0.84, a drop of about 0.06
    (back,) = [n for n in notes if n.headline == "DE-ESCALATED"]
    lower = BOUND.search(back.summary)
    assert lower and float(lower[1]) < 0.1, back.summary
    assert "de-escalated from critical to warning" in back.summary
    assert "; held until the drop is under 0.05 in the whole window" in back.summary, back.summary


def test_a_drop_alert_s_resolve_compares_what_its_test_compared() -> None:
    # min_drop 0.15 resolves once the drop is under 0.075 at every length; written to two decimals the
    # resolve read "drop 0.08 < 0.07" (levels rounded, half of 0.15 rounded too).
    route = Route(drop_rules.evaluator(min_drop=0.15))
    route.answers(1500, 0.9)
    assert drop_rules.pages(route.answers(300, 0.5))
    notes = [n for _ in range(8) for n in route.answers(50, 0.86)]
    (resolved,) = [n for n in notes if n.headline == "RESOLVED"]
    compared = re.search(r"largest drop (-?\d\.\d\d\d) <= (\d\.\d+)$", resolved.summary)
    assert compared, resolved.summary
    assert float(compared[1]) <= float(compared[2]) == 0.075, resolved.summary
