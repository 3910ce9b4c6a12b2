"""CascadePolicy: admission (filters, rates, thinning, rate limit), escalation (cascade, baseline, budget)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any

import pytest

from tracescore.model import MetricResult, MetricStatus, RagRecord, Selection
from tracescore.sample import (
    CascadePolicy,
    SamplingConfig,
    SamplingPolicy,
    SkipReason,
)
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness, evaluate_record

HOUR = 1_700_000_000 // 3600 * 3600  # a UTC hour boundary


class Clock:
    def __init__(self, now: float = HOUR) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def faithfulness(
    score: float | None, status: MetricStatus = MetricStatus.OK, **counts: int
) -> list[MetricResult]:
    """An offline Faithfulness result; a bare 0.0 / 1.0 is one claim without / with evidence."""
    if not counts and score is not None and status is MetricStatus.OK:
        counts = {"NO_EVIDENCE": 1} if score < 0.5 else {"FULLY_SUPPORTED": 1}
    details: dict[str, Any] = (
        {"total_claims": sum(counts.values()), "verdict_counts": counts} if counts else {}
    )
    return [MetricResult(metric="faithfulness", score=score, status=status, judge="offline", details=details)]


def config(**values: Any) -> SamplingConfig:
    return SamplingConfig(**values)


def no_baseline(**cascade: Any) -> dict[str, Any]:
    # Always targeting too (lift off): these tests are about the cascade's own admission and budget; how
    # the split moves between targeting and uniform draws is tested in test_lift.py.
    return {"cascade": {"baseline_rate": 0.0, "lift": {"enabled": False}, **cascade}}


def test_the_policy_fits_the_consumer_seams(make_interaction: Any, trace_ids: list[str]) -> None:
    # What the consumer calls and what it relies on getting back (an isinstance check on a Protocol only
    # compares method names).
    policy = CascadePolicy(config(default_rate=0.5, **no_baseline()))
    seam: SamplingPolicy = policy
    interactions = [make_interaction(trace_id) for trace_id in trace_ids[:200]]
    decisions = [seam.admit(interaction) for interaction in interactions]
    assert 60 < sum(d.sampled for d in decisions) < 140, "about half admitted at rate 0.5"
    assert all(d.metrics == ("faithfulness",) for d in decisions if d.sampled)
    assert all(d.metrics == () and d.skip is not None for d in decisions if not d.sampled)
    escalation = seam.escalate(interactions[0], faithfulness(0.0))
    assert escalation.to_llm and escalation.selection is Selection.CASCADE
    seam.charge(10, reserved=escalation.reserved_tokens)  # hands back what the escalation reserved


# --- admit ------------------------------------------------------------------------------------------


def test_attribute_filters_include_and_exclude(make_interaction: Any) -> None:
    policy = CascadePolicy(
        config(
            filters={
                "include": [{"attribute": "deployment.environment", "values": ["prod*"]}],
                "exclude": [{"attribute": "user.internal"}],
            }
        )
    )
    prod = make_interaction("1" * 32, attributes={"deployment.environment": "prod-eu"})
    staging = make_interaction("2" * 32, attributes={"deployment.environment": "staging"})
    unlabelled = make_interaction("3" * 32)
    internal = make_interaction(
        "4" * 32, attributes={"deployment.environment": "prod", "user.internal": True}
    )
    assert policy.admit(prod).sampled
    for skipped in (staging, unlabelled, internal):
        assert policy.admit(skipped).skip is SkipReason.FILTER
    assert policy.skips == Counter({"filter": 3})


def test_rates_per_service_route_and_metric(make_interaction: Any, trace_ids: list[str]) -> None:
    policy = CascadePolicy(
        config(
            rates=[
                {"service": "search", "rate": 0.0},
                {"route": "/checkout/*", "rate": 0.2},
                {"route": "/checkout/*", "metric": "context_relevance", "rate": 0.05},
            ]
        ),
        metrics=("faithfulness", "context_relevance"),
    )
    assert not any(policy.admit(make_interaction(t, service="search")).sampled for t in trace_ids[:200])
    assert policy.skips["rate"] == 200
    decisions = [policy.admit(make_interaction(t, route="/checkout/pay")) for t in trace_ids]
    faithful = sum("faithfulness" in d.metrics for d in decisions)
    relevance = sum("context_relevance" in d.metrics for d in decisions)
    # 2000 traces: 4 binomial sigmas are under 80 (at 0.2) and 40 (at 0.05).
    assert abs(faithful - 400) < 80 and abs(relevance - 100) < 40, (faithful, relevance)
    # Nested shares: every trace scored for the 5% metric is scored for the 20% one too.
    assert all("faithfulness" in d.metrics for d in decisions if "context_relevance" in d.metrics)
    assert all(policy.admit(make_interaction(t, route="/ask")).metrics == policy.metrics for t in trace_ids)


def test_decisions_agree_across_instances_and_replays(make_interaction: Any, trace_ids: list[str]) -> None:
    settings = config(default_rate=0.3, cascade={"baseline_rate": 0.2})
    first, second = CascadePolicy(settings), CascadePolicy(settings)
    results = faithfulness(1.0)
    for trace_id in trace_ids[:500]:
        one, other = make_interaction(trace_id), make_interaction(trace_id.upper())
        assert first.admit(one) == second.admit(other) == first.admit(one)
        assert first.escalate(one, results).to_llm == second.escalate(other, results).to_llm


def test_the_baseline_is_independent_of_the_rate_decision(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    # Were one hash used for both, the 30% the rate keeps would all fall in a 30% baseline.
    policy = CascadePolicy(config(default_rate=0.3, cascade={"baseline_rate": 0.3}))
    kept = [make_interaction(t) for t in trace_ids if policy.admit(make_interaction(t)).sampled]
    in_baseline = sum(policy.escalate(i, faithfulness(1.0)).selection is Selection.BASELINE for i in kept)
    assert abs(in_baseline / len(kept) - 0.3) < 0.1, (in_baseline, len(kept))


def test_the_rate_limit_is_a_token_bucket(make_interaction: Any, trace_ids: list[str]) -> None:
    clock = Clock()
    policy = CascadePolicy(config(rate_limit={"per_minute": 60, "burst": 5}), clock=clock)
    admitted = [policy.admit(make_interaction(t)).sampled for t in trace_ids[:10]]
    assert admitted == [True] * 5 + [False] * 5
    assert policy.skips == Counter({"rate_limit": 5})
    clock.now += 2.0  # 60 a minute: two more
    assert [policy.admit(make_interaction(t)).sampled for t in trace_ids[10:13]] == [True, True, False]


def test_candidates_are_thinned_uniformly_when_the_offline_judge_falls_behind(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    clock = Clock()
    policy = CascadePolicy(config(offline={"cpu_share": 0.5}), clock=clock)
    policy.observe_offline(0.1)  # half a core at 0.1 s a record: 5 candidates a second
    # 50 candidates a second for 40 s, a tenth of them new each time so the share is measured at steady state.
    admitted = []
    for i in range(2000):
        clock.now = HOUR + i / 50
        admitted.append(policy.admit(make_interaction(trace_ids[i])).sampled)
    steady = admitted[1000:]
    assert 0.06 < sum(steady) / len(steady) < 0.14, sum(steady)
    assert policy.skips["thinned"] == admitted.count(False)
    # Below capacity nothing is thinned.
    calm = CascadePolicy(config(offline={"cpu_share": 0.5}), clock=clock)
    calm.observe_offline(0.1)
    for i in range(200):
        clock.now += 1.0
        assert calm.admit(make_interaction(trace_ids[i])).sampled
    assert not calm.skips


# --- escalate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("results", "selection", "why"),
    [
        (faithfulness(0.0), Selection.CASCADE, "NO_EVIDENCE (1)"),
        (faithfulness(0.0, CONTRADICTORY=1), Selection.CASCADE, "CONTRADICTORY (1)"),
        (faithfulness(0.5, NO_EVIDENCE=1, FULLY_SUPPORTED=1), Selection.CASCADE, "P(hallucinated) 0.66"),
        (faithfulness(None, MetricStatus.ERROR), Selection.CASCADE, "failed"),
        (faithfulness(1.0, FULLY_SUPPORTED=3), None, None),
        (faithfulness(0.5, PARTIALLY_SUPPORTED=1), None, None),
        (faithfulness(None, MetricStatus.NOT_APPLICABLE), None, None),
        ([], None, None),  # faithfulness not scored for this interaction: nothing to suspect
    ],
)
def test_suspicious_or_uncertain_answers_go_to_the_llm_judge(
    make_interaction: Any, results: list[MetricResult], selection: Selection | None, why: str | None
) -> None:
    policy = CascadePolicy(config(**no_baseline()))
    escalation = policy.escalate(make_interaction("5" * 32), results)
    assert escalation.to_llm is (selection is not None)
    assert escalation.selection is selection
    assert escalation.reason == (selection.value if selection else "offline_only")
    assert why is None or why in (escalation.suspicion or ""), escalation.suspicion


def test_the_deprecated_threshold_is_accepted_with_a_warning(make_interaction: Any) -> None:
    with pytest.warns(FutureWarning, match="deprecated and ignored") as warned:
        settings = config(**no_baseline(threshold=0.8, flag_verdicts=[]))
    assert {str(w.message).split()[1] for w in warned} == {"cascade.threshold", "cascade.flag_verdicts"}
    policy = CascadePolicy(settings)
    span = make_interaction("6" * 32)
    assert policy.escalate(span, faithfulness(0.0)).to_llm
    assert not policy.escalate(span, faithfulness(1.0)).to_llm
    quiet = CascadePolicy(config(**no_baseline(escalate_errors=False)))
    assert not quiet.escalate(span, faithfulness(None, MetricStatus.ERROR)).to_llm


def test_the_baseline_is_a_uniform_share_whatever_the_score(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    policy = CascadePolicy(config(cascade={"baseline_rate": 0.1}))
    escalations = [policy.escalate(make_interaction(t), faithfulness(1.0)) for t in trace_ids]
    baseline = [e for e in escalations if e.to_llm]
    assert all(e.selection is Selection.BASELINE and e.reason == "baseline" for e in baseline)
    assert abs(len(baseline) - 200) < 55, len(baseline)  # 4 sigma
    assert policy.selections == Counter({"baseline": len(baseline)})
    # A suspicious answer in the baseline says baseline: it was chosen without looking at its score.
    chosen = next(e for t, e in zip(trace_ids, escalations, strict=True) if e.to_llm)
    trace_id = trace_ids[escalations.index(chosen)]
    assert policy.escalate(make_interaction(trace_id), faithfulness(0.0)).selection is Selection.BASELINE


def test_the_baseline_draws_a_conversation_whole_at_the_same_rate_per_turn(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    """Keyed on the conversation id: every turn of a drawn conversation goes to the LLM judge, none of an
    undrawn one; each turn is still drawn at the baseline rate (its inclusion probability stays exact)."""
    policy = CascadePolicy(config(cascade={"baseline_rate": 0.2}))
    drawn_turns = 0
    for conversation in range(400):
        turns = [
            dataclasses.replace(make_interaction(t), session_id=f"conversation-{conversation}")
            for t in trace_ids[conversation * 5 : conversation * 5 + 5]
        ]
        outcomes = {policy.escalate(turn, faithfulness(1.0)).to_llm for turn in turns}
        assert len(outcomes) == 1, f"conversation {conversation} split: some turns drawn, some not"
        drawn_turns += 5 * outcomes.pop()
        probability = policy.escalate(turns[0], faithfulness(1.0)).inclusion_probability
        assert probability is None or probability == pytest.approx(0.2)
    assert abs(drawn_turns / 2000 - 0.2) < 0.08, drawn_turns  # 400 conversations: about 4 sigma
    # Without a conversation id, the trace id decides, turn by turn.
    alone = [policy.escalate(make_interaction(t), faithfulness(1.0)).to_llm for t in trace_ids[:200]]
    assert 0 < sum(alone) < 200


def test_a_spent_hourly_budget_sends_nothing_more_until_the_next_hour(make_interaction: Any) -> None:
    clock = Clock()
    settings = config(
        llm_budget={"tokens_per_hour": 3000, "estimated_tokens_per_evaluation": 1000}, **no_baseline()
    )
    policy = CascadePolicy(settings, clock=clock)
    span, suspicious = make_interaction("7" * 32), faithfulness(0.0)
    for _ in range(3):
        escalation = policy.escalate(span, suspicious)
        assert escalation.to_llm and escalation.reserved_tokens == 1000
        policy.charge(1000, reserved=escalation.reserved_tokens)
    spent = policy.escalate(span, suspicious)
    assert (spent.to_llm, spent.skip, spent.reason, spent.selection) == (
        False,
        SkipReason.BUDGET,
        "budget",
        Selection.CASCADE,
    )
    assert policy.skips == Counter({"budget": 1}) and policy.budget_used()["hour"] == 3000
    clock.now += 3600
    assert policy.escalate(span, suspicious).to_llm


def test_the_daily_budget_holds_across_hours(make_interaction: Any) -> None:
    clock = Clock(HOUR // 86_400 * 86_400)  # midnight UTC
    policy = CascadePolicy(
        config(
            llm_budget={
                "tokens_per_hour": 1000,
                "tokens_per_day": 2000,
                "estimated_tokens_per_evaluation": 1000,
            },
            **no_baseline(),
        ),
        clock=clock,
    )
    span, suspicious = make_interaction("8" * 32), faithfulness(0.25, NO_EVIDENCE=1, PARTIALLY_SUPPORTED=1)
    sent = 0
    for _ in range(48):  # every half hour for a day
        escalation = policy.escalate(span, suspicious)
        if escalation.to_llm:
            sent += 1
            policy.charge(1000, reserved=escalation.reserved_tokens)
        clock.now += 1800
    assert sent == 2 and policy.skips["budget"] == 46
    # A new day: its budget is open again (paced over the day: the most suspicious answer yet goes at once;
    # with every claim unsupported, more than the day's answers, it is).
    assert policy.budget_used() == {"hour": 0, "day": 0}
    assert policy.escalate(span, faithfulness(0.0, NO_EVIDENCE=2, CONTRADICTORY=1)).to_llm


def test_escalations_in_flight_reserve_their_tokens(make_interaction: Any) -> None:
    # Ten concurrent escalations before any charge must not all pass a budget that fits two.
    policy = CascadePolicy(
        config(llm_budget={"tokens_per_hour": 2500, "estimated_tokens_per_evaluation": 1000}, **no_baseline())
    )
    span = make_interaction("9" * 32)
    in_flight = [policy.escalate(span, faithfulness(0.0)) for _ in range(10)]
    assert [e.to_llm for e in in_flight] == [True, True] + [False] * 8
    # The judge used less than estimated: the released reservation lets the next one through.
    for escalation in in_flight[:2]:
        policy.charge(400, reserved=escalation.reserved_tokens)
    again = policy.escalate(span, faithfulness(0.0))
    assert again.to_llm and again.reserved_tokens == 400  # the mean of what was charged


async def test_real_offline_judge_results_drive_the_cascade(make_interaction: Any) -> None:
    context = ("The Oberoi Group is a hotel company with its head office in Delhi.",)
    query = "The Oberoi family is part of a hotel company that has a head office in what city?"
    policy = CascadePolicy(config(**no_baseline()))
    span = make_interaction("a" * 32)
    for answer, expected in (("Delhi", False), ("Mumbai", True)):
        results = await evaluate_record(
            RagRecord(query=query, contexts=context, answer=answer), [Faithfulness()], OfflineJudge()
        )
        assert policy.escalate(span, results).to_llm is expected, (answer, results[0].score)


def test_a_disabled_cascade_sends_nothing(make_interaction: Any) -> None:
    policy = CascadePolicy(config(cascade={"enabled": False, "baseline_rate": 1.0}))
    assert not policy.escalate(make_interaction("b" * 32), faithfulness(0.0)).to_llm


def test_the_cascade_leaves_the_baseline_its_share_of_the_hour(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    # One suspicious answer a second for an hour, a budget for 400 evaluations, a 5% baseline (~180 expected):
    # were the cascade first come first served it would spend everything in the first minutes.
    clock = Clock()
    policy = CascadePolicy(
        config(
            llm_budget={"tokens_per_hour": 40_000, "estimated_tokens_per_evaluation": 100},
            cascade={"baseline_rate": 0.05, "lift": {"enabled": False}},
        ),
        clock=clock,
    )
    baseline_last_quarter = 0
    for second in range(3600):
        clock.now = HOUR + second
        escalation = policy.escalate(
            make_interaction(trace_ids[second % 2000] + str(second)), faithfulness(0.0)
        )
        if escalation.to_llm:
            policy.charge(100, reserved=escalation.reserved_tokens)
            baseline_last_quarter += second >= 2700 and escalation.selection is Selection.BASELINE
    assert policy.budget_used()["hour"] <= 40_000
    assert policy.selections["cascade"] > 100 and policy.selections["baseline"] > 120, policy.selections
    assert baseline_last_quarter > 20, baseline_last_quarter


def test_the_screen_decides_what_admit_would_from_the_span_and_route_alone(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    """What the consumer asks before building an interaction: the filters and rates give admit's decision,
    counted once; an interaction they keep is left to admit (None), which then decides as before."""
    rules = config(
        rates=[{"service": "search", "rate": 0.0}, {"route": "/checkout/*", "rate": 0.2}],
        filters={"exclude": [{"attribute": "user.internal"}]},
    )
    screened, admitted = CascadePolicy(rules), CascadePolicy(rules)
    shapes = [
        {"service": "search"},
        {"route": "/checkout/pay"},
        {"route": "/ask"},
        {"route": "/ask", "attributes": {"user.internal": True}},
    ]
    for shape in shapes:
        for trace_id in trace_ids[:300]:
            interaction = make_interaction(trace_id, **shape)
            early = screened.screen(interaction.span, interaction.route)
            decision = early if early is not None else screened.admit(interaction)
            assert decision == admitted.admit(interaction), (shape, trace_id)
            if early is not None:
                assert early.skip is not None, "the screen only ever turns an interaction away"
    assert screened.skips == admitted.skips
    assert screened.skips["filter"] == 300 and screened.skips["rate"] > 300
