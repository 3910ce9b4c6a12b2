"""Outputs: a judged interaction's records and a dead letter are sent through the sink, held until Kafka
acknowledges them, and only then counted and handed to the other sinks. No broker: the evaluation sink here
keeps what it is given in memory (it is tracescore's own seam), and Kafka's own futures stand for the
producer's acknowledgements."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord
from kafka.errors import KafkaTimeoutError
from kafka.future import Future

from tracescore.consume import ConsumerStats, NotOtlp, TraceAssembler
from tracescore.consume._checkpoint import Checkpoint
from tracescore.consume._judging import Judged
from tracescore.consume._outputs import Outputs
from tracescore.consume._pipeline import DeadLetter, Pipeline
from tracescore.consume._revise import Revision
from tracescore.consume._scorer import ScoredInteraction
from tracescore.consume._status import StatusLine
from tracescore.consume._stopping import Wait
from tracescore.emit import EvaluationMetrics, Output, evaluation_record
from tracescore.model import EvaluationRecord, Interaction, MetricResult, MetricStatus
from tracescore.score.judges import Judge, OpenAIJudge, OpenAIJudgeSettings

RECORDING = Path(__file__).parents[1] / "extract" / "fixtures" / "openinference_manual" / "faithful.binpb"
TP = TopicPartition("spans", 0)


class MemorySink:
    """The evaluation sink's seam, in memory: one pending Kafka future per message, resolved by the test."""

    def __init__(self) -> None:
        self.truncated = 3
        self.records: list[tuple[EvaluationRecord, Future]] = []
        self.dead_letters: list[tuple[tuple[object, ...], Future]] = []
        self.flushed: list[float] = []

    def write(
        self,
        interaction: Interaction,
        results: Sequence[MetricResult],
        start_ns: int,
        selection: Callable[[MetricResult], str | None],
        weighting: Callable[[MetricResult], dict[str, float | str | None]],
        revision: int,
        supersedes: str | None,
    ) -> tuple[list[EvaluationRecord], list[Output]]:
        records, outputs = [], []
        for result in results:
            record = evaluation_record(
                interaction, result, None, selection=selection(result), revision=revision,
                supersedes=supersedes, **weighting(result),
            )  # fmt: skip
            future = Future()
            self.records.append((record, future))
            records.append(record)
            outputs.append(Output(future, f"record {result.metric}"))
        return records, outputs

    def dead_letter(
        self, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
        headers: Sequence[tuple[str, bytes]], error: str,
    ) -> Output:  # fmt: skip
        future = Future()
        self.dead_letters.append(((topic, partition, offset, key, value, list(headers), error), future))
        return Output(future, f"dead letter of {topic}[{partition}]@{offset}")

    def flush(self, timeout_s: float) -> None:
        self.flushed.append(timeout_s)


class Extra:
    def __init__(self) -> None:
        self.sent: list[list[EvaluationRecord]] = []
        self.closed: list[float | None] = []  # the timeout_s of each close

    def send(self, records: Sequence[EvaluationRecord]) -> None:
        self.sent.append(list(records))

    def close(self, timeout_s: float | None = None) -> None:
        self.closed.append(timeout_s)


class Parts:
    def __init__(self, judges: Sequence[Judge] = ()) -> None:
        self.sink = MemorySink()
        self.checkpoint = Checkpoint(TraceAssembler(), commit_interval_s=5.0)
        self.stats = ConsumerStats()
        self.seen: list[EvaluationRecord] = []
        self.extra = Extra()
        self.outputs = Outputs(
            self.sink, self.checkpoint, self.stats, StatusLine(self.stats, 0), EvaluationMetrics(),
            dlq_topic="spans.dlq", on_evaluation=self.seen.append, sinks=[self.extra], judges=judges,
        )  # fmt: skip


