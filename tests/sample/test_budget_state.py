"""The LLM budget's spend survives a restart (`llm_budget.state_path`): a restarted consumer, with the same
budget or a new one, goes on from what its hour and day spent instead of from 0, so restarts cannot spend
the day's budget again; a file it cannot read is set aside with a warning, never a failed start."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tracescore.sample import CascadePolicy, SkipReason, load_sampling_config

DAY = 1_700_000_000 // 86_400 * 86_400  # midnight UTC
HOUR = DAY + 10 * 3600  # 10:00 UTC


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def policy(path: Path, clock: Clock, per_hour: int = 3000, per_day: int = 10_000) -> CascadePolicy:
    config = load_sampling_config(
        None,
        llm_budget={
            "tokens_per_hour": per_hour, "tokens_per_day": per_day,
            "estimated_tokens_per_evaluation": 1000, "state_path": str(path),
        },
        cascade={"baseline_rate": 0.0, "lift": {"enabled": False}},
    )  # fmt: skip
    return CascadePolicy(config, clock=clock)


def test_a_restart_goes_on_from_the_hours_and_days_spend_with_a_new_budget(tmp_path: Path) -> None:
    path, clock = tmp_path / "budget.json", Clock(HOUR + 60)
    first = policy(path, clock)
    first.charge(2500)
    first.save()  # on stop, as the consumer does
    clock.now += 120
    # Restarted with a larger hour: the 2,500 tokens already spent still count against it.
    again = policy(path, clock, per_hour=4000)
    assert again.budget_used() == {"hour": 2500, "day": 2500}
    again.charge(1000)
    again.save()
    clock.now = HOUR + 3600 + 5  # the next hour: its own budget, the day's spend kept
    third = policy(path, clock)
    assert third.budget_used() == {"hour": 0, "day": 3500}
    clock.now = DAY + 86_400 + 5  # the next day: both start afresh
    assert policy(path, clock).budget_used() == {"hour": 0, "day": 0}


def test_a_spent_hour_stays_spent_across_a_restart(tmp_path: Path, make_interaction: Any) -> None:
    """Without the state a restarted consumer sent the judge another hour's budget in the same hour."""
    from test_policy import faithfulness

    path, clock = tmp_path / "budget.json", Clock(HOUR)
    first = policy(path, clock)
    first.charge(3000)
    first.save()
    again = policy(path, clock)
    escalation = again.escalate(make_interaction("7" * 32), faithfulness(0.0))
    assert (escalation.to_llm, escalation.skip) == (False, SkipReason.BUDGET)


def test_the_spend_is_saved_while_spending_at_most_every_ten_seconds(tmp_path: Path) -> None:
    """A crash (no stop, no save) forgets at most the last ten seconds' spend."""
    path, clock = tmp_path / "budget.json", Clock(HOUR)
    spending = policy(path, clock)
    spending.charge(100)  # the first charge writes the file
    assert json.loads(path.read_text())["windows"]["3600"][1] == 100
    clock.now += 5
    spending.charge(100)  # within ten seconds: not written
    assert json.loads(path.read_text())["windows"]["3600"][1] == 100
    clock.now += 5
    spending.charge(100)
    assert policy(path, clock).budget_used() == {"hour": 300, "day": 300}


@pytest.mark.parametrize(
    "content",
    ['{"version": 99, "windows": {}}', "not json", '{"version": 1, "windows": {"3600": [1, -5]}}'],
    ids=["other-version", "corrupt", "negative"],
)
def test_a_state_it_cannot_read_starts_at_zero_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: str
) -> None:
    path = tmp_path / "budget.json"
    path.write_text(content)
    with caplog.at_level(logging.WARNING):
        started = policy(path, Clock(HOUR))
    assert started.budget_used() == {"hour": 0, "day": 0}
    assert any("ignoring the LLM budget's saved spend" in r.getMessage() for r in caplog.records)
