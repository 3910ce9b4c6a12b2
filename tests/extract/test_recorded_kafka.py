"""The recorded traces of the real instrumentation libraries, replayed through the real broker and scored by
`EvaluationConsumer`: each interaction scored once, on its own span, in the right direction; nothing
scored on a retrieval span; the traces without usable retrieval skipped with their reason, by source."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from kafka import KafkaProducer
from recorded import recordings

from tracescore.consume import ConsumerSettings, EvaluationConsumer, decode_message
from tracescore.emit import EvaluationRecord
from tracescore.score.judges._offline import OfflineJudge
from tracescore.score.metrics import Faithfulness

pytestmark = pytest.mark.kafka


def test_recorded_traces_are_scored_once_each_in_the_right_direction(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    recorded = recordings()
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
    kinds = {
        span.span_id: span.attributes.get("openinference.span.kind")
        for recording in recorded
        for span in decode_message(recording.payload)
    }
    expected_skips: Counter[str] = Counter()
    for recording in recorded:
        outcome, name = recording.expected
        if outcome == "skip":
            assert recording.trace_id not in by_trace, recording.id
            expected_skips[name] += 1
            continue
        record = by_trace[recording.trace_id]
        assert record.convention == name, recording.id
        assert kinds[record.span_id] not in ("RETRIEVER", "RERANKER", "EMBEDDING"), recording.id
        direction = "faithful" if recording.faithful else "hallucinated"
        assert record.label == direction, f"{recording.id}: {record.score} {record.reason}"
    assert stats.skipped == expected_skips
    assert {(service, reason) for service, _, reason in stats.skipped_by_source} == {
        ("aurora-support-traceloop", "no_retrieval"),
        ("aurora-support-genai", "empty_context"),
    }
    assert stats.dead_letters == 0 and stats.traces == len(recorded)
    # Two traceloop LangChain traces skipped, one line saying why: once per (service, scope, reason).
    explained = [r.getMessage() for r in caplog.records if "not scored (no_retrieval)" in r.getMessage()]
    assert len(explained) == 1 and "inside the LLM prompt" in explained[0]
