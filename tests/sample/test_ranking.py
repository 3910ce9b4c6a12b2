"""The cascade ranks by suspicion: within the hour's LLM budget, the most suspicious answers go first."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tracescore.model import MetricResult, Selection
from tracescore.sample import CascadePolicy, SamplingConfig
from tracescore.sample._admission import RunningQuantile
from tracescore.sample._calibration import LogisticModel, features

HOUR = 1_700_000_000 // 3600 * 3600


def result(no_evidence: int, supported: int) -> list[MetricResult]:
    total = no_evidence + supported
    details = {
        "total_claims": total,
        "verdict_counts": {"NO_EVIDENCE": no_evidence, "FULLY_SUPPORTED": supported},
    }
    return [MetricResult(metric="faithfulness", score=supported / total, judge="offline", details=details)]


FAITHFUL = result(0, 1)
MILD = result(1, 1)  # half the claims unsupported: suspicious (~0.8)
WORST = result(1, 0)  # nothing supported (~0.96)


def stream(
    make_interaction: Any,
    trace_ids: list[str],
    kinds: list[list[MetricResult]],
    *,
    evaluations: int,
    baseline: float = 0.0,
    share: float | None = None,
) -> tuple[CascadePolicy, list[tuple[list[MetricResult], Any]]]:
    """One hour of `kinds` (cycled over the trace ids, evenly spread) with a budget of `evaluations`; the
    cascade always targets (lift off: how the split moves is tested in test_lift.py)."""
    now = [float(HOUR)]
    budget = {"tokens_per_hour": evaluations * 100, "estimated_tokens_per_evaluation": 100}
    cascade = {"baseline_rate": baseline, "share": share, "lift": {"enabled": False}}
    config = SamplingConfig(llm_budget=budget if evaluations else {}, cascade=cascade)
    policy = CascadePolicy(config, clock=lambda: now[0])
    out = []
    for i, trace_id in enumerate(trace_ids):
        now[0] = HOUR + i * 3600 / len(trace_ids)
        kind = kinds[i % len(kinds)]
        escalation = policy.escalate(make_interaction(trace_id), kind)
        if escalation.to_llm:
            policy.charge(100, reserved=escalation.reserved_tokens)
        out.append((kind, escalation))
    return policy, out


def test_a_scarce_budget_goes_to_the_most_suspicious_first(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    # 2,000 interactions: 10% clearly hallucinated, 20% mildly suspicious, the rest faithful; budget: 150.
    kinds = [WORST] + [MILD] * 2 + [FAITHFUL] * 7
    policy, out = stream(make_interaction, trace_ids, kinds, evaluations=150)
    sent = [kind for kind, e in out if e.to_llm]
    assert 130 <= len(sent) <= 150, len(sent)  # the budget is spent, not overspent
    # Only the first 100, before there is a quantile to rank against, let mild ones through.
    assert sent.count(MILD) <= 25 and sent.count(WORST) >= 120, (sent.count(WORST), sent.count(MILD))
    assert not any(kind is FAITHFUL for kind in sent)
    # First come, first served would have spent the budget on the first ~500 interactions.
    assert any(e.to_llm for _, e in out[1500:])
    assert policy.skips["budget"] > 0
    cascade = [e for _, e in out if e.to_llm]
    assert all(e.selection is Selection.CASCADE and e.suspicion_score is not None for e in cascade)


def test_a_clean_stream_spends_nothing_beyond_the_baseline(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    policy, out = stream(make_interaction, trace_ids, [FAITHFUL], evaluations=400, baseline=0.02)
    sent = [e for _, e in out if e.to_llm]
    assert all(e.selection is Selection.BASELINE for e in sent)
    assert len(sent) < 0.04 * len(out) and policy.selections["cascade"] == 0
    assert all(e.inclusion_probability == pytest.approx(0.02) for e in sent)


def test_an_all_hallucinated_stream_stays_within_the_budget(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    policy, out = stream(make_interaction, trace_ids, [WORST, MILD], evaluations=100, baseline=0.01)
    sent = [kind for kind, e in out if e.to_llm]
    assert policy.budget_used()["hour"] <= 100 * 100
    assert len(sent) >= 80  # spent, spread over the hour
    assert sent.count(WORST) > sent.count(MILD)


def test_without_a_budget_share_caps_the_cascade(make_interaction: Any, trace_ids: list[str]) -> None:
    kinds = [WORST] + [FAITHFUL] * 4
    _, capped = stream(make_interaction, trace_ids, kinds, evaluations=0, share=0.1)
    _, everything = stream(make_interaction, trace_ids, kinds, evaluations=0)
    assert abs(sum(e.to_llm for _, e in capped) - 200) < 40  # 10% of 2,000: half the worst ones
    assert sum(e.to_llm for _, e in everything) == 400  # no share: all above the floor


def test_inclusion_probability_is_one_for_cascade_and_the_rate_for_baseline(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    _, out = stream(make_interaction, trace_ids, [WORST, FAITHFUL], evaluations=0, baseline=0.05)
    for kind, escalation in out:
        if not escalation.to_llm:
            assert escalation.inclusion_probability is None
        elif kind is WORST:
            assert escalation.inclusion_probability == 1.0
        else:
            assert (
                escalation.selection is Selection.BASELINE
                and escalation.inclusion_probability == pytest.approx(0.05)
            )


def test_ties_at_the_quantile_are_drawn_by_trace_id_alike_on_every_replica(
    make_interaction: Any, trace_ids: list[str]
) -> None:
    kinds = [WORST] * 3 + [FAITHFUL]
    first = [e.to_llm for _, e in stream(make_interaction, trace_ids, kinds, evaluations=0, share=0.3)[1]]
    second = [e.to_llm for _, e in stream(make_interaction, trace_ids, kinds, evaluations=0, share=0.3)[1]]
    assert first == second and 0.2 < sum(first) / len(first) < 0.4


def test_the_running_quantile_forgets_old_scores() -> None:
    window = RunningQuantile(200)
    for _ in range(200):
        window.add(0.9)
    assert window.admission(0.8, 0.1) == 0.0
    for _ in range(200):
        window.add(0.1)
    assert window.admission(0.8, 0.1) == 1.0
    assert window.admission(0.1, 0.5) == 0.5  # half of a full tie


def test_the_default_config_warns_about_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SamplingConfig()


def test_one_sure_invention_in_a_long_answer_outranks_an_unsure_gap() -> None:
    # A faithful summary with one reworded claim the judge cannot find but is unsure about; its hallucinated
    # twin: one claim it is sure is unsupported. Same verdict shares: only the confidence tells them apart.
    def summary(confidence: float, sure: int) -> MetricResult:
        claims = [
            {"claim": f"c{i}", "verdict": "FULLY_SUPPORTED", "confidence": 0.7, "evidence": "e"}
            for i in range(7)
        ]
        claims.append({"claim": "c7", "verdict": "NO_EVIDENCE", "confidence": confidence, "evidence": "e"})
        counts = {"FULLY_SUPPORTED": 7, "NO_EVIDENCE": 1}
        details = {"total_claims": 8, "verdict_counts": counts, "claims": claims, "unsupported_claims": sure}
        return MetricResult(metric="faithfulness", score=0.875, judge="offline", details=details)

    model = LogisticModel.cold_start()
    unsure, sure = model.probability(features(summary(0.33, 0))), model.probability(features(summary(0.9, 1)))
    assert sure > 0.5 > unsure
