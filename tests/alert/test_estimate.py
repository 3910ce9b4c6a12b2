"""The rolling estimate: both judges, each interaction once, weighted by inclusion probability."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from alert_records import T0, llm_record, record

from tracescore.alert import AlertConfig, AlertEvaluator, AlertKey, EstimateWindow, RuleConfig
from tracescore.model import EvaluationRecord

BASELINE = 0.1


def route_at_80_percent() -> list[EvaluationRecord]:
    """100 answers, 80 faithful. The offline judge scores hallucinations 0.2, 15 faithful answers 0.3 (false
    suspicion) and the rest 0.9; the cascade sends the 35 suspicious ones to a perfect LLM judge, and a 10%
    baseline (every 10th of the rest here) goes there too. Kinds of answer are spread over time."""
    out: list[EvaluationRecord] = []
    for t in range(100):
        at, i = T0 + timedelta(seconds=t), (t * 37) % 100
        truth = 0.0 if i < 20 else 1.0
        offline = record(0.2 if i < 20 else 0.3 if i < 35 else 0.9, at)
        out.append(offline)
        if i < 35:
            out.append(llm_record(offline, truth, "cascade", 1.0))
        elif i % 10 == 0:
            out.append(llm_record(offline, truth, "baseline", BASELINE))
    return out


def window_of(records: list[EvaluationRecord], maxlen: int = 1000) -> EstimateWindow:
    window = EstimateWindow(maxlen)
    for r in records:
        window.add(r)
    return window


def test_each_interaction_counts_once_with_the_llm_correcting_the_offline_judge() -> None:
    records = route_at_80_percent()
    mixed = sum(r.score or 0 for r in records) / len(records)
    assert mixed < 0.65  # what one window of every record said: a page on a route 80% faithful
    estimate = window_of(records).estimate(0.9)
    assert estimate is not None
    assert estimate.n == 100
    assert estimate.value == pytest.approx(0.8)
    assert estimate.lower < 0.8 < estimate.upper
    assert (estimate.offline_n, estimate.llm_n, estimate.calibrated) == (65, 35 + 6, True)


def test_the_alert_evaluator_fires_on_the_estimate_not_on_the_mixed_window() -> None:
    rule = RuleConfig(window_count=500, min_samples=10, warning=0.7, critical=None)
    ev = AlertEvaluator(AlertConfig(rules=[rule]))
    notes = []
    for r in route_at_80_percent():
        key = ev.add(r)
        assert key is not None
        notes += ev.evaluate(key, r.timestamp)
    assert notes == []
    estimate = ev.estimate(AlertKey("rag-api", "/billing", "faithfulness"), T0 + timedelta(seconds=100))
    assert estimate is not None and estimate.value == pytest.approx(0.8)


def test_a_drop_fires_with_the_estimate_interval_and_counts_in_the_notification() -> None:
    rule = RuleConfig(signal="score", window_count=500, min_samples=10, warning=0.7, critical=None)
    ev = AlertEvaluator(AlertConfig(rules=[rule]))
    notes = []
    for i in range(60):
        offline = record(0.2 if i % 2 else 0.9, T0 + timedelta(seconds=i))
        key = ev.add(offline)
        if i % 2:
            ev.add(llm_record(offline, 0.0, "cascade", 1.0))
        assert key is not None
        notes += ev.evaluate(key, offline.timestamp)
    assert [(n.state, n.severity) for n in notes] == [("firing", "warning")]
    note = notes[0]
    assert note.bound is not None and note.lower is not None and note.lower < note.value < note.bound < 0.7  # type: ignore[operator]
    assert note.llm_samples and note.offline_samples and note.calibrated is False  # no baseline pairs yet
    assert "offline +" in note.summary and "LLM scores" in note.summary and "signal score" in note.summary
    assert note.signal == "score"


def test_offline_only_is_the_plain_mean_flagged_uncalibrated() -> None:
    estimate = window_of([record(s) for s in (0.2, 0.4, 0.6, 0.8)]).estimate(0.9)
    assert estimate is not None
    assert estimate.value == pytest.approx(0.5)
    assert (estimate.offline_n, estimate.llm_n, estimate.calibrated) == (4, 0, False)
    assert "uncalibrated" in estimate.describe()


def test_a_newer_record_of_an_interaction_replaces_the_older_and_a_lower_revision_never_does() -> None:
    first = record(0.1)
    window = window_of([first, first.model_copy(update={"score": 0.9})])
    estimate = window.estimate(0.9)
    assert estimate is not None and (estimate.n, estimate.value) == (1, pytest.approx(0.9))
    # A re-scored trace's records carry a revision; one read late with a lower revision is ignored.
    revised = first.model_copy(update={"score": 0.5})
    object.__setattr__(revised, "revision", 2)
    stale = first.model_copy(update={"score": 0.0})
    object.__setattr__(stale, "revision", 1)
    window.add(revised)
    window.add(stale)
    estimate = window.estimate(0.9)
    assert estimate is not None and (estimate.n, estimate.value) == (1, pytest.approx(0.5))


def test_llm_records_of_an_older_consumer_baseline_is_used_cascade_is_left_out_and_counted() -> None:
    a, b = record(0.9), record(0.2, T0 + timedelta(seconds=1))
    window = window_of([a, b, llm_record(a, 1.0, "baseline", None), llm_record(b, 0.0, "cascade", None)])
    estimate = window.estimate(0.9)
    assert estimate is not None
    assert estimate.excluded == 1
    # b keeps its offline score (0.2); the baseline pair corrects the rest by +0.1.
    assert estimate.value == pytest.approx((0.9 + 0.2 + 2 * 0.1) / 2)


def test_a_judge_outage_leaves_the_offline_score_and_never_fails() -> None:
    a = record(0.3)
    window = window_of([a, llm_record(a, None, "cascade", 1.0)])
    estimate = window.estimate(0.9)
    assert estimate is not None and (estimate.value, estimate.llm_n) == (pytest.approx(0.3), 0)


def test_the_window_keeps_the_newest_interactions_and_ages_out() -> None:
    records = [record(float(i % 2), T0 + timedelta(seconds=i)) for i in range(10)]
    window = window_of(records, maxlen=4)
    assert len(window) == 4
    window.add(record(0.0, T0 - timedelta(seconds=5)))  # older than a full window: no place in it
    assert len(window) == 4
    window.prune(T0 + timedelta(seconds=8))
    assert len(window) == 2


def test_agreement_on_the_baseline_pairs() -> None:
    pairs = [(0.9, 1.0), (0.8, 1.0), (0.2, 0.0), (0.9, 0.0)]  # the last one missed by the offline judge
    records = []
    for i, (offline, llm) in enumerate(pairs):
        r = record(offline, T0 + timedelta(seconds=i))
        records += [r, llm_record(r, llm, "baseline", BASELINE)]
    cascade = record(0.1, T0 + timedelta(seconds=9))
    records += [cascade, llm_record(cascade, 1.0, "cascade", 1.0)]  # targeted: not an agreement pair
    agreement = window_of(records).agreement(0.5)
    assert agreement.pairs == 4
    assert agreement.agreement == pytest.approx(0.75)
    assert agreement.recall == pytest.approx(0.5)
    assert agreement.mean_difference == pytest.approx((0.1 + 0.2 - 0.2 - 0.9) / 4)


def test_an_offline_score_that_says_nothing_within_the_rest_is_not_trusted() -> None:
    # In R the offline judge gives 0.5 or 1.0 at random while the LLM judge finds every answer faithful: the
    # plain difference would carry the offline noise; the tuned estimate (λ near 0) is the LLM's 1.0, tighter.
    records = []
    for i in range(400):
        r = record(0.5 if i % 3 == 0 else 1.0, T0 + timedelta(seconds=i))
        records.append(r)
        if i % 10 == 0:
            records.append(llm_record(r, 1.0, "baseline", BASELINE))
    estimate = window_of(records).estimate(0.975)
    assert estimate is not None
    assert estimate.value == pytest.approx(1.0)
    assert estimate.upper - estimate.lower < 0.05


def test_the_correction_uses_the_routes_earlier_baseline_pairs_not_only_the_windows() -> None:
    # A 1% baseline gives a window of 50 about one pair: on its own the interval is as wide as the prior
    # makes it. The offline judge misses 20% hallucinations among the answers it does not find suspicious;
    # its earlier pairs on the route say so, and the window's estimate narrows around the truth (0.8).
    def traffic(n: int, start: int) -> list[EvaluationRecord]:
        out = []
        for t in range(start, start + n):
            offline = record(1.0, T0 + timedelta(seconds=t))  # the offline judge sees nothing wrong
            out.append(offline)
            if t % 20 == 0:  # a 5% baseline on this route: each window of 50 holds 2 or 3 pairs
                out.append(llm_record(offline, 0.0 if t % 100 == 0 else 1.0, "baseline", 0.05))
        return out

    history, recent = traffic(2000, 0), traffic(50, 2000)
    fresh = window_of(recent, maxlen=50).estimate(0.975)
    pooled = window_of(history + recent, maxlen=50).estimate(0.975)
    assert fresh is not None and pooled is not None
    assert pooled.n == fresh.n == 50 and pooled.pairs > 100 > fresh.pairs
    assert pooled.value == pytest.approx(0.8, abs=0.03)
    assert pooled.lower < 0.8 < pooled.upper
    assert pooled.upper - pooled.lower < 0.5 * (fresh.upper - fresh.lower)


def test_an_estimate_read_after_every_record_equals_one_read_once_at_the_end() -> None:
    # The pairs' statistics are cached between changes: reading the estimate after every record (as the
    # alert evaluator does) must give exactly what a window read once gives, through pairs joining, being
    # replaced by a newer revision and falling out of the pair memory.
    rng = random.Random(5)
    records = []
    for t in range(600):
        offline = record(rng.choice([0.0, 0.2, 0.6, 1.0]), T0 + timedelta(seconds=t))
        records.append(offline)
        if t % 3 == 0:
            baseline = llm_record(offline, float(rng.random() < 0.7), "baseline", 0.3)
            records.append(baseline)
            if t % 9 == 0:  # a late span's revision replaces the pair
                records.append(baseline.model_copy(update={"score": 1.0 - baseline.score, "revision": 1}))
    watched, once = EstimateWindow(50, pair_memory=60), EstimateWindow(50, pair_memory=60)
    for i, rec in enumerate(records):
        watched.add(rec)
        once.add(rec)
        seen = watched.estimate(0.95)
        if i % 97 == 96:  # a window read only now computes its pairs' statistics afresh
            fresh = EstimateWindow(50, pair_memory=60)
            for earlier in records[: i + 1]:
                fresh.add(earlier)
            assert seen == fresh.estimate(0.95)
    assert watched.estimate(0.95) == once.estimate(0.95)
    assert once.estimate(0.95).pairs == 60  # type: ignore[union-attr]


def test_a_short_windows_interval_is_as_wide_as_its_own_answers_swing() -> None:
    # The route's earlier pairs: the offline judge agrees with the LLM judge, which passes 95% (its scores
    # barely vary). Then a window of 12 answers whose offline scores swing 1, 0, 1, 0: the estimate moves with
    # λ times their mean, so its interval must be as wide as that swing says, not as the LLM scores' spread
    # over the pairs (too narrow: a healthy short window paged on chance, 48% of healthy weeks).
    history = []
    for t in range(2000):
        good = t % 20 != 0
        offline = record(1.0 if good else 0.0, T0 + timedelta(seconds=t))
        history.append(offline)
        if t % 7 == 0:  # a uniform baseline: its LLM scores pass 95%, barely varying
            history.append(llm_record(offline, 1.0 if good else 0.0, "baseline", 0.1))
    recent = [record(float(t % 2 == 0), T0 + timedelta(seconds=2000 + t)) for t in range(12)]
    pooled = window_of(history + recent, maxlen=12).estimate(0.95)
    offline_only = window_of(recent, maxlen=12).estimate(0.95)
    assert pooled is not None and offline_only is not None
    assert pooled.settled and pooled.value == pytest.approx(0.5, abs=0.05)
    assert pooled.upper - pooled.value >= 0.9 * (offline_only.upper - offline_only.value)
