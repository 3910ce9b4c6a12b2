"""Judging: at most `max_in_flight` interactions on the scoring worker at once, each collected once with its
results (the real offline judge on the real worker loop; no broker)."""

from __future__ import annotations

import time
from pathlib import Path

from _helpers import judge_client, nothing_left_open
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from tracescore.consume import ConsumerStats, TraceAssembler
from tracescore.consume._checkpoint import Checkpoint, Work
from tracescore.consume._judging import Judged, Judging
from tracescore.consume._pipeline import Pipeline
from tracescore.consume._revise import Revision
from tracescore.consume._scorer import Scorer
from tracescore.consume._scoring import ScoringWorker
from tracescore.model import MetricStatus
from tracescore.score import Judge, OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.judge_server import JudgeServer

RECORDING = Path(__file__).parents[1] / "extract" / "fixtures" / "openinference_manual" / "faithful.binpb"


def interaction() -> Revision:
    value = RECORDING.read_bytes()
    steps = Pipeline(TraceAssembler(), ConsumerStats())
    steps.take([ConsumerRecord("spans", 0, -1, 0, 0, 0, None, value, [], None, -1, len(value), -1)])
    [trace] = steps.flush()
    return trace.interactions[0][0]


def judging_with(judge: Judge, max_in_flight: int = 1) -> Judging:
    """Faithfulness by `judge` on the real worker loop, `max_in_flight` at once."""
    return Judging(Scorer(judge, [Faithfulness()]), max_in_flight=max_in_flight)


def held(scoring: int) -> Work:
    """Work read from spans[0] at offset 0, waiting for `scoring` interactions."""
    return Checkpoint(TraceAssembler(), commit_interval_s=5.0).hold(
        {TopicPartition("spans", 0): 0}, scoring=scoring
    )


def collect(judging: Judging, count: int, timeout_s: float = 30.0) -> list[Judged]:
    done: list[Judged] = []
    deadline = time.monotonic() + timeout_s
    while len(done) < count and time.monotonic() < deadline:
        done += judging.finished()
        time.sleep(0.01)
    return done


def test_scores_at_most_max_in_flight_at_once_and_collects_each_once() -> None:
    judging = judging_with(OfflineJudge(), 2)
    work = held(3)
    revision = interaction()
    for _ in range(3):
        judging.queue(work, revision, None)
    worker = ScoringWorker()
    try:
        judging.submit(worker)
        assert (judging.running, judging.queued, judging.pending) == (2, 1, 3)
        first = collect(judging, 2)
        judging.submit(worker)
        rest = collect(judging, 1)
    finally:
        worker.close()
    assert len(first) == 2 and len(rest) == 1 and judging.pending == 0
    for judged in first + rest:
        assert judged.work is work and judged.interaction is revision.interaction
        assert judged.scored is not None
        [result] = judged.scored.results
        assert result.metric == "faithfulness" and result.status is MetricStatus.OK


def test_dropping_the_queue_leaves_what_is_running() -> None:
    judging = judging_with(OfflineJudge(), 1)
    work = held(2)
    revision = interaction()
    judging.queue(work, revision, None)
    judging.queue(work, revision, None)
    worker = ScoringWorker()
    try:
        judging.submit(worker)
        assert judging.drop_queued() == 1
        assert len(collect(judging, 1)) == 1
    finally:
        worker.close()
    assert judging.pending == 0


def test_on_revoke_a_trace_not_started_is_left_and_the_rest_of_a_started_one_goes_to_the_judges() -> None:
    judging = judging_with(OfflineJudge(), 1)
    checkpoint = Checkpoint(TraceAssembler(), commit_interval_s=5.0)
    revoked, kept = TopicPartition("spans", 0), TopicPartition("spans", 1)
    started = checkpoint.hold({revoked: 0}, trace_id="started", scoring=2)
    waiting = checkpoint.hold({revoked: 1}, trace_id="waiting", scoring=1)
    elsewhere = checkpoint.hold({kept: 0}, trace_id="elsewhere", scoring=1)
    revision = interaction()
    for work in (started, started, waiting, elsewhere):
        judging.queue(work, revision, None)
    worker = ScoringWorker()
    try:
        judging.submit(worker)  # one of `started`'s two interactions
        running = judging.revoke({revoked}, worker)
        assert len(running) == 2, "both of the started trace's interactions, past max_in_flight"
        assert judging.queued == 1, "the kept partition's work waits as before; `waiting` is left"
        done = collect(judging, 2)
    finally:
        worker.close()
    assert [j.work for j in done] == [started, started]


def test_results_of_work_handed_over_are_dropped() -> None:
    judging = judging_with(OfflineJudge(), 1)
    work = held(1)
    judging.queue(work, interaction(), None)
    worker = ScoringWorker()
    try:
        judging.submit(worker)
        work.handed_over = True  # its partition went to another member meanwhile
        deadline = time.monotonic() + 30
        while judging.running and time.monotonic() < deadline:
            assert list(judging.finished()) == []
            time.sleep(0.01)
    finally:
        worker.close()
    assert judging.running == 0 and judging.dropped == 1


def test_closing_the_worker_closes_the_llm_judges_connections() -> None:
    """A stopped consumer leaves no socket of its LLM judge open (the judge's client closes when the worker's
    loop finalises its async generators, as asyncio.run does)."""
    with nothing_left_open():
        with JudgeServer() as server:
            llm = judge_client(server.base_url)
            judging = judging_with(llm)
            work = held(1)
            judging.queue(work, interaction(), None)
            worker = ScoringWorker()
            try:
                judging.submit(worker)
                [judged] = collect(judging, 1)
            finally:
                worker.close()
        assert judged.scored is not None and judged.scored.results[0].status is MetricStatus.OK
        del llm, judging, judged
