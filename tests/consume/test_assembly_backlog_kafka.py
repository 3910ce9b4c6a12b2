"""Trace assembly's grace through the real broker is the stream's time: a consumer slower than the stream,
reading a backlog, scores each trace split over its polls once and whole; a consumer that has caught up
still reads a trace a grace of real time after its last span, and a span later than that is a revision."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka_helpers import assert_all_committed, produce
from test_assembly_kafka import consumer_for, messages, openinference_trace, wait_for
from test_late_spans_kafka import DOC, two_service_trace

from tracescore.consume import ConsumerSettings, EvaluationConsumer
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka

GRACE_S = 2.0
BATCH_S = 1.0  # each poll's batch takes this long to process: a consumer starved of CPU
TRACES = 5


class StarvedConsumer(EvaluationConsumer):
    """Takes BATCH_S longer over each batch than it needs, as a consumer sharing its CPU does."""

    def _take(self, batch: Sequence[ConsumerRecord]) -> None:
        super()._take(batch)
        time.sleep(BATCH_S)


def test_a_slow_consumer_reading_a_backlog_scores_each_trace_split_over_its_polls_once(
    bootstrap: str, topic_prefix: str
) -> None:
    """Each trace's root and answer first, its retriever's documents 10 messages later (written 0.3 s
    after, within the grace): 3 records a poll, a second a poll, so on the consumer's clock each trace's
    documents come 3 s after its root. Judged on that clock, every trace was read without its documents
    (not scored: skipped), then again with them as a late span (scored): two readings, a record each time
    the documents changed."""
    topic = f"{topic_prefix}.spans"
    first, later = [], []
    for _ in range(TRACES):
        retriever, llm, chain = messages(openinference_trace("The Aurora X2 battery lasts 14 hours."))
        first += [llm, chain]
        later.append(retriever)
    written = time.time() * 1000 - 3_600_000  # an hour ago: the consumer was down
    producer = input_producer(bootstrap, [NewTopic(topic, 1, 1)], acks="all")
    for index, (key, value) in enumerate([*first, *later]):
        producer.send(topic, key=key, value=value, timestamp_ms=int(written + 20 * index))
    producer.flush()
    producer.close()

    settings = ConsumerSettings.model_validate(
        {
            "bootstrap_servers": bootstrap, "topic": topic, "group_id": f"{topic_prefix}.group",
            "evaluations_topic": f"{topic_prefix}.evaluations", "dlq_topic": f"{topic_prefix}.dlq",
            "evaluation_spans_topic": f"{topic_prefix}.evaluation-spans",
            "idle_timeout_s": 3, "max_poll_records": 3, "assembly": {"grace_s": GRACE_S},
        }
    )  # fmt: skip
    seen: list[EvaluationRecord] = []
    consumer = StarvedConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=seen.append
    )
    stats = consumer.run()

    assert stats.messages == 3 * TRACES
    assert sorted(r.revision for r in seen) == [0] * TRACES and len({r.trace_id for r in seen}) == TRACES
    assert {r.label for r in seen} == {"faithful"}, "each judged with its documents"
    assert stats.traces == TRACES and not stats.skipped, "no trace read before its documents came"
    assert stats.assembly["late_spans_rejoined"] == 0 and stats.assembly["rescored"] == 0
    assert_all_committed(bootstrap, f"{topic_prefix}.group", topic)


def test_a_caught_up_consumer_reads_a_trace_after_its_grace_and_a_later_span_revises_it(
    bootstrap: str, topic_prefix: str
) -> None:
    """Nothing more to read, the stream's time does not move: the consumer's own clock gives the trace its
    grace, and a span written after that is a late span, scored as a revision (as before stream time)."""
    unrelated = "The Aurora X2 ships in blue and grey."
    api_spans, retriever_spans = two_service_trace([unrelated], reranked=DOC)
    [late] = [s for s in retriever_spans if s.name == "SecondSearch"]
    topic = f"{topic_prefix}.spans"
    input_producer(bootstrap, [topic]).close()  # the topic, before the consumer looks for it
    consumer, seen = consumer_for(bootstrap, topic_prefix, idle_timeout_s=None, assembly={"grace_s": GRACE_S})
    runner = threading.Thread(target=consumer.run)
    runner.start()
    try:
        wait_for(lambda: consumer.stats.partitions_assigned, "the partitions to be assigned")
        written = time.monotonic()
        produce(bootstrap, topic, messages([*api_spans, *(s for s in retriever_spans if s is not late)]))
        wait_for(lambda: len(seen) == 1, "the first reading to be scored")
        assert time.monotonic() - written >= GRACE_S, "read before its grace passed"
        time.sleep(1)
        produce(bootstrap, topic, messages([late]))  # grace + 1 s (and more) after the trace's last span
        wait_for(lambda: len(seen) == 2, "the revision to be scored", timeout_s=60)
    finally:
        consumer.stop()
        runner.join(60)
    first, revised = seen
    assert (first.revision, first.label) == (0, "hallucinated")
    assert (revised.revision, revised.label) == (1, "faithful")
    assert consumer.stats.assembly["late_spans_rejoined"] == 1 and consumer.stats.assembly["rescored"] == 1
    assert_all_committed(bootstrap, f"{topic_prefix}.group", topic)
