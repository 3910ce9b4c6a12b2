"""The threads a plain-Python custom metric runs on (tracescore/score/metrics/_threads.py): at most 8 per
metric, ended when idle, and a hung function holding no more than its threads and the calls still awaited."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable

import pytest

from tracescore.model import MetricStatus, RagRecord
from tracescore.score import evaluate_dataset
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import DistinctN, PythonMetric, _threads, evaluate_record, python_metric
from tracescore.score.metrics._threads import THREADS_PER_METRIC, DaemonThreads

RECORD = RagRecord(id="r", query="Where?", contexts=("In Delhi.",), answer="Delhi.")
WAIT_S = 30  # a bound on a real condition awaited, not a timing assertion


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def named(metric: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"metric-{metric}-")]


def test_at_most_8_threads_run_a_metric_the_other_calls_wait() -> None:
    release = threading.Event()
    pool = DaemonThreads("capped")
    futures = [pool.submit(lambda: release.wait(WAIT_S), deadline=None) for _ in range(20)]
    wait_until(lambda: pool.waiting == 20 - THREADS_PER_METRIC, "8 calls taken")
    assert pool.threads == THREADS_PER_METRIC == len(named("capped"))
    release.set()
    assert all(f.result(WAIT_S) is True for f in futures)


async def test_an_idle_metric_thread_ends_and_the_next_call_starts_one_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A metric no longer called held its threads for the life of the process."""
    monkeypatch.setattr(_threads, "THREAD_IDLE_S", 0.2)
    calls: list[str] = []

    def idle_after(answer: str) -> float:
        calls.append(answer)
        return 1.0

    metric = PythonMetric(idle_after)
    (first,) = await evaluate_record(RECORD, [metric], OfflineJudge())
    assert first.status is MetricStatus.OK and len(named("idle_after")) == 1
    await asyncio.to_thread(wait_until, lambda: not named("idle_after"), "the idle thread ended")
    (again,) = await evaluate_record(RECORD, [metric], OfflineJudge())
    assert again.status is MetricStatus.OK and calls == [RECORD.answer] * 2


async def test_a_hung_metric_holds_its_8_threads_and_refuses_further_calls_at_once() -> None:
    """Records given to a metric whose calls all hang queued behind its threads without end, each holding
    its record after its caller gave up. Now a call that timed out waiting is dropped at once, and once
    every thread runs a call past its time limit a further call is an ERROR at once, never queued: its
    interaction is scored by the other metrics, the consumer counts it in judge_errors and goes on."""
    release = threading.Event()

    def hangs(answer: str) -> float:
        release.wait(WAIT_S)  # a hung HTTP call
        return 1.0

    metric = PythonMetric(hangs, timeout_s=0.2)
    judge = OfflineJudge()
    first = [RECORD.model_copy(update={"id": f"first{i}"}) for i in range(THREADS_PER_METRIC + 4)]
    held = [weakref.ref(r) for r in first]
    try:
        results = await asyncio.gather(*(evaluate_record(r, [metric], judge) for r in first))
        assert {res.reason for (res,) in results} == {
            "hangs took longer than 0.2s (timeout_s); its result is not waited for "
            "(a thread cannot be stopped: the call runs on until it returns)"
        }
        del first, results
        gc.collect()
        assert sum(ref() is not None for ref in held) == THREADS_PER_METRIC, "the running calls' alone"

        later = [RECORD.model_copy(update={"id": f"later{i}"}) for i in range(50)]
        dropped = [weakref.ref(r) for r in later]
        refused = await asyncio.gather(*(evaluate_record(r, [metric], judge) for r in later))
        assert {(res.status, res.reason) for (res,) in refused} == {
            (
                MetricStatus.ERROR,
                "hangs was not run: each of its 8 threads runs a call past its 0.2s (timeout_s) that has "
                "not returned, and no call waits behind them (a hung function would hold every record "
                "given to it); it runs again once one of them returns",
            )
        }
        del later, refused
        gc.collect()
        assert not [ref for ref in dropped if ref() is not None], "no record held"
    finally:
        release.set()
    threads = metric._threads
    assert threads is not None
    await asyncio.to_thread(wait_until, lambda: threads.running == 0, "the hung calls returned")
    (back,) = await evaluate_record(RECORD, [metric], judge)
    assert back.status is MetricStatus.OK, "scored again once its calls returned"


def test_a_file_scored_with_a_hung_metric_is_scored_by_the_others_each_record_s_miss_explained() -> None:
    """What happens to a record the hung metric cannot score: its row has the other metrics' scores, and
    the metric's error with why; the summary counts it unscored (the consumer: judge_errors)."""
    release = threading.Event()

    @python_metric(timeout_s=0.2)
    def hangs(answer: str) -> float:
        release.wait(WAIT_S)
        return 1.0

    rows = [
        {"id": f"r{i}", "query": "Where?", "contexts": ["In Delhi."], "answer": "In Delhi."}
        for i in range(40)
    ]
    try:
        result = evaluate_dataset(rows, [hangs, DistinctN(1)])
    finally:
        release.set()
    assert [row["distinct_1"] for row in result.rows] == [1.0] * 40
    assert result.summary.unscored == {"hangs": 40, "distinct_1": 0}
    reasons = Counter(row["reason"].split(" (", 1)[0] for row in result.rows)
    assert set(reasons) == {
        "hangs: hangs took longer than 0.2s",
        "hangs: hangs was not run: each of its 8 threads runs a call past its 0.2s",
    }, reasons
    assert reasons["hangs: hangs took longer than 0.2s"] >= THREADS_PER_METRIC
