"""The cascade measures its own lift and splits its LLM budget between targeting and uniform draws: never
worse than uniform when the offline judge is useless, as good as targeting when it is good, with inclusion
probabilities that stay exact through every switch."""

from __future__ import annotations

import copy
import itertools
import math
import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tracescore.model import MetricResult, Selection
from tracescore.sample import CascadePolicy, SamplingConfig
from tracescore.sample._hashing import keep

HOUR = 1_700_000_000 // 3600 * 3600
TOKENS = 100


def offline(no_evidence: int, supported: int) -> list[MetricResult]:
    total = no_evidence + supported
    details = {
        "total_claims": total,
        "verdict_counts": {"NO_EVIDENCE": no_evidence, "FULLY_SUPPORTED": supported},
    }
    return [MetricResult(metric="faithfulness", score=supported / total, judge="offline", details=details)]


FAITHFUL = offline(0, 3)
MILD = offline(1, 2)
WORST = offline(3, 0)

# What the offline judge says of an answer, given whether it is hallucinated.
Judge = Callable[[bool, random.Random], list[MetricResult]]


def good(hallucinated: bool, rng: random.Random) -> list[MetricResult]:
    if hallucinated:
        return WORST if rng.random() < 0.8 else FAITHFUL
    return MILD if rng.random() < 0.05 else FAITHFUL


def useless(_: bool, rng: random.Random) -> list[MetricResult]:
    """Random suspicion: as many suspicious answers as `good` flags, whatever the answer."""
    return WORST if rng.random() < 0.1 else FAITHFUL


def misleading(hallucinated: bool, rng: random.Random) -> list[MetricResult]:
    """Worse than useless: it flags faithful answers (long answers with an inverse signal)."""
    return FAITHFUL if hallucinated else (WORST if rng.random() < 0.1 else FAITHFUL)


@dataclass
class Run:
    recall: float  # hallucinated answers the LLM judge saw, share of all hallucinated
    uniform_recall: float  # the same for uniform sampling at the budget (a trace-id hash)
    policy: CascadePolicy
    sent: list[tuple[bool, float, Selection]]  # (hallucinated, inclusion probability, selection)
    hallucinated: int
    shares: list[float]  # the split in force for each answer, in order


