"""An alert whose route a changed config no longer watches ends, saying so, in every sink, instead of staying
open at the receivers that heard it fire (Alertmanager timed it out on its own; a webhook or Slack never
heard of it again)."""

from __future__ import annotations

from datetime import timedelta

import test_drop_rules as drop_rules
from alert_records import T0
from test_drop_rules import DROP, KEY, Route

from tracescore.alert import AlertConfig, AlertEvaluator, AlertKey, AlertState, RuleConfig
from tracescore.alert._sinks import alertmanager_alert, slack_message


def fired() -> dict[AlertKey, AlertState | None]:
    """/billing firing its drop alert, as the state topic holds it."""
    route = Route(drop_rules.evaluator())
    route.answers(1500, 0.9)
    assert drop_rules.pages(route.answers(300, 0.5))
    return route.ev.take_changed_states()


def restarted(rule: RuleConfig, states: dict[AlertKey, AlertState | None]) -> AlertEvaluator:
    ev = AlertEvaluator(AlertConfig(rules=[rule]))
    for key, state in states.items():
        ev.restore(key, state)
    ev.adopt_restored(lambda key: 0)  # this instance owns every partition
    return ev


def test_a_drop_alert_ends_saying_so_when_its_rule_loses_its_drop_part() -> None:
    ev = restarted(RuleConfig(warning=0.3, critical=None, no_data_seconds=None), fired())
    (ended,) = ev.tick(T0 + timedelta(days=3))
    assert (ended.alertname, ended.state, ended.headline, ended.change) == (
        DROP,
        "resolved",
        "ENDED",
        "unwatched",
    )
    assert "no longer watched" in ended.summary and "not a recovery" in ended.summary, ended.summary
    assert ev.firing(T0 + timedelta(days=3)) == []
    assert ev.tick(T0 + timedelta(days=3, seconds=5)) == []  # said once
    # Read as such everywhere: never Slack's green, Alertmanager's annotations name it.
    assert alertmanager_alert(ended)["annotations"]["headline"] == "ENDED"
    assert slack_message(ended)["attachments"][0]["color"] != "#2eb886"


def test_every_alert_of_a_route_no_rule_matches_any_more_ends_and_its_state_is_deleted() -> None:
    states = fired()
    state = states[KEY]
    assert state is not None
    state.level, state.level_since = "critical", T0  # its threshold fired too
    ev = restarted(RuleConfig(routes=["/search"]), states)
    ended = ev.tick(T0 + timedelta(days=3))
    assert sorted((n.alertname, n.severity, n.headline) for n in ended) == [
        ("TracescoreFaithfulnessBelowNormal", "warning", "ENDED"),
        ("TracescoreFaithfulnessDropped", "critical", "ENDED"),
    ]
    assert all(f"{KEY.service} {KEY.route}" in n.summary for n in ended)
    assert ev.take_changed_states() == {KEY: None}  # a restart does not end them again


def test_a_restart_after_the_end_of_a_drop_alert_does_not_end_it_again() -> None:
    ev = restarted(RuleConfig(warning=0.3, critical=None, no_data_seconds=None), fired())
    assert len(ev.tick(T0 + timedelta(days=3))) == 1
    saved = ev.take_changed_states()
    assert list(saved) == [KEY] and saved[KEY] is not None and saved[KEY].drop is None
    again = restarted(RuleConfig(warning=0.3, critical=None, no_data_seconds=None), saved)
    assert again.tick(T0 + timedelta(days=3, seconds=5)) == []


def test_a_no_data_alert_ends_saying_so_when_its_rule_turns_no_data_off() -> None:
    # A platform's tenant gone for good fires its no-data alert until it returns, and is never evicted while
    # it fires; the way out is `no_data_seconds: null` on its rule. Until then the restart kept the alert
    # firing forever: never resolved, and re-sent to Alertmanager with every resend.
    rule = RuleConfig(warning=0.3, critical=None, no_data_seconds=600)
    route = Route(AlertEvaluator(AlertConfig(rules=[rule])))
    route.answers(3, 1.0)
    (quiet,) = route.ev.tick(route.at + timedelta(hours=1))
    assert (quiet.alertname, quiet.state) == ("TracescoreNoData", "firing")
    later = route.at + timedelta(days=3)
    ev = restarted(rule.model_copy(update={"no_data_seconds": None}), route.ev.take_changed_states())
    (ended,) = ev.tick(later)
    assert (ended.alertname, ended.state, ended.headline) == ("TracescoreNoData", "resolved", "ENDED")
    assert "its rule has no no-data alert any more (no_data_seconds)" in ended.summary, ended.summary
    assert ev.firing(later) == []  # Alertmanager is not sent it again
    again = restarted(rule.model_copy(update={"no_data_seconds": None}), ev.take_changed_states())
    assert again.tick(later + timedelta(seconds=5)) == [] and again.firing(later) == []  # said once
