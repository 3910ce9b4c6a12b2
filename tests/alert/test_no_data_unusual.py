"""The no-data part's default `unusual` mode: a silence pages when it is improbable at the route's own recent
rate (and at least `no_data_seconds`), so a quiet healthy tenant is not paged all day while a busy one that
stops still is; a rule that writes `no_data_seconds` out keeps the fixed rule; the rate survives a restart."""

from __future__ import annotations

import logging
import random
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alert_records import T0, record

from tracescore.alert import (
    AlertConfig,
    AlertConfigError,
    AlertEvaluator,
    AlertKey,
    AlertState,
    Notification,
    RuleConfig,
    load_alert_config,
)

NO_DATA = "TracescoreNoData"
KEY = AlertKey("rag-api", "/billing", "faithfulness")


def unusual(**rule: Any) -> AlertEvaluator:
    """The rule's no-data part at its defaults (unusual, a 30-minute floor), nothing else paging."""
    return AlertEvaluator(AlertConfig(rules=[RuleConfig(warning=0.01, critical=None, **rule)]))


def feed(
    ev: AlertEvaluator,
    per_hour: float,
    hours: float,
    start: datetime = T0,
    seed: int = 1,
    tick_minutes: int = 5,
) -> tuple[list[Notification], datetime]:
    """Poisson answers at `per_hour` for `hours`, ticked every `tick_minutes`: the no-data notifications,
    and the last answer's time."""
    rng, at, tick, out, last = random.Random(1), start, start, [], start
    end = start + timedelta(hours=hours)
    while (at := at + timedelta(hours=rng.expovariate(per_hour))) < end:
        while tick <= at:
            out += ev.tick(tick)
            tick += timedelta(minutes=tick_minutes)
        key = ev.add(record(1.0, at))
        assert key is not None
        out += ev.evaluate(key, at)
        last = at
    return [n for n in out if n.alertname == NO_DATA], last


def silent(ev: AlertEvaluator, since: datetime, hours: float) -> list[tuple[timedelta, Notification]]:
    """Tick every minute for `hours` with no answer: each no-data notification and when, after `since`."""
    out = []
    for minute in range(int(hours * 60)):
        now = since + timedelta(minutes=minute)
        out += [(now - since, n) for n in ev.tick(now) if n.alertname == NO_DATA]
    return out


def test_a_quiet_healthy_route_is_not_paged_where_the_fixed_rule_pages_it_all_day() -> None:
    # Two answers an hour (48 a day): a 30-minute silence is most hours' news under the fixed rule.
    quiet, _ = feed(unusual(), per_hour=2, hours=96)
    fixed, _ = feed(unusual(no_data_seconds=1800), per_hour=2, hours=96)
    assert quiet == []
    assert sum(n.state == "firing" for n in fixed) > 50


def test_a_busy_route_that_stops_is_paged_after_the_floor_and_its_next_answer_resolves_it() -> None:
    ev = unusual()
    _, last = feed(ev, per_hour=200, hours=30)
    ((after, page),) = silent(ev, last, hours=2)
    # 200 an hour expects 100 answers in 30 minutes: the floor (no_data_seconds) is what it waits for.
    assert timedelta(minutes=30) < after <= timedelta(minutes=32)
    assert page.state == "firing" and page.summary.startswith(
        f"no evaluations of rag-api /billing (faithfulness) since {last.isoformat(timespec='seconds')} ("
    )
    assert "of its answers were expected by now at its rate of at least" in page.summary
    ev.add(record(1.0, last + timedelta(hours=2)))
    (resolved,) = ev.evaluate(KEY, last + timedelta(hours=2))
    assert (resolved.alertname, resolved.state) == (NO_DATA, "resolved")


def test_a_quieter_route_that_stops_is_paged_once_its_silence_is_improbable_at_its_rate() -> None:
    ev = unusual()
    _, last = feed(ev, per_hour=4, hours=72)
    ((after, page),) = silent(ev, last, hours=12)
    # ln(1,000,000) = 13.8 answers at the lower bound of about 4 an hour: about 3.5 to 4 hours.
    assert timedelta(hours=3) < after < timedelta(hours=5), after
    assert page.state == "firing"


