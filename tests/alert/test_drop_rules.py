"""Drop rules: a route's window against its own trailing normal. When they page and resolve, what they say,
and the bad input of issue 34: a cold start, a bad deploy, a day without traffic, a burst, a long incident,
a slow decline; the state a restart keeps, and each answer counted once."""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import Any

import pytest
from alert_records import T0, llm_record, record

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertKey,
    DropConfig,
    Notification,
    RuleConfig,
    stop_summary,
)

KEY = AlertKey("rag-api", "/billing", "faithfulness")
DROP = "TracescoreFaithfulnessBelowNormal"
# Small windows so the tests stay short: the window 200 answers, the normal up to 1,000 (ready from 400).
SMALL = {
    "min_drop": 0.1,
    "window_count": 200,
    "min_samples": 50,
    "normal_count": 1000,
    "min_normal_samples": 400,
    "confidence": 0.999,
}


def evaluator(threshold: float | None = None, **drop: Any) -> AlertEvaluator:
    rule = RuleConfig(
        warning=threshold,
        critical=None,
        window_count=20,
        window_seconds=86_400,
        cooldown_seconds=0,
        renotify_seconds=None,
        no_data_seconds=None,
        drop=DropConfig(**{**SMALL, **drop}),
    )
    return AlertEvaluator(AlertConfig(rules=[rule]))


class Route:
    """One route's answers, one a minute, each faithful with the share given."""

    def __init__(self, ev: AlertEvaluator, seed: int = 1) -> None:
        self.ev = ev
        self.rng = random.Random(seed)
        self.at = T0
        self.notes: list[Notification] = []
        self.records: list[Any] = []

    def answers(self, n: int, share: float, every: timedelta = timedelta(minutes=1)) -> list[Notification]:
        out = []
        for _ in range(n):
            self.at += every
            self.records.append(record(1.0 if self.rng.random() < share else 0.0, self.at))
            key = self.ev.add(self.records[-1])
            assert key == KEY
            out += self.ev.evaluate(KEY, self.at)
        self.notes += out
        return out

    def status(self) -> Any:
        return self.ev.drop_status(KEY, self.at)


def pages(notes: list[Notification], alertname: str = DROP) -> list[Notification]:
    return [n for n in notes if n.alertname == alertname and n.state == "firing" and not n.repeat]


def test_a_credible_drop_below_the_normal_pages_once_says_why_and_resolves_on_recovery() -> None:
    route = Route(evaluator())
    assert pages(route.answers(1500, 0.9)) == []
    notes = route.answers(300, 0.5)
    (page,) = pages(notes)
    assert page.severity == "warning" and page.signal == "label"
    assert page.normal == pytest.approx(0.9, abs=0.03) and page.normal_samples is not None
    assert page.drop is not None and page.drop_lower is not None and page.drop_lower >= 0.1
    assert page.value == pytest.approx(page.normal - page.drop)
    assert "below its normal" in page.summary and "uncalibrated: offline judge only" in page.summary
    assert page.calibrated is False
    resolved = [n for n in route.answers(400, 0.9) if n.state == "resolved"]
    assert [(n.alertname, n.change) for n in resolved] == [(DROP, None)]
    assert "back to its normal" in resolved[0].summary
    assert pages(route.notes) == [page]


def test_a_new_route_says_it_is_learning_its_normal_and_never_pages_on_its_cold_start(
    caplog: pytest.LogCaptureFixture,
) -> None:
    route = Route(evaluator())
    with caplog.at_level(logging.INFO, "tracescore.alert"):
        # A route born bad: no healthy normal to fall from, so no drop page (a threshold is for that).
        route.answers(300, 0.3)
        assert route.status().status == "learning"
        assert "normal learned" not in caplog.text
        assert pages(route.answers(600, 0.3)) == []
    assert route.status().status == "ready"
    assert "normal learned" in caplog.text and "drop alerts armed" in caplog.text
    assert route.status().normal < 0.4  # what it learned: the bad deploy's level


def test_a_route_too_quiet_for_its_drop_rule_to_arm_says_so_once_naming_what_to_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # 400 answers to learn (min_normal_samples), the normal keeps 7 days (normal_seconds): a route of 30
    # answers a day never gets there. A route of 100 a day does, within the rule's, the drop window's and the
    # normal's spans (1 + 1 + 7 days) the warning waits for.
    quiet, busy = Route(evaluator()), Route(evaluator())
    stuck = "drop rule still learning its normal"
    with caplog.at_level(logging.INFO, "tracescore.alert"):
        quiet.answers(8 * 30, 1.0, every=timedelta(minutes=48))
        busy.answers(9 * 100, 1.0, every=timedelta(minutes=14.4))
        assert stuck not in caplog.text  # not before it could have armed
        assert busy.status().status == "ready"
        quiet.answers(4 * 30, 1.0, every=timedelta(minutes=48))
        quiet.ev.tick(quiet.at + timedelta(hours=1))
    assert quiet.status().status == "learning"
    (warning,) = [r for r in caplog.records if stuck in r.getMessage()]  # once, not at every evaluation
    said = warning.getMessage()
    assert warning.levelno == logging.WARNING and said.startswith("rag-api /billing faithfulness: " + stuck)
    assert "after 9" in said and "of the 400 answers it needs (drop.min_normal_samples)" in said, said
    assert "lower drop.min_normal_samples or raise drop.normal_seconds" in said, said
    state = quiet.ev.state_of(KEY)
    assert state is not None and state.drop is not None and state.drop.learning_since is not None
    (line,) = stop_summary(quiet.ev.standings(quiet.at))[1:]
    assert "too few per normal_seconds to ever arm: lower min_normal_samples or raise normal_seconds" in line


