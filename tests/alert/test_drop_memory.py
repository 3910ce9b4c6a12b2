"""What a drop rule remembers of the answers it counted: enough for a late record of any of the last
`_SETTLED` to replace its first count, in memory that stays bounded however many answers a route has seen."""

from __future__ import annotations

import gc
import random
import types
from collections import OrderedDict
from datetime import timedelta
from typing import Any

import pytest
from alert_records import T0, llm_record, record

from tracescore.alert import AlertConfig, AlertEvaluator, AlertKey, DropConfig, RuleConfig, default_rule
from tracescore.alert._drop import _MAX_BUCKETS, _SETTLED, _Settled
from tracescore.alert._estimate import SUMS_LEN
from tracescore.alert._state import Moments
from tracescore.model import EvaluationRecord

KEY = AlertKey("rag-api", "/billing", "faithfulness")
WINDOW = 20  # the rule's own window: an answer is counted once it leaves it


def evaluator() -> AlertEvaluator:
    # A drop window that holds every answer of these tests: none leaves its bucket (in the normal's, a late
    # record finds it no more), so only what the drop rule remembers decides.
    drop = DropConfig(window_count=1400, min_samples=50, normal_count=2800)
    rule = RuleConfig(
        warning=None, critical=None, window_count=WINDOW, window_seconds=86_400, cooldown_seconds=0,
        renotify_seconds=None, no_data_seconds=None, drop=drop,
    )  # fmt: skip
    return AlertEvaluator(AlertConfig(rules=[rule]))


def counted(ev: AlertEvaluator) -> Moments:
    """The sums of every bucket of the route's drop rule, as its saved state holds them."""
    state = ev.state_of(KEY)
    assert state is not None and state.drop is not None
    assert state.drop.withheld is None and state.drop.held_since is None  # nothing held back
    buckets = [*state.drop.recent, *state.drop.normal]
    return Moments(**{name: sum(getattr(b.moments, name) for b in buckets) for name in Moments.model_fields})


def _labelled(r: EvaluationRecord) -> EvaluationRecord:
    return r.model_copy(update={"label": "faithful" if r.score else "hallucinated"})


def test_a_late_record_of_any_of_the_last_counted_answers_replaces_its_first_count() -> None:
    answers = _SETTLED + 300
    # Four in five faithful: a few answers revised to 0.0 stay within the route's normal (none held back).
    records = [_labelled(record(float(i % 5 > 0), T0 + timedelta(minutes=i))) for i in range(answers)]
    late_at = T0 + timedelta(minutes=answers)
    # Counted when the late records leave the rule's window: every answer; remembered: the last _SETTLED.
    oldest_remembered = answers - _SETTLED
    revised = [oldest_remembered + 4, answers // 2 + 1, answers - WINDOW - 4]  # each faithful, revised: 0.0
    forgotten = oldest_remembered - WINDOW - 2  # forgotten already when its late record is read
    paired = answers - WINDOW - 9  # the LLM judge's baseline record: the same value, now a pair
    assert all(records[i].score == 1.0 for i in [*revised, forgotten, paired])
    late = [
        _labelled(records[i].model_copy(update={"revision": 1, "score": 0.0, "timestamp": late_at}))
        for i in [*revised, forgotten]
    ]
    baseline = llm_record(records[paired], 1.0, "baseline", 0.05, at=late_at)
    late.append(_labelled(baseline.model_copy(update={"offline_label": "faithful"})))
    # Then enough answers that the late records leave the rule's window (where they are counted).
    then = [_labelled(record(1.0, late_at + timedelta(minutes=1 + i))) for i in range(WINDOW + 5)]

    with_late, without = evaluator(), evaluator()
    for ev, fed in ((with_late, [*records, *late, *then]), (without, [*records, *then])):
        for r in fed:
            ev.add(r)
            ev.evaluate(KEY, r.timestamp)
    got, base = counted(with_late), counted(without)
    assert base.r_n == answers + len(then) - WINDOW  # all counted, none late
    # The revisions of remembered answers replaced them (1.0 -> 0.0); the forgotten one's counts anew (0.0).
    assert got.r_n == base.r_n + 1
    assert got.r_sum == pytest.approx(base.r_sum - len(revised))
    assert got.r_squares == pytest.approx(base.r_squares - len(revised))
    assert (got.pairs, got.llm_n, got.offline_n) == (1, 1, base.offline_n + 1)  # the pair: its LLM value too
    state = with_late.state_of(KEY)
    assert state is not None and state.drop is not None and state.drop.late == 0


def _reachable(root: object) -> int:
    """How many objects `root` holds (classes, modules, functions and the rule's config left out)."""
    shared = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, DropConfig, RuleConfig)
    seen, todo = {id(root)}, [root]
    while todo:
        for held in gc.get_referents(todo.pop()):
            if id(held) not in seen and not isinstance(held, shared):
                seen.add(id(held))
                todo.append(held)
    return len(seen)


def test_a_route_holds_a_bounded_number_of_objects_however_many_answers_it_has_seen() -> None:
    ev = AlertEvaluator(AlertConfig(rules=[default_rule()]))
    held: dict[int, int] = {}
    for i in range(3 * _SETTLED):
        r = record(1.0 if i % 5 else 0.0, T0 + timedelta(seconds=10 * i))
        ev.add(r)
        ev.evaluate(KEY, r.timestamp)
        if i + 1 in (_SETTLED, 3 * _SETTLED):
            held[i + 1] = _reachable(ev._routes[KEY])
    route: Any = ev._routes[KEY]
    assert route.drop is not None and len(route.drop._settled) == _SETTLED
    # Not an object per answer remembered for a late record of it: past the first answers, only the drop
    # rule's buckets (bounded) add objects.
    assert held[_SETTLED] < _SETTLED
    assert held[3 * _SETTLED] - held[_SETTLED] < 2 * _MAX_BUCKETS * (SUMS_LEN + 2)


@pytest.mark.parametrize("size", [1, 2, 7, 100])
def test_the_remembered_answers_are_the_last_ones_counted_each_with_what_it_last_added(size: int) -> None:
    rng = random.Random(size)
    kept, expected = _Settled(size), OrderedDict[tuple[str, str], tuple[int, int, float]]()
    keys = [(f"{i:032x}", f"{i:016x}") for i in range(5 * size + 10)]
    for _ in range(200 * size):
        key = rng.choice(keys)
        if rng.random() < 0.6:  # counted, or a late record replacing what it added: its place kept
            added = (rng.randrange(100), rng.randrange(64), rng.random())
            kept.put(key, *added)
            expected[key] = added
            while len(expected) > size:
                expected.popitem(last=False)
        assert kept.get(key) == expected.get(key)
        assert (key in kept) == (key in expected) and len(kept) == len(expected)
    assert all(kept.get(key) == expected.get(key) for key in keys)
