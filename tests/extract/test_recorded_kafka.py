"""The recorded traces of the real instrumentation libraries, replayed through the real broker and scored by
`EvaluationConsumer`: each interaction scored once, on its own span, in the right direction; nothing
scored on a retrieval span; the traces without usable retrieval skipped with their reason, by source."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from kafka import KafkaProducer
from recorded import Recording, recordings

from tracescore.consume import ConsumerSettings, ConsumerStats, EvaluationConsumer, decode_message
from tracescore.model import DecodedSpan as Span
from tracescore.model import EvaluationRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness

pytestmark = pytest.mark.kafka


def _score(
    bootstrap: str, topic_prefix: str, recorded: list[Recording]
) -> tuple[dict[str, EvaluationRecord], ConsumerStats]:
    """Produce the recordings as the Collector would (one message per trace) and run the real consumer."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for recording in recorded:
        producer.send(f"{topic_prefix}.spans", key=recording.trace_id.encode(), value=recording.payload).get(
            30
        )
    producer.close()
    seen: list[EvaluationRecord] = []
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        topic=f"{topic_prefix}.spans",
        group_id=f"{topic_prefix}.group",
        evaluations_topic=f"{topic_prefix}.evaluations",
        dlq_topic=f"{topic_prefix}.dlq",
        evaluation_spans_topic=f"{topic_prefix}.evaluation-spans",
        idle_timeout_s=3,
    )
    consumer = EvaluationConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=seen.append
    )
    stats = consumer.run()
    by_trace = {r.trace_id: r for r in seen}
    assert len(by_trace) == len(seen), "one record per trace: each interaction scored once"
    return by_trace, stats


def _spans_by_id(recorded: list[Recording]) -> dict[str, Span]:
    return {span.span_id: span for recording in recorded for span in decode_message(recording.payload)}


def _is_retrieval_or_tool(span: Span) -> bool:
    return (
        span.attributes.get("openinference.span.kind") in ("RETRIEVER", "RERANKER", "EMBEDDING", "TOOL")
        or span.attributes.get("gen_ai.operation.name") in ("retrieval", "execute_tool", "embeddings")
        or span.attributes.get("traceloop.span.kind") == "tool"
    )


def test_recorded_traces_are_scored_once_each_in_the_right_direction(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    recorded = [r for r in recordings() if r.not_yet_read is None]

    by_trace, stats = _score(bootstrap, topic_prefix, recorded)

    spans = _spans_by_id(recorded)
    expected_skips: Counter[str] = Counter()
    for recording in recorded:
        outcome, name = recording.expected
        if outcome == "skip":
            assert recording.trace_id not in by_trace, recording.id
            expected_skips[name] += 1
            continue
        record = by_trace[recording.trace_id]
        assert record.convention == name, recording.id
        assert not _is_retrieval_or_tool(spans[record.span_id]), recording.id
        if recording.interaction_span is not None:
            assert spans[record.span_id].name == recording.interaction_span, recording.id
        direction = "faithful" if recording.faithful else "hallucinated"
        assert record.label == direction, f"{recording.id}: {record.score} {record.reason}"
    assert stats.skipped == expected_skips
    assert {(service, reason) for service, _, reason in stats.skipped_by_source} == {
        ("aurora-support-traceloop", "no_retrieval"),
        ("aurora-support-genai", "empty_context"),
        ("aurora-support-langgraph", "empty_context"),
    }
    assert stats.dead_letters == 0 and stats.traces == len(recorded)
    # Two traceloop LangChain traces skipped, one line saying why: once per (service, scope, reason).
    explained = [r.getMessage() for r in caplog.records if "not scored (no_retrieval)" in r.getMessage()]
    assert len(explained) == 1 and "inside the LLM prompt" in explained[0]


def test_a_second_services_late_message_is_judged_with_the_trace(bootstrap: str, topic_prefix: str) -> None:
    """A trace across two services (fixtures/two_service): the API's message first, the retriever service's
    `delay_s` later (3 s: past the 2 s grace), while the consumer runs. The interaction must still be judged
    once, with the retrieval the late message carries, in the right direction."""
    recorded = [r for r in recordings() if r.messages]
    assert recorded, "no multi-service recording: run fixtures/record.py --only two_service"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    topic = f"{topic_prefix}.spans"
    first = [(r, m) for r in recorded for m in r.messages if m.delay_s == 0]
    late = sorted(
        ((m.delay_s, r, m) for r in recorded for m in r.messages if m.delay_s > 0), key=lambda x: x[0]
    )
    for recording, message in first:
        producer.send(topic, key=recording.trace_id.encode(), value=message.payload).get(30)
    seen: list[EvaluationRecord] = []
    settings = ConsumerSettings(
        bootstrap_servers=bootstrap,
        topic=topic,
        group_id=f"{topic_prefix}.group",
        evaluations_topic=f"{topic_prefix}.evaluations",
        dlq_topic=f"{topic_prefix}.dlq",
        evaluation_spans_topic=f"{topic_prefix}.evaluation-spans",
        idle_timeout_s=max(delay for delay, _, _ in late) + 5,
    )
    consumer = EvaluationConsumer(
        settings, judge=OfflineJudge(), metrics=[Faithfulness()], on_evaluation=seen.append
    )

    def deliver_late() -> None:
        # Late relative to when the consumer has read the first messages, not to when the broker got them.
        deadline = time.monotonic() + 120
        while consumer.stats.messages < len(first) and time.monotonic() < deadline:
            time.sleep(0.05)
        read_at = time.monotonic()
        for delay_s, recording, message in late:
            time.sleep(max(0.0, read_at + delay_s - time.monotonic()))
            producer.send(topic, key=recording.trace_id.encode(), value=message.payload).get(30)

    sender = threading.Thread(target=deliver_late, daemon=True)
    sender.start()
    stats = consumer.run()
    sender.join(timeout=60)
    producer.close()

    spans = _spans_by_id(recorded)
    by_trace: dict[str, list[EvaluationRecord]] = {}
    for record in seen:
        by_trace.setdefault(record.trace_id, []).append(record)
    outcome = {
        r.id: [(spans[x.span_id].name, x.label) for x in by_trace.get(r.trace_id, [])] for r in recorded
    }
    expected = {r.id: [(r.interaction_span, "faithful" if r.faithful else "hallucinated")] for r in recorded}
    assert outcome == expected, dict(stats.skipped)
    assert stats.dead_letters == 0