def test_a_bad_deploy_at_the_start_is_the_threshold_part_s_to_catch() -> None:
    route = Route(evaluator(threshold=0.7))
    notes = route.answers(400, 0.3)
    assert [n.alertname for n in pages(notes, "TracescoreFaithfulnessDropped")] == [
        "TracescoreFaithfulnessDropped"
    ]
    assert pages(notes) == []


def test_a_day_without_traffic_keeps_the_normal_and_the_window_starts_again() -> None:
    route = Route(evaluator(window_seconds=3600))
    route.answers(1500, 0.9)
    before = route.status()
    route.at += timedelta(days=1)
    assert route.ev.tick(route.at) == []  # nothing to judge: no page, no resolve
    quiet = route.status()
    assert quiet.status == "too_few" and quiet.normal_n >= min(before.normal_n, SMALL["normal_count"])
    assert pages(route.answers(200, 0.9)) == []  # back at its level: quiet
    assert len(pages(route.answers(300, 0.4))) == 1  # then below it: a page


def test_a_burst_of_10000_bad_answers_in_a_minute_pages_once_and_never_becomes_the_normal() -> None:
    route = Route(evaluator())
    route.answers(1500, 0.9)
    normal = route.status().normal
    notes = route.answers(10_000, 0.4, every=timedelta(milliseconds=6))
    assert len(pages(notes)) == 1
    # Held from the first sign of the drop: the incident is not learned (a few healthy answers may be).
    assert route.status().normal == pytest.approx(normal, abs=0.01)
    state = route.ev.state_of(KEY)
    assert state is not None and state.drop is not None
    assert len(state.model_dump_json()) < 16_000  # sums, not answers: the state fits a Kafka message
    assert [n.state for n in route.answers(600, 0.9) if n.alertname == DROP] == ["resolved"]


def test_a_long_incident_never_poisons_the_normal_and_resolves_when_the_route_recovers() -> None:
    route = Route(evaluator())
    route.answers(1500, 0.9)
    normal = route.status().normal
    route.answers(3000, 0.5)  # three normals long
    assert route.status().normal == pytest.approx(normal, abs=0.01)
    assert len(pages(route.notes)) == 1
    assert [n.state for n in route.answers(600, 0.9) if n.alertname == DROP] == ["resolved"]


def test_a_decline_is_caught_because_the_normal_holds_while_the_window_is_below_it() -> None:
    # 0.95 -> 0.65, 0.02 every 100 answers: each step small, the window drifts min_drop below the normal,
    # which then holds (the whole decline would otherwise be learned as it came).
    route = Route(evaluator(floor_seconds=None, sustained_every=None))  # the window test's own hold
    route.answers(1500, 0.95)
    for share in [0.95 - 0.02 * i for i in range(1, 16)]:
        route.answers(100, share)
    (page,) = pages(route.notes)
    assert page.normal is not None and page.normal > 0.8 and page.value is not None and page.value < 0.7


def test_a_decline_too_slow_for_the_normal_to_hold_is_caught_by_the_floor() -> None:
    slow = [0.95 - 0.0025 * i for i in range(1, 121)]  # 0.95 -> 0.65 over 12,000 answers
    # The window test alone (the sustained test would page on the held normal before the floor is needed).
    windowed = {"relearn_after_seconds": None, "sustained_every": None}
    followed = Route(evaluator(floor_seconds=None, **windowed), seed=2)
    floored = Route(evaluator(floor_seconds=30 * 86_400, **windowed), seed=2)
    for route in (followed, floored):
        route.answers(1500, 0.95)
        for share in slow:
            route.answers(100, share)
    assert pages(followed.notes) == []  # the normal follows a decline this slow
    (page,) = pages(floored.notes)
    assert "its best normal of the last 30 days" in page.summary