def test_a_route_too_new_to_know_its_rate_is_not_paged_and_says_when_it_is_armed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ev = unusual()
    for i in range(500):  # a burst of a test run on a new route, then nothing for two days
        ev.add(record(1.0, T0 + timedelta(seconds=i)))
    assert silent(ev, T0, hours=48) == []
    caplog.set_level(logging.INFO, "tracescore.alert")
    feed(ev, per_hour=10, hours=30, start=T0 + timedelta(hours=48))
    (armed,) = [r.getMessage() for r in caplog.records if "no-data alert armed" in r.getMessage()]
    assert re.fullmatch(
        r"rag-api /billing faithfulness: rate known, at least \d+ answers an hour; no-data alert armed: a "
        r"silence of [\d.]+ hours pages",
        armed,
    ), armed


def test_the_rate_survives_a_restart_and_a_record_read_again_is_not_counted_twice() -> None:
    ev = unusual()
    _, last = feed(ev, per_hour=200, hours=30)
    saved = ev.state_of(KEY)
    assert saved is not None and saved.first_seen is not None and saved.arrivals > 100
    again = unusual()
    again.restore(KEY, AlertState.model_validate_json(saved.model_dump_json()))
    again.add(record(1.0, last), replay=True)  # the last minutes read again to refill the windows
    assert again.state_of(KEY) == saved
    ((after, _),) = silent(again, last, hours=1)
    assert after <= timedelta(minutes=32)


def test_a_state_of_an_earlier_version_learns_the_rate_again_and_keeps_a_firing_alert() -> None:
    # An earlier version's state: no rate, its no-data alert firing (the fixed rule paged it).
    old = AlertState(last_seen=T0, no_data_firing=True, no_data_since=T0 + timedelta(minutes=30))
    ev = unusual()
    ev.restore(KEY, AlertState.model_validate_json(old.model_dump_json(exclude={"arrivals", "first_seen"})))
    ev.adopt_restored(lambda key: 0)
    assert ev.tick(T0 + timedelta(hours=5)) == []  # its rate unknown: neither news nor a recovery
    assert [n.alertname for n in ev.firing(T0 + timedelta(hours=5))] == [NO_DATA]
    ev.add(record(1.0, T0 + timedelta(hours=6)))
    (resolved,) = ev.evaluate(KEY, T0 + timedelta(hours=6))
    assert resolved.state == "resolved"


def test_an_explicit_no_data_seconds_keeps_the_fixed_rule_and_the_mode_may_be_named() -> None:
    assert RuleConfig().no_data_mode == "unusual"
    assert RuleConfig(no_data_seconds=600).no_data_mode == "fixed"
    assert RuleConfig(no_data_seconds=600, no_data_mode="unusual").no_data_mode == "unusual"
    assert RuleConfig(no_data_seconds=600).describe().endswith("and no data for 10 minutes")
    said = RuleConfig().describe()
    assert said.endswith(
        "and no data when the route's silence is unusual for it (as rare as 1 in 1,000,000 at its rate, "
        "and at least 30 minutes)"
    )
    ev = unusual(no_data_seconds=600)
    ev.add(record(1.0, T0))
    ((after, page),) = silent(ev, T0, hours=1)
    assert after == timedelta(minutes=11) and page.summary.endswith("since 2026-01-01T12:00:00+00:00")


@pytest.mark.parametrize(
    ("rule", "said"),
    [
        (
            "no_data_mode: unusual\n    no_data_seconds: null",
            "no_data_mode is unusual but no_data_seconds is null (no no-data alert)",
        ),
        (
            "no_data_seconds: 600\n    no_data_every: 1000",
            "no_data_every applies to no_data_mode unusual, and a rule that sets no_data_seconds without "
            "no_data_mode has the fixed no-data rule of earlier versions",
        ),
        ("no_data_mode: sometimes", "no_data_mode: Input should be 'unusual' or 'fixed'"),
        ("no_data_every: 2", "no_data_every: Input should be greater than or equal to 10"),
        ("no_data_min_answers: 0", "no_data_min_answers: Input should be greater than or equal to 1"),
    ],
)
def test_a_no_data_part_that_cannot_mean_what_it_says_is_a_config_error(
    tmp_path: Path, rule: str, said: str
) -> None:
    path = tmp_path / "alert.yaml"
    path.write_text(f"rules:\n  - routes: /billing\n    {rule}\n")
    with pytest.raises(AlertConfigError) as error:
        load_alert_config(path)
    assert said in str(error.value)