def revision() -> Revision:
    value = RECORDING.read_bytes()
    steps = Pipeline(TraceAssembler(), ConsumerStats())
    steps.take([ConsumerRecord("spans", 0, -1, 0, 0, 0, None, value, [], None, -1, len(value), -1)])
    [trace] = steps.flush()
    return trace.interactions[0][0]


def result(judge: str, score: float | None = 0.9, metric: str = "faithfulness") -> MetricResult:
    if score is None:
        return MetricResult(
            metric=metric, score=None, status=MetricStatus.ERROR, reason="timeout", judge=judge
        )
    return MetricResult(metric=metric, score=score, label="faithful", judge=judge)


def test_a_judge_error_is_explained_once_in_the_log_with_what_to_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parts = Parts()
    failed = MetricResult(
        metric="faithfulness", score=None, status=MetricStatus.ERROR, judge="openai:gpt-4o-mini",
        reason="connection error after 4 attempts: Connection error.",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        for offset in range(3):
            parts.outputs.write(judged(parts, offset, ScoredInteraction([result("offline"), failed])))
    assert parts.stats.judge_errors == 3
    [line] = [r.getMessage() for r in caplog.records if "could not score" in r.getMessage()]
    assert "judge openai:gpt-4o-mini could not score faithfulness: connection error after 4 attempts" in line
    assert "--base-url" in line and "--model" in line and "TRACESCORE_JUDGE_API_KEY" in line
    assert "Connection error. Its record says status=error" in line, line  # the reason's period, once


_CHECK = "check the judge's address"


@pytest.mark.parametrize(
    ("reason", "said", "not_said"),
    [
        ("HTTP 429 after 4 attempts: Rate limit reached", "rate-limiting", _CHECK),
        ("timeout after 4 attempts (30s each)", "raise TRACESCORE_JUDGE_TIMEOUT_S", _CHECK),
        ("HTTP 401: Incorrect API key provided", "TRACESCORE_JUDGE_API_KEY", "rate-limiting"),
    ],
    ids=["429", "timeout", "401"],
)
def test_a_judge_error_says_what_to_do_about_its_kind(
    caplog: pytest.LogCaptureFixture, reason: str, said: str, not_said: str
) -> None:
    """A 429 or a timeout is the provider's load or quota: checking the address, model and key (right all
    along) does not help; fewer requests in flight, a longer timeout or the provider's limit do."""
    parts = Parts()
    failed = MetricResult(
        metric="faithfulness", score=None, status=MetricStatus.ERROR, judge="openai:gpt-4o-mini",
        reason=reason,
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        parts.outputs.write(judged(parts, 0, ScoredInteraction([result("offline"), failed])))
    [line] = [r.getMessage() for r in caplog.records if "could not score" in r.getMessage()]
    assert said in line and not_said not in line, line


def test_a_judge_error_names_the_judges_base_url_and_never_its_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A judge pointed at the wrong endpoint: the address it calls is the first thing to check."""
    secret = "sk-never-shown"
    judge = OpenAIJudge(
        OpenAIJudgeSettings(base_url=f"http://user:{secret}@127.0.0.1:9/v1?key={secret}", api_key=secret)
    )
    parts = Parts(judges=[judge])
    failed = MetricResult(
        metric="faithfulness", score=None, status=MetricStatus.ERROR, judge=judge.name,
        reason="connection error after 4 attempts: Connection error.",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        parts.outputs.write(judged(parts, 0, ScoredInteraction([failed])))
    [line] = [r.getMessage() for r in caplog.records if "could not score" in r.getMessage()]
    assert "judge openai:gpt-4o-mini at http://127.0.0.1:9/v1 could not score faithfulness" in line, line
    assert secret not in line and "user" not in line, line


def test_an_interaction_the_judge_failed_on_is_counted_unscored_not_scored() -> None:
    """`scored=2 ... judge_errors=2` read as two scored: an interaction with no score is `unscored`."""
    parts = Parts()
    failed = result("openai:gpt-4o-mini", score=None)
    parts.outputs.write(judged(parts, 0, ScoredInteraction([failed])))
    parts.outputs.write(judged(parts, 1, ScoredInteraction([failed, result("openai:gpt-4o-mini", 0.8, "x")])))
    parts.outputs.write(judged(parts, 2, ScoredInteraction([result("offline")])))
    stats = parts.stats
    assert (stats.scored, stats.unscored, stats.judge_errors, stats.handled) == (2, 1, 2, 3)


def failure(reason: str, **details: object) -> MetricResult:
    return MetricResult(
        metric="faithfulness", score=None, status=MetricStatus.ERROR, judge="custom:judge", reason=reason,
        details=details,
    )  # fmt: skip


def explained(caplog: pytest.LogCaptureFixture, failures: list[MetricResult]) -> list[str]:
    parts = Parts()
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        for offset, failed in enumerate(failures):
            parts.outputs.write(judged(parts, offset, ScoredInteraction([failed])))
    assert parts.stats.judge_errors == len(failures)  # every one counted, logged or not
    return [
        r.getMessage()
        for r in caplog.records
        if "could not score" in r.getMessage() or "kinds" in r.getMessage()
    ]


def test_a_judge_whose_reasons_vary_is_explained_once_per_kind_of_failure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The kind was the reason up to its first colon: a judge whose reasons name the reply (no colon) or
    count attempts made each failure a new kind, a line each and a set of kinds growing without bound."""
    failures = [
        *(failure(f"reply {n} was not JSON") for n in range(40)),
        *(failure(f"HTTP 503 after {n} attempts: upstream {n} unavailable") for n in range(1, 5)),
        failure("HTTP 404: model gpt-5-nano not found"),
        *(failure(f"scoring failed: ValueError: bad claim {n}", error_type="ValueError") for n in range(5)),
    ]
    lines = explained(caplog, failures)
    assert len(lines) == 4, lines
    assert [line.split(": ", 1)[1][:16] for line in lines] == [
        "reply 0 was not ", "HTTP 503 after 1", "HTTP 404: model ", "scoring failed: ",
    ]  # fmt: skip


def test_the_kinds_of_judge_failure_explained_are_capped(caplog: pytest.LogCaptureFixture) -> None:
    words = ["".join(chr(97 + (n // 26**i) % 26) for i in range(3)) for n in range(200)]  # no digits
    lines = explained(caplog, [failure(f"the judge said {word}") for word in words])
    assert len(lines) == 65, len(lines)
    assert lines[-1] == "64 kinds logged once each: further kinds are only counted"


def committed_up_to(parts: Parts) -> dict[TopicPartition, int]:
    return {tp: commit.offset for tp, commit in parts.checkpoint.due(force=True).items()}


def judged(parts: Parts, offset: int, scored: ScoredInteraction) -> Judged:
    parts.checkpoint.read(TP, offset)
    work = parts.checkpoint.hold({TP: offset}, scoring=1)
    return Judged(work, revision(), started=0.0, started_ns=0, scored=scored)


def test_records_reach_the_other_sinks_only_once_kafka_acknowledged_them() -> None:
    parts = Parts()
    parts.outputs.write(
        judged(parts, 0, ScoredInteraction([result("offline"), result("offline", metric="relevance")]))
    )
    assert parts.stats.scored == 1 and len(parts.sink.records) == 2
    parts.outputs.settle()
    assert parts.seen == [] and parts.extra.sent == [] and parts.stats.evaluations == 0
    assert parts.checkpoint.due(force=True) == {}  # the message is held until both records are acknowledged

    parts.sink.records[0][1].success(None)
    parts.outputs.settle()
    assert parts.seen == [] and parts.checkpoint.due(force=True) == {}

    parts.sink.records[1][1].success(None)
    parts.outputs.settle()
    parts.outputs.settle()  # each work reaches them once
    records = [record for record, _ in parts.sink.records]
    assert parts.seen == records and parts.extra.sent == [records] and parts.stats.evaluations == 2
    assert committed_up_to(parts) == {TP: 1}


def test_the_llm_judges_results_say_why_they_were_scored_and_are_counted() -> None:
    parts = Parts()
    scored = ScoredInteraction(
        [result("offline"), result("openai:m", 0.4), result("openai:m", None, metric="relevance")],
        selection="baseline", llm_judge="openai:m", escalation="baseline", inclusion_probability=0.25,
    )  # fmt: skip
    parts.outputs.write(judged(parts, 0, scored))
    by_judge = {(r.judge, r.metric): r for r, _ in parts.sink.records}
    assert by_judge["offline", "faithfulness"].selection is None
    llm = by_judge["openai:m", "faithfulness"]
    assert (llm.selection, llm.inclusion_probability, llm.offline_score) == ("baseline", 0.25, 0.9)
    assert parts.stats.judge_errors == 1
    assert parts.stats.escalated == {"baseline": 1}
    assert parts.stats.not_admitted == {}


def test_an_interaction_kept_from_the_llm_judge_by_the_budget_or_the_draw_is_counted_as_not_admitted() -> (
    None
):
    parts = Parts()
    parts.outputs.write(judged(parts, 0, ScoredInteraction([result("offline")], escalation="budget")))
    parts.outputs.write(judged(parts, 1, ScoredInteraction([result("offline")], escalation="unselected")))
    parts.outputs.write(judged(parts, 2, ScoredInteraction([result("offline")], escalation="offline_only")))
    assert parts.stats.not_admitted == {"budget": 1, "unselected": 1} and parts.stats.escalated == {}


def test_a_dead_letter_holds_its_message_until_kafka_has_it(caplog: pytest.LogCaptureFixture) -> None:
    parts = Parts()
    for offset in (0, 1):
        parts.checkpoint.read(TP, offset)
    message = ConsumerRecord("spans", 0, -1, 1, 0, 0, b"k", b"not otlp", [("h", b"v")], None, 1, 8, -1)
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        parts.outputs.dead_letter([DeadLetter(message, TP, NotOtlp("not an OTLP message"))])
    [(sent, future)] = parts.sink.dead_letters
    assert sent == ("spans", 0, 1, b"k", b"not otlp", [("h", b"v")], "not an OTLP message")
    assert "dead-lettered spans[0]@1 to spans.dlq" in caplog.text
    parts.checkpoint.hold({TP: 0}, outputs=[Output(Future().success(None), "earlier")])
    parts.outputs.settle()
    assert committed_up_to(parts) == {TP: 1}  # up to the dead letter, not past it
    future.success(None)
    parts.outputs.settle()
    assert committed_up_to(parts) == {TP: 2}
    assert parts.seen == [] and parts.extra.sent == []  # a dead letter has no records


def test_on_the_way_out_outputs_are_flushed_and_a_refused_one_leaves_its_offsets_uncommitted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parts = Parts()
    parts.outputs.finish(Wait(7.0, "--ack-timeout"))
    assert parts.sink.flushed == []  # nothing waiting: no flush
    parts.outputs.write(judged(parts, 0, ScoredInteraction([result("offline")])))
    parts.sink.records[0][1].failure(KafkaTimeoutError("no leader"))
    with caplog.at_level(logging.WARNING, logger="tracescore.consume"):
        parts.outputs.finish(Wait(7.0, "--ack-timeout"))  # warns, never raises on the way out
    assert parts.sink.flushed == [7.0]
    assert "did not acknowledge record faithfulness" in caplog.text
    assert parts.checkpoint.due(force=True) == {} and parts.seen == []


def test_closing_closes_the_other_sinks_within_what_the_stop_left_and_reports_the_records_cut_to_fit() -> (
    None
):
    parts = Parts()
    parts.outputs.close(Wait(4.0, "what --stop-timeout 50s left closing the sinks"))
    [given] = parts.extra.closed
    assert given is not None and 3.0 < given <= 4.0, given  # the stop's rest, not the sink's own limit
    assert parts.stats.truncated_outputs == 3
