"""Why a suspicious answer did not go to the LLM judge: `unselected` (outside the share the cascade sends) or
`budget` (the token budget had no room). Two newcomer walks read `budget=189` with no llm_budget set, and a
budget owner raised a budget that was never the cause."""

from __future__ import annotations

from collections import Counter
from typing import Any

from test_policy import HOUR, Clock, faithfulness, no_baseline

from tracescore.model import Selection
from tracescore.sample import CascadePolicy, SamplingConfig, SkipReason
from tracescore.sample._admission import MIN_RANKED


def run(policy: CascadePolicy, clock: Clock, make_interaction: Any, trace_ids: list[str]) -> int:
    """One suspicious answer a second (all equally suspicious: ranked by the trace-id hash); returns how many
    went to the LLM judge, each charged what it reserved."""
    sent = 0
    for second, trace_id in enumerate(trace_ids[:400]):
        clock.now = HOUR + second
        escalation = policy.escalate(make_interaction(trace_id), faithfulness(0.0))
        if escalation.to_llm:
            sent += 1
            policy.charge(escalation.reserved_tokens, reserved=escalation.reserved_tokens)
        else:
            assert escalation.reason == escalation.skip, escalation
    return sent


def test_with_no_budget_set_the_answers_outside_the_cascades_share_are_unselected_never_budget(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    clock = Clock()
    policy = CascadePolicy(SamplingConfig(**no_baseline(share=0.2)), clock=clock)
    sent = run(policy, clock, make_interaction, trace_ids)
    # The first MIN_RANKED go unranked; then about a fifth of the rest (4 sigma).
    assert abs(sent - MIN_RANKED - 0.2 * (400 - MIN_RANKED)) < 40, sent
    assert policy.skips == Counter({SkipReason.UNSELECTED: 400 - sent}), policy.skips
    assert SkipReason.BUDGET not in policy.skips


def test_a_budget_with_room_paces_the_cascade_and_what_it_holds_back_is_unselected(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    # 400 evaluations an hour at one answer a second: about an eighth go, and the budget never runs out.
    clock = Clock()
    budget = {"tokens_per_hour": 40_000, "estimated_tokens_per_evaluation": 100}
    policy = CascadePolicy(SamplingConfig(llm_budget=budget, **no_baseline()), clock=clock)
    sent = run(policy, clock, make_interaction, trace_ids)
    assert MIN_RANKED < sent < 120 and policy.budget_used()["hour"] == 100 * sent
    assert policy.skips == Counter({SkipReason.UNSELECTED: 400 - sent}), policy.skips


def test_a_budget_that_runs_out_counts_what_it_refuses_as_budget(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    """Refused once the hour is spent, drawn or not: a spent budget paces the cascade's share to 0, and that
    is the budget's doing, not the draw's."""
    clock = Clock()
    budget = {"tokens_per_hour": 1_000, "estimated_tokens_per_evaluation": 100}
    policy = CascadePolicy(SamplingConfig(llm_budget=budget, **no_baseline()), clock=clock)
    sent = run(policy, clock, make_interaction, trace_ids)
    assert sent == 10 and policy.budget_used()["hour"] == 1_000
    assert policy.skips == Counter({SkipReason.BUDGET: 390}), policy.skips
    clock.now += 3600  # the next hour: room again
    again = policy.escalate(make_interaction(trace_ids[0]), faithfulness(0.0))
    assert again.to_llm and again.selection is Selection.CASCADE
