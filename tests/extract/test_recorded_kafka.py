"""The recorded traces of the real instrumentation libraries, replayed through the real broker and scored by
`EvaluationConsumer`: each interaction scored once, on its own span, in the right direction; nothing
scored on a retrieval span; the traces without usable retrieval skipped with their reason, by source."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import pytest
from _helpers import consumer_settings
from recorded import Recording, recordings

from tracescore.consume import ConsumerSettings, ConsumerStats, EvaluationConsumer, decode_message
from tracescore.model import DecodedSpan as Span
from tracescore.model import EvaluationRecord, ExtractSkip
from tracescore.score import make_metrics
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness, Metric
from tracescore.testing.kafka_topics import input_producer

pytestmark = pytest.mark.kafka
LANGFUSE_NOT_ANSWERING = ("retriever", "tool", "generation", "embedding", "evaluator", "guardrail", "event")


def _score(
    bootstrap: str, topic_prefix: str, recorded: list[Recording]
) -> tuple[dict[str, EvaluationRecord], ConsumerStats]:
    """Each recording scored by the real consumer for faithfulness: one record per trace."""
    seen, stats = _consume(bootstrap, topic_prefix, recorded, [Faithfulness()])
    by_trace = {r.trace_id: r for r in seen}
    assert len(by_trace) == len(seen), "one record per trace: each interaction scored once"
    return by_trace, stats


def _consume(
    bootstrap: str, topic_prefix: str, recorded: list[Recording], metrics: list[Metric]
) -> tuple[list[EvaluationRecord], ConsumerStats]:
    """Produce the recordings as the Collector would (one message per trace and instrumentation scope: the
    messages it wrote where it was recorded through it) and run the real consumer."""
    producer = input_producer(bootstrap, [f"{topic_prefix}.spans"], acks="all")
    for recording in recorded:
        # Its log records (GenAI events, `Recording.logs`) to the same topic, as the Collector's logs pipeline
        # writes them.
        logs = [recording.logs] if recording.logs is not None else []
        for payload in [*([m.payload for m in recording.messages] or [recording.payload]), *logs]:
            producer.send(f"{topic_prefix}.spans", key=recording.trace_id.encode(), value=payload).get(30)
    producer.close()
    seen: list[EvaluationRecord] = []
    # Every trace read once, whole, when the topic runs dry. The grace is stream time (a poll boundary in a
    # backlog no longer splits a trace: tests/consume/test_assembly_backlog_kafka.py), but the producer's own
    # pace is not: on a loaded machine a trace's messages may be written more than 2 s apart, and its first
    # reading would lack the rest (skipped, then scored as a revision, which this test does not count).
    held = {"grace_s": 600.0, "max_wait_s": 600.0}
    settings = consumer_settings(bootstrap, topic_prefix, assembly=held)
    consumer = EvaluationConsumer(settings, judge=OfflineJudge(), metrics=metrics, on_evaluation=seen.append)
    return seen, consumer.run()


def _spans_by_id(recorded: list[Recording]) -> dict[str, Span]:
    return {span.span_id: span for recording in recorded for span in decode_message(recording.payload)}


def _is_retrieval_or_tool(span: Span) -> bool:
    return (
        span.attributes.get("openinference.span.kind") in ("RETRIEVER", "RERANKER", "EMBEDDING", "TOOL")
        or span.attributes.get("gen_ai.operation.name") in ("retrieval", "execute_tool", "embeddings")
        or span.attributes.get("traceloop.span.kind") == "tool"
        or span.attributes.get("langfuse.observation.type") in LANGFUSE_NOT_ANSWERING
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
        # A follow-up grounded only in an earlier turn's trace reads as hallucinated on its own trace:
        # grounding across traces revises it (recorded.py, `Recording.earlier_trace`); the offline judge's
        # known misses are listed there too.
        direction = recording.offline_label
        assert record.label == direction, f"{recording.id}: {record.score} {record.reason}"
        if recording.source.endswith("_stuffed"):
            # Documents pasted into the prompt under a label: the record says which message they came from.
            where = {"user": "prompt", "system": "instructions", "documents": "input"}[
                recording.scenario.split("_")[0]
            ]
            assert {s["kind"] for s in record.details["context_sources"]} == {where}, recording.id
        if recording.scenario.startswith("followup"):
            # A follow-up that called no tool: judged against the first turn's result, and the record says so.
            assert {s.get("turns_back") for s in record.details["context_sources"]} == {1}, recording.id
            [claim] = record.details["claims"]
            assert claim["evidence_source"]["turns_back"] == 1, recording.id
    assert stats.skipped == expected_skips
    assert {(service, reason) for service, _, reason in stats.skipped_by_source} == {
        # Documents pasted into the prompt with no label naming them.
        ("aurora-support-openai-stuffed", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-traceloop-stuffed", ExtractSkip.NO_RETRIEVAL),
        ("aurora-support-haystack-stuffed", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-langgraph", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-autogen", ExtractSkip.MISSING_ANSWER),
        ("aurora-support-vercel", ExtractSkip.MISSING_ANSWER),
        ("aurora-support-crewai", ExtractSkip.MISSING_ANSWER),
        # Greetings answered without a lookup (issue 31's conversations), Haystack's content tracing off.
        ("aurora-support-autogen", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-adk", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-haystack", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-mlflow", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-haystack", ExtractSkip.CONTENT_NOT_CAPTURED),
        ("aurora-support-openlit", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-logfire", ExtractSkip.EMPTY_CONTEXT),
        # Spring AI without its content settings (and the page's ObservationFilter); a greeting.
        ("aurora-support-spring", ExtractSkip.CONTENT_NOT_CAPTURED),
        ("aurora-support-spring", ExtractSkip.EMPTY_CONTEXT),
        # Strands with its messages as span events or redacted; a greeting.
        ("aurora-support-strands", ExtractSkip.CONTENT_NOT_CAPTURED),
        ("aurora-support-strands", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-strands", ExtractSkip.NOT_RAG),  # its memory's background extraction: no interaction
        ("aurora-support-mastra", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        ("aurora-support-genkit", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        ("aurora-support-langchain-js", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        # Documents pasted into the prompt with no label.
        ("aurora-support-litellm", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-openai-v2", ExtractSkip.EMPTY_CONTEXT),
        # LangSmith's export: documents pasted with no label; a Client that hid the runs' outputs.
        ("aurora-support-langsmith", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-langsmith", ExtractSkip.CONTENT_NOT_CAPTURED),
        ("aurora-support-agno", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        # Microsoft Agent Framework with sensitive data off (its default); a greeting.
        ("aurora-support-agent-framework", ExtractSkip.CONTENT_NOT_CAPTURED),
        ("aurora-support-agent-framework", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support-beeai", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        ("aurora-support-llamaindex-agent", ExtractSkip.EMPTY_CONTEXT),  # a greeting (LangGraph's: above)
        ("aurora-support-openai-agents", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        ("aurora-support-smolagents", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        ("aurora-support-langfuse", ExtractSkip.EMPTY_CONTEXT),  # a greeting (the Langfuse v3 chats)
        ("aurora-support-traceloop-chat", ExtractSkip.EMPTY_CONTEXT),  # a greeting offered the search tool
        ("aurora-support-semantic-kernel", ExtractSkip.EMPTY_CONTEXT),  # a greeting
        # The same through the LiteLLM proxy: explained by the proxy, or by the app whose trace it joins.
        ("litellm-proxy", ExtractSkip.EMPTY_CONTEXT),
        ("aurora-support", ExtractSkip.EMPTY_CONTEXT),
    }
    assert stats.dead_letters == 0 and stats.traces == len(recorded)
    judged_without_one = [r for r in recorded if r.question_not_recorded and r.expected[0] == "interaction"]
    assert stats.without_question == len(judged_without_one), "judged without one (a skip is not judged)"
    # A traceloop trace skipped for documents inside the prompt with no label: one line saying why, once per
    # (service, scope, reason), pointing to the label forms that are read.
    explained = [r.getMessage() for r in caplog.records if "not scored (no_retrieval)" in r.getMessage()]
    assert len(explained) == 1
    assert "inside the LLM prompt" in explained[0]
    assert "docs/integrations/index.md#documents-in-the-prompt" in explained[0]


def test_agent_runs_are_scored_per_run_with_the_run_signals(bootstrap: str, topic_prefix: str) -> None:
    """The consumer scores each agent run (LangGraph, recorded) with faithfulness and the run signals: a
    failed tool the answer ignored, a repeated search, a follow-up that rests on the earlier turn."""
    follow_ups = (
        "pydantic_ai_conversation/followup_unfaithful",
        "langgraph_conversation/resent_invented_turn3",
    )
    recorded = [r for r in recordings() if r.source == "langgraph_tool_error" or r.id in follow_ups]
    signals = ["tool_errors", "ungrounded_answer", "unused_tool_results", "repeated_tool_calls", "run_budget"]
    seen, stats = _consume(bootstrap, topic_prefix, recorded, [Faithfulness(), *make_metrics(signals)])
    labels = {(r.trace_id, r.metric): r.label or r.status.value for r in seen}
    assert len(labels) == len(seen) == len(recorded) * 6 and stats.dead_letters == 0
    by_id = {r.id: {m: labels[(r.trace_id, m)] for m in ["faithfulness", *signals]} for r in recorded}
    assert by_id["langgraph_tool_error/tool_error_ignored"] == {
        "faithfulness": "hallucinated",
        "tool_errors": "ignored",
        "ungrounded_answer": "ungrounded",
        "unused_tool_results": "not_applicable",
        "repeated_tool_calls": "no_repeats",
        "run_budget": "within_budget",
    }
    assert by_id["langgraph_tool_error/tool_error_retried"]["tool_errors"] == "recovered"
    assert by_id["langgraph_tool_error/repeated_call"]["repeated_tool_calls"] == "repeated"
    # A follow-up that looked nothing up rests on the earlier turn's result (Pydantic AI's message_history).
    follow_up = by_id["pydantic_ai_conversation/followup_unfaithful"]
    assert (follow_up["faithfulness"], follow_up["ungrounded_answer"]) == ("hallucinated", "earlier_turns")
    assert follow_up["tool_errors"] == "not_applicable"
    # A LangGraph chat's third turn that searched, then invented a price: looked up, still a hallucination.
    invented = by_id["langgraph_conversation/resent_invented_turn3"]
    assert (invented["faithfulness"], invented["ungrounded_answer"]) == ("hallucinated", "grounded")


def test_a_second_services_late_message_is_judged_with_the_trace(bootstrap: str, topic_prefix: str) -> None:
    """A trace across two services (fixtures/two_service): the API's message first, the retriever service's
    `delay_s` later (3 s: past the 2 s grace), while the consumer runs. The interaction must still be judged
    once, with the retrieval the late message carries, in the right direction."""
    recorded = [r for r in recordings() if any(m.delay_s > 0 for m in r.messages)]
    assert recorded, "no multi-service recording: run fixtures/record.py --only two_service"
    producer = input_producer(bootstrap, [f"{topic_prefix}.spans"], acks="all")
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
        # Done once each recording's interaction was dealt with, however long the late sends take on a loaded
        # machine (an idle timeout a few seconds past the delay finished the traces before they came); the
        # idle timeout and the long wait for the callee's spans are backstops, never reached when all is well.
        max_records=len(recorded),
        idle_timeout_s=60,
        assembly={"max_wait_s": 600},
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
