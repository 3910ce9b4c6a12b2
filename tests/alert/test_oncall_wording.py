"""What the person paged reads, beyond the first page: reminders and Alertmanager's re-sends of an alert whose
route went quiet or hovers in the hysteresis band never read as a fresh measurement; the bound compared with
the threshold reads as compared; a lasting drop that became the route's normal reads as such, never as a
recovery; every firing page says what to run first, its names matched literally."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from alert_records import T0, record

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertKey,
    AlertState,
    DropConfig,
    LogSink,
    Notification,
    RuleConfig,
    SlackSink,
    SlackSinkConfig,
)
from tracescore.alert._notes import first_step
from tracescore.alert._sinks import alertmanager_alert
from tracescore.alert.testing import WebhookReceiver

THRESHOLD, DROP = "TracescoreFaithfulnessDropped", "TracescoreFaithfulnessBelowNormal"


class Route:
    """rag-api /billing under one rule (threshold 0.7 and a drop part), one answer every 2 seconds."""

    def __init__(self, **drop: object) -> None:
        rule = RuleConfig(
            signal="score", window_count=20, min_samples=10, warning=0.7, critical=0.4, cooldown_seconds=0,
            renotify_seconds=600, no_data_seconds=300,
            drop=DropConfig(min_drop=0.1, window_count=20, min_samples=10, normal_count=100,
                            min_normal_samples=50, window_seconds=3600, **drop),  # type: ignore[arg-type]
        )  # fmt: skip
        self.evaluator = AlertEvaluator(AlertConfig(rules=[rule]))
        self.at = T0

    def answers(self, score: float, n: int) -> list[Notification]:
        out = []
        for _ in range(n):
            self.at += timedelta(seconds=2)
            key = self.evaluator.add(record(score, self.at))
            assert key is not None
            out += self.evaluator.evaluate(key, self.at)
        return out

    def quiet(self, minutes: int) -> tuple[list[Notification], datetime]:
        """Ticks every 5 minutes for `minutes` without an answer."""
        out, now = [], self.at
        for _ in range(minutes // 5):
            now += timedelta(minutes=5)
            out += self.evaluator.tick(now)
        return out, now


def test_reminders_of_a_route_gone_quiet_say_nothing_was_read_not_a_level_of_zero_answers() -> None:
    route = Route()
    route.answers(1.0, 150)
    fired = route.answers(0.5, 20)
    assert {n.alertname for n in fired if n.headline == "FIRING"} == {THRESHOLD, DROP}
    later, now = route.quiet(90)
    reminders = [n for n in later if n.repeat and n.alertname in (THRESHOLD, DROP)]
    resent = [n for n in route.evaluator.firing(now) if n.alertname in (THRESHOLD, DROP)]
    last = {n.alertname: n.summary for n in reminders}
    assert last[THRESHOLD] == (
        "faithfulness of rag-api /billing still warning, below the warning threshold 0.70 when last read: no "
        "answers in its window (the last 15 minutes), so nothing shows it recovered yet (signal score: mean "
        "score)"
    )
    assert last[DROP] == (
        "faithfulness of rag-api /billing still warning, below its normal (1.00 over 109; warning drop 0.10) "
        "when last read: no answers in its window, so nothing shows it back at its normal yet"
    )
    for note in reminders + resent:
        assert "n/a" not in note.summary and "over 0 answers" not in note.summary, note.summary
        assert "recovered to" not in note.summary and note.state == "firing"
    assert {n.summary for n in resent} <= set(last.values()), "Alertmanager's copy reads alike"


def test_a_reminder_held_by_the_hysteresis_says_so_instead_of_a_false_comparison() -> None:
    route = Route()
    route.answers(0.5, 20)
    route.answers(0.72, 20)  # above the threshold, below threshold + hysteresis: still firing
    (reminder,) = [n for n in route.quiet(10)[0] if n.alertname == THRESHOLD and n.repeat]
    assert reminder.summary.endswith(
        "(signal score: mean score; upper bound 0.72, no longer below the warning threshold 0.70: held until "
        "it is back at 0.75)"
    ), reminder.summary


def test_a_bound_just_under_the_threshold_reads_as_under_it() -> None:
    (page,) = [n for n in Route().answers(0.698, 20) if n.alertname == THRESHOLD]
    assert "upper bound 0.698 < warning threshold 0.700" in page.summary, page.summary


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as r:
        yield r


def test_a_drop_accepted_as_the_new_normal_reads_so_in_every_sink_never_as_a_recovery(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    route = Route(relearn_after_seconds=3 * 3600, normal_seconds=86_400)
    route.answers(1.0, 150)
    route.answers(0.5, 20)
    later, _ = route.quiet(200)  # the route stopped: its window is empty when the normal is given up
    (accepted,) = [n for n in later if n.change == "accepted"]
    assert accepted.headline == "ACCEPTED" and accepted.first_step is None
    assert accepted.summary == (
        "faithfulness of rag-api /billing stayed below its normal for 3 hours: the level it comes back at is "
        "accepted as the new normal, learned from its next answers (no drop alert until it holds 50; the old "
        "one was 1.00 over 109)"
    )
    with caplog.at_level(logging.INFO, "tracescore.alert"):
        LogSink().send(accepted)
    assert caplog.records[-1].getMessage().startswith("[ACCEPTED] faithfulness of rag-api /billing stayed")
    assert alertmanager_alert(accepted)["annotations"]["headline"] == "ACCEPTED"
    assert SlackSink(SlackSinkConfig(url=receiver.url + "/services/T/B/X")).send(accepted)
    message = receiver.requests[-1].json()
    assert message["text"].startswith(":heavy_minus_sign: [ACCEPTED:warning]")
    assert message["attachments"][0]["color"] == "#808080", "green is for a recovery"


def test_every_firing_page_says_what_to_run_first_in_every_sink(
    receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    route = Route()
    route.answers(1.0, 150)
    page = next(n for n in route.answers(0.5, 20) if n.alertname == THRESHOLD)
    step = "see the flagged answers: tracescore tail --flagged --service rag-api --route /billing --last 1000"
    assert page.first_step == step
    assert alertmanager_alert(page)["annotations"]["first_step"] == step
    with caplog.at_level(logging.INFO, "tracescore.alert"):
        LogSink().send(page)
        LogSink().send(page.model_copy(update={"repeat": True}))
    first, again = (r.getMessage() for r in caplog.records)
    assert first.endswith(f" | first step: {step}"), first
    assert f"(still firing, since {page.starts_at.isoformat(timespec='seconds')}) | first step" in again
    assert SlackSink(SlackSinkConfig(url=receiver.url + "/services/T/B/X")).send(page)
    fields = {f["title"]: f["value"] for f in receiver.requests[-1].json()["attachments"][0]["fields"]}
    assert fields["first step"] == step
    assert fields["since"] == page.starts_at.isoformat(timespec="seconds")
    resolved = [n for n in route.answers(1.0, 40) if n.state == "resolved"]
    assert resolved and all(n.first_step is None for n in resolved)


def test_the_first_step_matches_the_route_alone_and_pastes_into_a_shell() -> None:
    odd = AlertKey("rag api", "/items/*/[id]?", "faithfulness")
    assert first_step(odd, THRESHOLD) == (
        "see the flagged answers: tracescore tail --flagged --service 'rag api' "
        "--route '/items/[*]/[[]id][?]' --last 1000"
    )
    conversations = AlertKey("rag-api", "/chat", "faithfulness", "conversation")
    assert first_step(conversations, "TracescoreConversationFaithfulnessBelowNormal") == (
        "see the flagged conversations: tracescore tail --flagged --evaluations-topic "
        "tracescore.conversations --service rag-api --route /chat --last 1000"
    )
    key = AlertKey("rag-api", "/billing", "faithfulness")
    assert first_step(key, "TracescoreNoData") == (
        "check that the route still gets traffic and that tracescore consume runs; its last records: "
        "tracescore tail --service rag-api --route /billing --last 100"
    )
    # The judge's failures alone, each with its reason (the outage's cause), not the route's hallucinated
    # answers beside them.
    assert first_step(key, "TracescoreJudgeUnhealthy") == (
        "see the failed evaluations and their reason: tracescore tail --failed --service rag-api "
        "--route /billing --last 1000"
    )


def test_a_threshold_taken_out_of_the_rule_while_it_fired_is_reminded_of_as_such_on_a_quiet_route() -> None:
    # The config lost the rule's thresholds and the service restarted; the route has no answers since: its
    # reminder and Alertmanager's re-send say why it still fires (they raised a TypeError, every tick).
    evaluator = AlertEvaluator(
        AlertConfig(rules=[RuleConfig(warning=None, critical=None, drop=DropConfig())])
    )
    key = AlertKey("rag-api", "/billing", "faithfulness")
    evaluator.restore(key, AlertState(level="warning", level_since=T0, notified_at=T0, last_seen=T0))
    evaluator.adopt_restored(lambda _: 0)
    later = T0 + timedelta(hours=2)
    (reminder,) = [n for n in evaluator.tick(later) if n.alertname == THRESHOLD]
    assert reminder.summary == (
        "faithfulness of rag-api /billing still warning: its rule has no warning threshold any more, and it "
        "resolves at the next reading of its window (no answers in its window (the last 15 minutes); signal "
        "label: share of answers the label rule passes)"
    )
    assert [n.summary for n in evaluator.firing(later) if n.alertname == THRESHOLD] == [reminder.summary]