def run(
    make_interaction: Any,
    judges: list[Judge],
    *,
    spans: int = 4000,
    budget: float | None = 0.05,
    hallucinated: float = 0.05,
    seed: int = 0,
    answer: str = "a",
    verdict: Callable[[bool], bool | None] = lambda truth: truth,
    probe: Callable[[int, CascadePolicy], None] = lambda i, policy: None,
    **cascade: Any,
) -> Run:
    """One hour of `spans` answers, the offline judge `judges[i]` in the i-th equal part of the stream, the
    LLM judge saying `verdict(truth)` (None: no verdict, an outage) on whatever the policy escalates."""
    rng = random.Random(seed)
    now = [float(HOUR)]
    limit = {} if budget is None else {"tokens_per_hour": round(budget * spans) * TOKENS}
    config = SamplingConfig(
        llm_budget={**limit, "estimated_tokens_per_evaluation": TOKENS},
        cascade={"learning": {"enabled": False}, **cascade},
    )
    policy = CascadePolicy(config, clock=lambda: now[0])
    reached = uniform = total = 0
    sent, shares = [], []
    for i in range(spans):
        now[0] = HOUR + i * 3600 / spans
        probe(i, policy)
        truth = rng.random() < hallucinated
        interaction = make_interaction(format(rng.getrandbits(128), "032x"), answer=answer)
        escalation = policy.escalate(interaction, judges[i * len(judges) // spans](truth, rng))
        shares.append(escalation.targeted_share if escalation.targeted_share is not None else 1.0)
        if escalation.to_llm:
            assert escalation.selection is not None and escalation.inclusion_probability is not None
            policy.charge(TOKENS, reserved=escalation.reserved_tokens)
            assert budget is None or policy.budget_used()["hour"] <= round(budget * spans) * TOKENS
            said = verdict(truth)
            if said is not None:
                policy.judged(interaction, escalation, said)
            sent.append((truth, escalation.inclusion_probability, escalation.selection))
        total += truth
        reached += truth and escalation.to_llm
        uniform += truth and keep(interaction.span.trace_id, "uniform", budget or 1.0)
    return Run(reached / max(1, total), uniform / max(1, total), policy, sent, total, shares)


def streams_of(make_interaction: Any, judge: Judge, streams: int = 12, **kw: Any) -> list[Run]:
    return [run(make_interaction, [judge], seed=seed, **kw) for seed in range(streams)]


def recalls(runs: list[Run]) -> tuple[float, float]:
    return statistics.fmean(r.recall for r in runs), statistics.fmean(r.uniform_recall for r in runs)


def mean_recalls(make_interaction: Any, judge: Judge, streams: int = 12, **kw: Any) -> tuple[float, float]:
    return recalls(streams_of(make_interaction, judge, streams, **kw))


def test_a_useless_offline_judge_matches_uniform(make_interaction: Any) -> None:
    cascade, uniform = mean_recalls(make_interaction, useless)
    # 12 streams x ~200 hallucinated answers, ~5% reached: about 0.6 points of noise either way.
    assert abs(cascade - uniform) < 0.02, (cascade, uniform)


def test_a_misleading_offline_judge_does_no_worse_than_uniform(make_interaction: Any) -> None:
    cascade, uniform = mean_recalls(make_interaction, misleading)
    # Always targeting, it would find next to none: its picks are all faithful answers.
    assert cascade > uniform - 0.015, (cascade, uniform)
    always, _ = mean_recalls(make_interaction, misleading, streams=4, lift={"enabled": False})
    assert always < uniform / 2, (always, uniform)


def test_a_good_offline_judge_targets_from_the_cold_start(make_interaction: Any) -> None:
    runs = streams_of(make_interaction, good, streams=4)
    cascade, uniform = recalls(runs)
    assert cascade > 8 * uniform and cascade > 0.4, (cascade, uniform)
    policy = runs[0].policy  # the first stream's (seed 0, the defaults) at its end
    (reading,) = policy.lift_readings()
    assert reading.targeting and reading.targeted_share == 1.0
    assert reading.difference is not None and reading.difference[1] > 0  # credibly above uniform


def test_the_split_follows_lift_both_ways_without_flapping(make_interaction: Any) -> None:
    # Good, then misleading for a third of the stream, then good again; 10% hallucinated, 10% budget.
    judges = [good, good, misleading, misleading, good, good]
    r = run(make_interaction, judges, spans=18_000, budget=0.1, hallucinated=0.1)
    sixths = [statistics.fmean(r.shares[q * 3000 : (q + 1) * 3000]) for q in range(6)]
    assert sixths[1] > 0.9 and sixths[3] < 0.3 and sixths[5] > 0.9, sixths
    settled = r.shares[3000:]  # after the first verdicts (and the first decision) of the good judge
    crossings = sum((a > 0.5) != (b > 0.5) for a, b in itertools.pairwise(settled))
    assert crossings == 2, crossings  # down, up again: no flapping in between


@pytest.mark.parametrize(
    "judges", [[good, misleading], [misleading, good]], ids=["to-uniform", "to-targeting"]
)
def test_weighted_by_inclusion_probability_the_llm_judged_answers_count_the_stream(
    make_interaction: Any, judges: list[Judge]
) -> None:
    # Horvitz-Thompson: the LLM-judged answers weighted by 1/pi count the whole stream, and its hallucinated
    # part, without bias; a probability that did not follow the split in force would tilt these sums. A 20%
    # baseline keeps the weights (and the noise of the sums) small.
    counted = hallucinated = 0.0
    spans = truth = 0
    for seed in range(6):
        r = run(
            make_interaction, judges, spans=3000, budget=0.4, hallucinated=0.1, seed=seed, baseline_rate=0.2
        )
        counted += sum(1 / pi for _, pi, _ in r.sent)
        hallucinated += sum(1 / pi for bad, pi, _ in r.sent if bad)
        spans, truth = spans + 3000, truth + r.hallucinated
    assert {round(s, 1) for s in r.shares} >= {0.1, 1.0}  # the split did switch
    assert counted == pytest.approx(spans, rel=0.03)
    assert hallucinated == pytest.approx(truth, rel=0.05)


@pytest.mark.parametrize(
    "judges", [[good, misleading, misleading], [misleading, good]], ids=["to-uniform", "to-targeting"]
)
def test_each_inclusion_probability_is_the_chance_the_policy_had(
    make_interaction: Any, judges: list[Judge]
) -> None:
    # At checkpoints through a stream whose split switches, one answer is offered with fresh trace ids, each
    # to a copy of the policy as it stands: the share of copies that send it is the probability each reports.
    checked = []

    def probe(i: int, policy: CascadePolicy) -> None:
        if i % 2000 != 1000:
            return
        for kind in (WORST, FAITHFUL):
            sent, reported = 0, set()
            for n in range(100):
                escalation = copy.deepcopy(policy).escalate(make_interaction(f"{i:016x}{n:016x}"), kind)
                sent += escalation.to_llm
                if escalation.to_llm:
                    reported.add(round(escalation.inclusion_probability or 0.0, 12))
            if not reported:
                continue
            (pi,) = reported  # the state decides it, not the trace id
            assert abs(sent / 100 - pi) <= 4 * math.sqrt(pi * (1 - pi) / 100) + 1e-9, (i, pi, sent)
            checked.append((pi, policy.lift_readings()[0].targeted_share))

    # A short window of recent scores keeps the copies cheap; the admission works alike.
    run(make_interaction, judges, spans=8000, budget=0.1, hallucinated=0.1, probe=probe, window=200)
    shares = {share for _, share in checked}
    assert min(shares) < 0.5 < max(shares), checked  # checked under both splits
    assert any(0.0 < pi < 1.0 for pi, _ in checked), checked


def test_a_judge_that_fails_everything_or_nothing_shows_no_lift(make_interaction: Any) -> None:
    for said in (True, False):
        r = run(make_interaction, [good], budget=0.1, verdict=lambda _, said=said: said)
        (reading,) = r.policy.lift_readings()
        assert not reading.targeting and reading.targeted_share == pytest.approx(0.1), said
        assert reading.uniform is not None and reading.uniform.value == float(said)


def test_a_judge_outage_keeps_the_last_split(make_interaction: Any) -> None:
    # Judged for the first half, then no verdicts at all for the rest of the hour.
    state = {"seen": 0}

    def verdict(truth: bool) -> bool | None:
        state["seen"] += 1
        return truth if state["seen"] <= 150 else None

    r = run(make_interaction, [good], spans=8000, budget=0.05, verdict=verdict)
    (reading,) = r.policy.lift_readings()
    assert reading.targeting and reading.targeted_share == 1.0
    cascade_after = [s for _, _, s in r.sent[150:]]
    assert cascade_after.count(Selection.CASCADE) > 0.7 * len(cascade_after)


def test_routes_that_switch_shape_keep_one_split_per_shape(make_interaction: Any) -> None:
    # One route: short answers the offline judge is good at, then answers of 20,000+ characters it misleads
    # on; a budget of 5% of the answers, one hour each.
    now = [float(HOUR)]
    config = SamplingConfig(
        llm_budget={"tokens_per_hour": 200 * TOKENS, "estimated_tokens_per_evaluation": TOKENS},
        cascade={"learning": {"enabled": False}},
    )
    policy = CascadePolicy(config, clock=lambda: now[0])
    long_answer = "The battery lasts fourteen hours on a single charge. " * 400
    assert len(long_answer) > 20_000
    rng = random.Random(5)
    for hour, (answer, judge) in enumerate((("a", good), (long_answer, misleading))):
        for i in range(4000):
            now[0] = HOUR + hour * 3600 + i * 0.9
            interaction = make_interaction(format(rng.getrandbits(128), "032x"), answer=answer)
            truth = rng.random() < 0.05
            escalation = policy.escalate(interaction, judge(truth, rng))
            if escalation.to_llm:
                policy.charge(TOKENS, reserved=escalation.reserved_tokens)
                policy.judged(interaction, escalation, truth)
    shapes = {r.key.shape: r for r in policy.lift_readings()}
    assert shapes["short"].targeting and shapes["short"].targeted_share == 1.0
    assert not shapes["long"].targeting and shapes["long"].targeted_share < 0.2
    assert not shapes["long"].exploring  # it gathered its first targeted verdicts, then turned uniform


def test_the_per_route_state_is_bounded(make_interaction: Any) -> None:
    policy = CascadePolicy(SamplingConfig(cascade={"lift": {"max_routes": 50}}))
    for i in range(500):
        interaction = make_interaction(format(i, "032x"), route=f"/route/{i}")
        escalation = policy.escalate(interaction, WORST)
        policy.judged(interaction, escalation, True)
    readings = policy.lift_readings()
    assert len(readings) == 50 and readings[-1].key.route == "/route/499"


def test_the_budget_moved_to_uniform_draws_covers_routes_the_cascade_never_picks(
    make_interaction: Any,
) -> None:
    # /a: a misleading offline judge (its budget moves to uniform draws); /b: answers it never suspects,
    # so the cascade spends nothing there. Uniform sampling would sample both alike, and so do the draws.
    now = [float(HOUR)]
    config = SamplingConfig(
        llm_budget={"tokens_per_hour": 400 * TOKENS, "estimated_tokens_per_evaluation": TOKENS},
        cascade={"learning": {"enabled": False}},
    )
    policy = CascadePolicy(config, clock=lambda: now[0])
    rng = random.Random(9)
    drawn = {"/a": 0, "/b": 0}
    for i in range(4000):
        now[0] = HOUR + i * 0.9
        route = "/a" if i % 2 else "/b"
        truth = rng.random() < 0.1
        interaction = make_interaction(format(rng.getrandbits(128), "032x"), route=route)
        escalation = policy.escalate(interaction, misleading(truth, rng) if route == "/a" else FAITHFUL)
        if escalation.to_llm:
            policy.charge(TOKENS, reserved=escalation.reserved_tokens)
            policy.judged(interaction, escalation, truth)
            drawn[route] += i >= 2000 and escalation.selection is Selection.UNIFORM
    assert drawn["/b"] > 0.6 * drawn["/a"] > 10, drawn
