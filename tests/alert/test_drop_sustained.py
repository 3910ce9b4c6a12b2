"""A drop rule's sustained-drop test (a CUSUM against the route's normal): a drop too small for the window
test's bound pages once it lasts, a healthy route does not, the alarm resolves when the route is back, and
its evidence survives a restart without counting an answer twice."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from typing import Any

import pytest
from alert_records import llm_record, record

from tracescore.alert import (
    AlertConfig,
    AlertEvaluator,
    AlertKey,
    AlertState,
    DropConfig,
    DropState,
    RuleConfig,
)
from tracescore.alert._cusum import Sustained
from tracescore.alert._estimate import R_N, R_SQUARES, R_SUM, empty_sums
from tracescore.model import EvaluationRecord

KEY = AlertKey("rag-api", "/summarize", "faithfulness")
DROP = "TracescoreFaithfulnessBelowNormal"
# A route of long answers: the offline judge passes 60% of them when healthy; the window test (100 answers
# at 99.999%) cannot bound a drop of 0.1 above its min_drop of 0.05, the sustained test is designed for it.
RULE = {
    "min_drop": 0.05,
    "window_count": 100,
    "min_samples": 50,
    "normal_count": 2000,
    "min_normal_samples": 1000,
    "confidence": 0.99999,
    "floor_seconds": None,
}


def evaluator(**drop: Any) -> AlertEvaluator:
    rule = RuleConfig(
        warning=None, critical=None, window_count=20, window_seconds=86_400, cooldown_seconds=0,
        renotify_seconds=None, no_data_seconds=None, drop=DropConfig(**{**RULE, **drop}),
    )  # fmt: skip
    return AlertEvaluator(AlertConfig(rules=[rule]))


class Route:
    def __init__(self, ev: AlertEvaluator, seed: int) -> None:
        self.ev, self.rng, self.at = ev, random.Random(seed), record(1.0).timestamp
        self.records: list[EvaluationRecord] = []

    def answers(self, n: int, passing: float) -> list[Any]:
        out = []
        for _ in range(n):
            self.at += timedelta(minutes=1)
            self.records.append(record(1.0 if self.rng.random() < passing else 0.0, self.at, KEY.route))
            self.ev.add(self.records[-1])
            out += [note for note in self.ev.evaluate(KEY, self.at) if note.alertname == DROP]
        return out


def pages(notes: list[Any]) -> list[Any]:
    return [n for n in notes if n.state == "firing" and not n.repeat]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_small_drop_that_lasts_pages_once_as_a_sustained_drop(seed: int) -> None:
    route, window_only = Route(evaluator(), seed), Route(evaluator(sustained_every=None), seed)
    for r in (route, window_only):
        assert pages(r.answers(3000, 0.6)) == []
    assert pages(window_only.answers(5000, 0.5)) == []  # the window test alone misses it
    (page,) = pages(route.answers(5000, 0.5))
    assert page.drop_test == "sustained" and page.severity == "warning"
    assert "a sustained drop" in page.summary and "one false alarm per 250,000 answers" in page.summary
    assert page.normal == pytest.approx(0.6, abs=0.04)
    assert page.drop == pytest.approx(0.1, abs=0.05) and page.samples >= 100  # since the drop began


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_healthy_route_of_10000_answers_never_pages(seed: int) -> None:
    route = Route(evaluator(), seed)
    assert pages(route.answers(10_000, 0.6)) == []
    status = route.ev.drop_status(KEY, route.at)
    assert status is not None and status.ready and not status.alarm and status.evidence < 1


def test_the_alarm_resolves_when_the_route_is_back_at_its_normal() -> None:
    route = Route(evaluator(), 1)
    route.answers(3000, 0.6)
    assert len(pages(route.answers(5000, 0.5))) == 1
    resolved = [n for n in route.answers(3000, 0.6) if n.state == "resolved"]
    assert len(resolved) == 1 and "back to its normal" in resolved[0].summary
    status = route.ev.drop_status(KEY, route.at)
    assert status is not None and not status.alarm


def test_its_evidence_survives_a_restart_and_an_answer_read_again_is_not_weighed_twice() -> None:
    ev = evaluator()
    route = Route(ev, 2)
    route.answers(3000, 0.6)
    route.answers(200, 0.5)  # evidence, no alarm yet
    before = ev.drop_status(KEY, route.at)
    state = ev.state_of(KEY)
    assert before is not None and state is not None and state.drop is not None
    assert state.drop.cusum > 0 and state.drop.cusum_run is not None
    again = evaluator()  # a new instance: the state topic's value, then the last minutes read again
    again.restore(KEY, AlertState.model_validate_json(state.model_dump_json()))
    for r in route.records[-60:]:
        again.add(r, replay=True)
    after = again.drop_status(KEY, route.at)
    assert after is not None and after.evidence == pytest.approx(before.evidence)


def test_a_state_written_before_the_sustained_test_reads_as_its_silent_start() -> None:
    older = {"level": "ok", "drop": {"level": "ok", "recent": [], "normal": []}}
    state = AlertState.model_validate_json(json.dumps(older))
    assert state.drop is not None
    assert (state.drop.cusum, state.drop.cusum_drop, state.drop.cusum_run) == (0.0, None, None)


def _answer(value: float) -> list[float]:
    part = empty_sums()
    part[R_N], part[R_SUM], part[R_SQUARES] = 1, value, value * value
    return part


def _normal(level: float, n: int) -> list[float]:
    normal = empty_sums()
    normal[R_N], normal[R_SUM], normal[R_SQUARES] = n, level * n, level * n  # answers of value 0 or 1
    return normal


def test_the_cusum_adds_evidence_only_while_the_answers_sit_below_the_normal() -> None:
    state = DropState()
    test = Sustained(0.05, 1_000_000, state)
    normal = _normal(0.6, 5000)
    for value in [1.0, 1.0, 1.0]:
        test.add(value, _answer(value), normal, 0.0)
    assert state.cusum == 0.0 and not any(test.run)  # above the normal: no evidence, no run
    for value in [0.0, 0.0]:
        test.add(value, _answer(value), normal, 0.0)
    assert state.cusum > 0 and test.run[R_N] == 2
    test.add(0.0, _answer(0.0), normal, 0.0, sign=-1.0)  # a later record replaces one: taken back
    assert test.run[R_N] == 1


def test_the_llm_baseline_s_correction_does_not_page_a_healthy_route() -> None:
    # The offline judge passes 60% of the answers, the LLM judge (a 10% baseline) 90%: the correction is
    # about +0.3, the same for the normal and every answer, so it must not move the test.
    ev, rng = evaluator(), random.Random(7)
    at = record(1.0).timestamp
    for _ in range(10_000):
        at += timedelta(minutes=1)
        offline = record(1.0 if rng.random() < 0.6 else 0.0, at, KEY.route)
        batch = [offline]
        if rng.random() < 0.1:
            batch.append(llm_record(offline, 1.0 if rng.random() < 0.9 else 0.0, "baseline", 0.1))
        for r in batch:
            ev.add(r)
        assert pages([n for n in ev.evaluate(KEY, at) if n.alertname == DROP]) == []
    status = ev.drop_status(KEY, at)
    assert status is not None and status.calibrated and status.evidence < 1


@pytest.mark.parametrize("level", [0.3, 0.45, 0.62])
def test_at_its_normal_s_lower_limit_a_route_pages_no_more_often_than_sustained_every_says(
    level: float,
) -> None:
    # The false-alarm rate is bounded by construction, whatever the judge's pass rate: a route whose true
    # level is the normal's lower confidence limit (a young normal of 1,000 answers that read high) pages
    # about once per `every` answers at most. Set at the normal's level instead, the same setting paged
    # 3 to 5 times as often here, more the less closely the normal was known.
    every, answers = 50_000, 200_000
    state, normal, rng = DropState(), _normal(level, 1000), random.Random(11)
    test = Sustained(0.1, every, state)
    levels = test.levels(normal, 0.0)
    assert levels is not None
    truth, alarms = levels[0], 0
    for _ in range(answers):
        value = 1.0 if rng.random() < truth else 0.0
        test.add(value, _answer(value), normal, 0.0)
        if test.alarm:
            alarms += 1
            test.reset()
    assert alarms <= 2 * answers / every