def test_a_normal_held_past_relearn_after_is_accepted_as_the_new_normal_and_says_so() -> None:
    route = Route(evaluator(relearn_after_seconds=86_400))
    route.answers(1500, 0.9)
    route.answers(3000, 0.5)  # over two days below
    accepted = [n for n in route.notes if n.change == "accepted"]
    assert len(accepted) == 1 and accepted[0].state == "resolved" and accepted[0].alertname == DROP
    assert "accepted as the new normal" in accepted[0].summary
    assert "stayed below its normal for 1 day: " in accepted[0].summary, "one day, not `1 days`"
    assert len(pages(route.notes)) == 1
    assert pages(route.answers(1500, 0.5)) == []  # its new level is its normal now


def test_a_drop_past_critical_escalates_and_says_so() -> None:
    route = Route(evaluator(critical_drop=0.35))
    route.answers(1500, 0.9)
    route.answers(150, 0.7)
    notes = route.answers(300, 0.2)
    changed = [n for n in notes if n.change == "escalated"]
    assert [(n.headline, n.severity) for n in changed] == [
        ("ESCALATED", "critical"),
        ("SUPERSEDED", "warning"),
    ]
    assert "escalated from warning to critical" in changed[0].summary
    assert "superseded by critical, not recovered" in changed[1].summary


def test_threshold_and_drop_parts_of_one_rule_alert_apart() -> None:
    route = Route(evaluator(threshold=0.7))
    route.answers(1500, 0.9)
    names = {n.alertname for n in pages(route.answers(300, 0.2), "TracescoreFaithfulnessDropped")}
    names |= {n.alertname for n in pages(route.notes)}
    assert names == {"TracescoreFaithfulnessDropped", DROP}


def test_a_restart_keeps_the_normal_and_counts_no_answer_twice() -> None:
    ev = evaluator()
    route = Route(ev)
    route.answers(1500, 0.9)
    before = route.status()
    state = ev.state_of(KEY)
    assert state is not None and state.drop is not None and state.drop.counted_until is not None
    # A new instance: the state from the state topic, then the last minutes read again, as the service does.
    again = evaluator()
    again.restore(KEY, type(state).model_validate_json(state.model_dump_json()))
    for r in route.records:
        if r.timestamp > route.at - timedelta(minutes=30):
            again.add(r)
    after = again.drop_status(KEY, route.at)
    assert after is not None and after.status == "ready"
    assert (after.normal_n, after.whole_n) == (before.normal_n, before.whole_n)
    assert after.normal == pytest.approx(before.normal)


def test_a_late_llm_record_of_a_counted_answer_replaces_it_instead_of_adding_one() -> None:
    ev = evaluator()
    route = Route(ev)
    first = record(1.0, route.at + timedelta(seconds=1))
    ev.add(first)
    route.at += timedelta(seconds=1)
    route.answers(40, 0.9)  # the first answer left the rule's window: counted
    counted = route.status().whole_n
    late = llm_record(first, 0.0, "cascade", 1.0, at=route.at + timedelta(seconds=1))
    ev.add(late)
    ev.evaluate(KEY, route.at + timedelta(seconds=1))
    route.answers(40, 0.9)
    assert route.status().whole_n == counted + 40  # one answer, its LLM verdict replacing the offline one
    state = ev.state_of(KEY)
    assert state is not None and state.drop is not None
    buckets = [*state.drop.recent, *state.drop.normal]
    assert sum(b.moments.c_n for b in buckets) == 1  # counted as the LLM judge's (stratum C), once


def test_answers_read_out_of_order_older_than_the_rule_s_window_are_counted_all_the_same() -> None:
    # The routes topic interleaves partitions: a batch of older answers arrives after newer ones.
    ev = evaluator()
    newer = [record(1.0, T0 + timedelta(minutes=100 + i)) for i in range(30)]
    older = [record(1.0, T0 + timedelta(minutes=i)) for i in range(60)]
    for r in newer + older:
        ev.add(r)
    reading = ev.drop_status(KEY, T0 + timedelta(minutes=200))
    assert reading is not None
    assert reading.whole_n + reading.normal_n == 90  # each counted once, none lost


def test_a_quiet_tick_writes_no_state_but_moving_buckets_do() -> None:
    ev = evaluator()
    route = Route(ev)
    route.answers(1500, 0.9)
    ev.take_changed_states()
    assert ev.take_changed_states() == {}
    assert ev.tick(route.at + timedelta(seconds=1)) == []
    assert ev.take_changed_states() == {}  # nothing moved: the state topic is not written every tick
    ev.tick(route.at + timedelta(days=2))  # the window's answers age out into the normal
    assert list(ev.take_changed_states()) == [KEY]


def test_a_threshold_removed_from_the_rule_while_it_fired_resolves_instead_of_firing_forever() -> None:
    from tracescore.alert import AlertState

    ev = evaluator()  # a drop rule only: its threshold was taken out of the config
    ev.restore(KEY, AlertState(level="warning", level_since=T0, notified_at=T0))
    route = Route(ev)
    notes = route.answers(30, 0.9)
    assert [(n.alertname, n.state) for n in notes] == [("TracescoreFaithfulnessDropped", "resolved")]
    assert ev.firing(route.at) == []
