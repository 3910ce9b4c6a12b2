"""The consumer against the real broker: SDK -> Kafka -> consumer -> evaluation records + spans."""

from __future__ import annotations

import json

import pytest
from _helpers import WAIT_S
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka_helpers import (
    ConsumerFactory,
    assert_all_committed,
    committed,
    produce,
    run_instrumented_app,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracescore.consume import (
    OutputNotAcknowledged,
    decode_message,
)
from tracescore.emit import EvaluationMetrics
from tracescore.extract import extract
from tracescore.model import ExtractSkip, Trace
from tracescore.score.judges import OfflineJudge
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

APP = """
@tracescore.rag(route="/ask")
def answer(query, contexts):
    return {answers}[query]

CONTEXT = ["The Oberoi Group is a hotel company with its head office in Delhi."]
answer("Where is the Oberoi Group's head office?", CONTEXT)
answer("What kind of company is the Oberoi Group?", CONTEXT)
answer("Who founded the Oberoi Group?", CONTEXT)
"""
ANSWERS = {
    "Where is the Oberoi Group's head office?": "The head office is in Delhi.",
    "What kind of company is the Oberoi Group?": "The Oberoi Group is a hotel company.",
    "Who founded the Oberoi Group?": "It was founded by Ratan Tata in Mumbai in 1952.",
}


def test_decorated_calls_come_back_scored(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP.format(answers=ANSWERS))
    consumer, seen = consumer_for(bootstrap, topic_prefix, max_records=3)

    stats = consumer.run()

    assert stats.scored == 3 and stats.evaluations == 3 and stats.dead_letters == 0
    records = [json.loads(m.value) for m in read_topic(bootstrap, f"{topic_prefix}.evaluations")]
    assert len(records) == 3
    by_query = {r.span_id: r for r in seen}
    for record in records:
        assert record["schema_version"] == 1
        assert len(record["trace_id"]) == 32 and record["trace_id"] == record["trace_id"].lower()
        assert len(record["span_id"]) == 16
        assert record["service_name"] == "test-app" and record["route"] == "/ask"
        assert record["metric"] == "faithfulness" and record["judge"] == "offline"
        assert record["timestamp"] and record["status"] == "ok"
        assert record["span_id"] in by_query
    scores = sorted(r["score"] for r in records)
    assert scores[0] < 0.5 <= scores[-1], "the invented founder must score low, the grounded answers high"

    # The evaluation spans are children of the scored spans, in the same traces, on the spans topic.
    rag_spans, eval_spans = [], []
    for message in read_topic(bootstrap, f"{topic_prefix}.spans"):
        # Keyed by the trace id when the message holds one trace (the SDK's per-partition messages may hold
        # several, then without a key; evaluation spans are one message per trace).
        traces = {span.trace_id for span in decode_message(message.value)}
        assert message.key == (traces.pop().encode() if len(traces) == 1 else None)
        for span in decode_message(message.value):
            (eval_spans if span.scope_name == "tracescore.consumer" else rag_spans).append(span)
    assert len(rag_spans) == 3 and len(eval_spans) == 3
    scored = {(s.trace_id, s.span_id) for s in rag_spans}
    for span in eval_spans:
        assert (span.trace_id, span.attributes["tracescore.evaluated_span_id"]) in scored
        assert span.attributes["gen_ai.evaluation.name"] == "faithfulness"
        assert 0.0 <= span.attributes["gen_ai.evaluation.score.value"] <= 1.0
    # Every input message is committed once its outputs were acknowledged: a restart re-scores nothing.
    again, _ = consumer_for(bootstrap, topic_prefix)
    assert again.run().scored == 0


def test_bad_input_is_counted_dead_lettered_and_the_rest_scored(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    spans_topic = f"{topic_prefix}.spans"
    produce(bootstrap, spans_topic, [(b"k1", b"this is not OTLP"), (None, b'{"resourceSpans": []}')])
    run_instrumented_app(
        bootstrap,
        spans_topic,
        """
        @tracescore.rag
        def no_answer(query, contexts):
            return None

        @tracescore.rag
        def no_context(query, contexts):
            return "Paris is the capital of France."

        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        no_answer("capital of France?", ["Paris is the capital of France."])
        no_context("capital of France?", [])
        good("capital of France?", ["Paris is the capital of France."])
        """,
    )
    reader = InMemoryMetricReader()
    metrics_out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    consumer, seen = consumer_for(bootstrap, topic_prefix, metrics_out=metrics_out)

    stats = consumer.run()

    counted = {
        (m.name, tuple(sorted(p.attributes.items()))): p.value
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name != "tracescore.evaluation.score"
        for p in m.data.data_points
    }
    assert counted[("tracescore.messages.dead_lettered", ())] == 2
    skipped_here = (
        ("reason", "empty_context"),
        ("service.name", "test-app"),
        ("tracescore.scope", "tracescore"),
    )
    assert counted[("tracescore.spans.skipped", skipped_here)] == 1
    assert stats.skipped_by_source[("test-app", "tracescore", ExtractSkip.EMPTY_CONTEXT)] == 1
    assert stats.dead_letters == 2
    assert stats.skipped[ExtractSkip.MISSING_ANSWER] == 1 and stats.skipped[ExtractSkip.EMPTY_CONTEXT] == 1
    assert stats.scored == 1 and [r.score for r in seen] == [1.0]
    dead = read_topic(bootstrap, f"{topic_prefix}.dlq")
    assert sorted(m.value for m in dead) == sorted([b"this is not OTLP", b'{"resourceSpans": []}'])
    for message in dead:
        headers = dict(message.headers)
        assert b"OTLP" in headers["tracescore.error"]
        assert headers["tracescore.source"].startswith(spans_topic.encode())
    assert_all_committed(bootstrap, f"{topic_prefix}.group", spans_topic)


def test_offsets_are_not_committed_when_outputs_are_not_acknowledged(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    spans_topic = f"{topic_prefix}.spans"
    run_instrumented_app(
        bootstrap,
        spans_topic,
        """
        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        good("capital of France?", ["Paris is the capital of France."])
        """,
    )
    # The broker rejects every evaluation record on this topic (too large), so none is acknowledged.
    tiny = f"{topic_prefix}.tiny"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(tiny, 1, 1, topic_configs={"max.message.bytes": "64"})])
    admin.close()
    consumer, _ = consumer_for(bootstrap, topic_prefix, evaluations_topic=tiny, ack_timeout_s=5)

    with pytest.raises(OutputNotAcknowledged):
        consumer.run()

    assert set(committed(bootstrap, f"{topic_prefix}.group", spans_topic).values()) == {None}
    # Nothing was lost: a healthy consumer in the same group scores the span.
    healthy, seen = consumer_for(bootstrap, topic_prefix)
    assert healthy.run().scored == 1 and len(seen) == 1


def test_two_group_members_share_the_partitions_and_score_everything_once(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str
) -> None:
    import threading

    questions = {f"Question {i}?": "Paris is the capital of France." for i in range(12)}
    run_instrumented_app(
        bootstrap,
        f"{topic_prefix}.spans",
        f"""
        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        for q in {list(questions)!r}:
            good(q, ["Paris is the capital of France."])
        """,
    )
    members = [consumer_for(bootstrap, topic_prefix, idle_timeout_s=6) for _ in range(2)]
    threads = [threading.Thread(target=consumer.run) for consumer, _ in members]
    for thread in threads:
        thread.start()
    for thread in threads:  # a bound, not a timing assertion: both go idle once everything is scored
        thread.join(WAIT_S)
    assert not any(thread.is_alive() for thread in threads), "a member did not stop after going idle"

    scored_spans = [r.span_id for _, seen in members for r in seen]
    assert len(scored_spans) == 12 and len(set(scored_spans)) == 12


def test_extract_reads_what_the_sdk_wrote(bootstrap: str, topic_prefix: str) -> None:
    run_instrumented_app(
        bootstrap,
        f"{topic_prefix}.spans",
        """
        @tracescore.rag(route_arg="route")
        def answer(question, documents, route):
            return "ok"

        answer("why?", [{"page_content": "because"}, "and so"], route="/why")
        """,
    )
    (message,) = read_topic(bootstrap, f"{topic_prefix}.spans")
    (span,) = decode_message(message.value)
    (rag,) = extract(Trace(span.trace_id, (span,))).interactions
    assert rag.record.query == "why?" and rag.record.contexts == ("because", "and so")
    assert rag.record.answer == "ok" and rag.route == "/why" and span.service_name == "test-app"


def test_a_judge_slower_than_the_poll_interval_never_costs_the_partition(
    consumer_for: ConsumerFactory, bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Judges run off the Kafka thread, which keeps polling: a judge call lasting three poll intervals
    neither gets the member evicted nor scores anything twice."""
    import asyncio

    group_id = f"{topic_prefix}.group"
    poll_interval_s = 3.0

    class SlowOnce(OfflineJudge):
        slow_call_done = False

        async def run(self, task, data):  # type: ignore[no-untyped-def]
            if not self.slow_call_done:
                await asyncio.sleep(3 * poll_interval_s)  # a lower bound only: slower is fine
                self.slow_call_done = True
            return await super().run(task, data)

    run_instrumented_app(
        bootstrap,
        f"{topic_prefix}.spans",
        """
        @tracescore.rag
        def good(query, contexts):
            return "Paris is the capital of France."

        good("capital of France?", ["Paris is the capital of France."])
        """,
    )
    judge = SlowOnce()
    consumer, seen = consumer_for(
        bootstrap,
        topic_prefix,
        judge=judge,
        max_poll_interval_ms=int(poll_interval_s * 1000),
        idle_timeout_s=3,
        evaluation_spans_topic=f"{topic_prefix}.evaluation-spans",
    )

    consumer.run()

    assert judge.slow_call_done
    assert "rebalanced" not in caplog.text and "Consumer poll timeout has expired" not in caplog.text
    assert len(seen) == 1, "scored once"
    assert_all_committed(bootstrap, group_id, f"{topic_prefix}.spans")
