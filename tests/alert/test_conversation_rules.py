"""Rules on a conversation signal: the same estimate, bound, hysteresis and notifications as answer rules,
with a conversation as the unit; answer and conversation rules never see each other's records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from alert_records import conversation, record

from tracescore.alert import AlertConfig, AlertConfigError, AlertEvaluator, AlertKey, RuleConfig
from tracescore.model import MetricStatus

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KEY = AlertKey("chat-api", "/chat", "faithfulness", "conversation")


def evaluator(signal: str = "conversation_label", **rule: Any) -> AlertEvaluator:
    settings = {
        "window_count": 20, "window_seconds": 86_400.0, "min_samples": 10, "critical": None,
        "no_data_seconds": None, **rule,
    }  # fmt: skip
    return AlertEvaluator(AlertConfig(rules=[RuleConfig(signal=signal, **settings)]))  # type: ignore[arg-type]


def feed(e: AlertEvaluator, records: list[Any]) -> list[Any]:
    notes = []
    for r in records:
        key = e.add(r)
        if key is not None:
            notes += e.evaluate(key, r.timestamp)
    return notes


def test_the_share_of_conversations_with_an_unfaithful_turn_fires_and_resolves() -> None:
    e = evaluator()
    # One unfaithful turn in four in every other conversation: 88% of answers pass, half the conversations.
    bad = [conversation(n, flagged=n % 2) for n in range(20)]
    [firing] = feed(e, bad)
    assert (firing.alertname, firing.state, firing.unit) == (
        "TracescoreConversationFaithfulnessDropped",
        "firing",
        "conversation",
    )
    assert firing.signal == "conversation_label" and firing.value == pytest.approx(0.5)
    assert (
        f"over {firing.samples} conversations" in firing.summary
        and "share of conversations with no flagged turn" in firing.summary
    )
    assert firing.labels()["unit"] == "conversation"
    good = [conversation(n, flagged=0) for n in range(20, 40)]
    [resolved] = feed(e, good)
    assert resolved.state == "resolved"


def test_the_turn_share_signal_averages_conversations() -> None:
    e = evaluator("conversation_score", warning=0.8, hysteresis=0.05)
    # Every conversation has one unfaithful turn in four: no conversation is clean, but 75% of turns pass.
    notes = feed(e, [conversation(n, flagged=1) for n in range(20)])
    assert [n.state for n in notes] == ["firing"] and notes[0].value == pytest.approx(0.75)
    assert (
        feed(evaluator("conversation_score", warning=0.7), [conversation(n, flagged=1) for n in range(20)])
        == []
    )


def test_answer_and_conversation_rules_never_see_each_others_records() -> None:
    config = AlertConfig(
        rules=[
            RuleConfig(signal="conversation_label", no_data_seconds=None),
            RuleConfig(signal="label", no_data_seconds=None),
        ]
    )
    e = AlertEvaluator(config)
    assert e.add(conversation(1, flagged=1)) == KEY
    assert e.add(record(0.1, T0, route="/chat", service="chat-api")) == AlertKey(
        "chat-api", "/chat", "faithfulness"
    )
    assert len(e) == 2
    only_answers = AlertEvaluator(AlertConfig(rules=[RuleConfig(no_data_seconds=None)]))
    assert only_answers.add(conversation(1, flagged=1)) is None and only_answers.unmatched == 1


def test_a_revised_conversation_counts_once_with_its_newest_record() -> None:
    e = evaluator()
    first = [conversation(n, flagged=1) for n in range(10)]
    revised = [
        c.model_copy(update={"revision": 1, "supersedes": 0, "label": "passed", "turns_flagged": 0})
        for c in first
    ]
    feed(e, first + revised + first)  # the older revision read again late changes nothing
    estimate = e.estimate(KEY, T0 + timedelta(hours=1))
    assert estimate is not None and (estimate.n, estimate.value) == (10, 1.0)


def test_the_llm_baseline_corrects_the_offline_conversations_and_cascade_picks_stay_out() -> None:
    llm = {"judge": "openai:gpt-4o-mini", "annotator_kind": "LLM"}
    offline = [conversation(n, flagged=0) for n in range(20)]  # the offline judge finds nothing
    # The LLM judge drew half the conversations whole (the baseline) and found an unfaithful turn in each.
    baseline = [conversation(n, flagged=1, selection="baseline", **llm) for n in range(0, 20, 2)]
    cascade = [
        conversation(n, flagged=1, selection="cascade", complete=False, turns_judged=1, **llm)
        for n in range(1, 20, 2)
    ]
    # A baseline conversation the budget cut short: not the conversation judged whole, left out.
    partial = conversation(1, flagged=1, selection="baseline", complete=False, turns_judged=2, **llm)
    e = evaluator(window_count=50)
    feed(e, offline + baseline + cascade + [partial])
    estimate = e.estimate(KEY, T0 + timedelta(hours=1))
    assert estimate is not None
    assert estimate.value == pytest.approx(0.0) and estimate.calibrated
    assert estimate.llm_n == 10 and estimate.excluded == 10


def test_a_baseline_record_of_part_of_a_conversation_is_counted_as_excluded() -> None:
    llm = {"judge": "openai:gpt-4o-mini", "annotator_kind": "LLM"}
    offline = [conversation(n, flagged=0) for n in range(5)]
    partial = conversation(2, flagged=1, selection="baseline", complete=False, turns_judged=2, **llm)
    e = evaluator(window_count=50)
    feed(e, [*offline, partial])
    estimate = e.estimate(KEY, T0 + timedelta(hours=1))
    assert estimate is not None and estimate.value == pytest.approx(1.0)
    assert (estimate.excluded, estimate.llm_n) == (1, 0)


def test_a_conversation_rule_has_no_judge_health_alert() -> None:
    e = evaluator(min_samples=1, window_count=1)
    unscored = conversation(
        1, 0, score=None, label=None, status=MetricStatus.ERROR, turns_scored=0, turns_passed=0
    )
    assert feed(e, [unscored] * 10) == []


def test_an_unknown_signal_names_the_valid_ones() -> None:
    with pytest.raises(AlertConfigError, match="conversation_label' or 'conversation_score'"):
        from tracescore.alert import load_alert_config

        load_alert_config(None, rules=[{"signal": "conversations"}])


def test_a_conversation_key_round_trips_and_keeps_apart_from_the_answers() -> None:
    assert AlertKey.decode(KEY.encode()) == KEY
    assert KEY.encode() != AlertKey(*KEY[:3]).encode()


def test_a_drop_rule_on_clean_conversations_pages_below_the_route_s_normal_and_resolves() -> None:
    """Conversations revised as they grow count once (their key is the conversation), each a unit."""
    drop = {"min_drop": 0.1, "window_count": 40, "min_samples": 20, "normal_count": 200}
    ev = evaluator(warning=None, window_count=10, drop={**drop, "min_normal_samples": 100})
    notes = []
    for n in range(400):  # healthy: 1 conversation in 5 has a flagged turn; then 3 in 5; then back
        flagged = n % 5 == 0 if n < 200 or n >= 300 else n % 5 < 3
        for turns in (2, 4):  # a revision as the conversation grows: the same unit
            key = ev.add(conversation(n, int(flagged), turns=turns, revision=turns))
            assert key == KEY
            notes += ev.evaluate(key, T0 + timedelta(minutes=n + 1))
    below = "TracescoreConversationFaithfulnessBelowNormal"
    drops = [(n.state, n.unit) for n in notes if n.alertname == below and not n.repeat]
    assert drops == [("firing", "conversation"), ("resolved", "conversation")]
    reading = ev.drop_status(KEY, T0 + timedelta(minutes=401))
    assert reading is not None and reading.whole_n + reading.normal_n <= 400  # each conversation once
