"""Traces across services through the real broker: the second service's spans arrive seconds after the
first's (each service exports on its own schedule), and the interaction is still judged with them."""

from __future__ import annotations

import threading
import time

import pytest
from kafka_helpers import assert_all_committed, produce
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from test_assembly_kafka import consumer_for, messages, wait_for

from tracescore.consume import decode_message
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

KIND = "openinference.span.kind"
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours on a single charge."
ANSWER = "The Aurora X2 battery lasts 14 hours."


def _tracer(service: str, scope: str) -> tuple[otel_trace.Tracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer(scope), exporter


def two_service_trace(
    documents: list[str], reranked: str | None = None
) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """rag-api (CHAIN -> HTTP CLIENT call, LLM) and retriever-svc (SERVER -> RETRIEVER [, RETRIEVER with
    `reranked`]), one trace id, as two services with their own exporters write them: (rag-api's spans,
    retriever-svc's spans)."""
    api, api_spans = _tracer("rag-api", "openinference.instrumentation.langchain")
    retriever, retriever_spans = _tracer("retriever-svc", "openinference.instrumentation.langchain")
    with api.start_as_current_span("RunnableSequence") as chain:
        chain.set_attributes({KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
        with api.start_as_current_span("GET /search", kind=SpanKind.CLIENT) as call:
            call.set_attributes({"http.request.method": "GET", "url.full": "http://retriever-svc/search"})
            # The callee's server span is the call's child, as with a `traceparent` header.
            remote = otel_trace.set_span_in_context(call)
            with (
                retriever.start_as_current_span("GET /search", context=remote, kind=SpanKind.SERVER),
                retriever.start_as_current_span("VectorStoreRetriever") as search,
            ):
                search.set_attributes({KIND: "RETRIEVER", "input.value": QUESTION})
                for i, doc in enumerate(documents):
                    search.set_attribute(f"retrieval.documents.{i}.document.content", doc)
            if reranked is not None:
                with retriever.start_as_current_span("SecondSearch", context=remote) as second:
                    second.set_attributes(
                        {KIND: "RETRIEVER", "retrieval.documents.0.document.content": reranked}
                    )
        with api.start_as_current_span("ChatModel") as llm:
            llm.set_attributes({KIND: "LLM", "llm.output_messages.0.message.content": ANSWER})
    return list(api_spans.get_finished_spans()), list(retriever_spans.get_finished_spans())


def test_a_second_service_reporting_three_seconds_late_is_judged_with_the_trace(
    bootstrap: str, topic_prefix: str
) -> None:
    api_spans, retriever_spans = two_service_trace([DOC])
    topic = f"{topic_prefix}.spans"
    produce(bootstrap, topic, messages(api_spans))
    # Grace 2 s; the wait for the callee's spans longer than the default 30 s: on a loaded machine the steps
    # between the first read and the late export below may take long, and the test is not about that bound.
    consumer, seen = consumer_for(bootstrap, topic_prefix, idle_timeout_s=None, assembly={"max_wait_s": 600})
    runner = threading.Thread(target=consumer.run)
    runner.start()
    try:
        wait_for(lambda: consumer.stats.messages == len(api_spans), "rag-api's spans to be read")
        time.sleep(3)  # past the 2 s grace: the retriever service's export comes later
        assert seen == [], "read before the callee's spans arrived"
        produce(bootstrap, topic, messages(retriever_spans))
        wait_for(lambda: len(seen) == 1, "the trace to be scored", timeout_s=60)
    finally:
        consumer.stop()
        runner.join(60)
    [record] = seen
    chain = api_spans[-1]
    assert record.span_id == format(chain.context.span_id, "016x")
    assert record.label == "faithful", "judged against the retriever service's document"
    assert consumer.stats.assembly["remote_work_not_arrived"] == 0
    assert_all_committed(bootstrap, f"{topic_prefix}.group", topic)


def test_a_late_span_that_changes_the_documents_yields_a_revision_superseding_the_first_record(
    bootstrap: str, topic_prefix: str
) -> None:
    unrelated = "The Aurora X2 ships in blue and grey."
    api_spans, retriever_spans = two_service_trace([unrelated], reranked=DOC)
    [late] = [s for s in retriever_spans if s.name == "SecondSearch"]
    topic = f"{topic_prefix}.spans"
    produce(bootstrap, topic, messages([*api_spans, *(s for s in retriever_spans if s is not late)]))
    consumer, seen = consumer_for(bootstrap, topic_prefix, idle_timeout_s=None)
    runner = threading.Thread(target=consumer.run)
    runner.start()
    try:
        wait_for(lambda: len(seen) == 1, "the first reading to be scored")
        produce(bootstrap, topic, messages([late]))  # e.g. a retry's results, exported seconds later
        wait_for(lambda: len(seen) == 2, "the revision to be scored", timeout_s=60)
        time.sleep(1)
    finally:
        consumer.stop()
        runner.join(60)
    first, revised = seen
    chain = format(api_spans[-1].context.span_id, "016x")
    assert (first.span_id, first.revision, first.supersedes) == (chain, 0, None)
    assert first.label == "hallucinated", "judged against the unrelated document only"
    assert (revised.span_id, revised.revision) == (chain, 1)
    assert revised.supersedes == f"{first.trace_id}:{chain}:0"
    assert revised.label == "faithful", "judged again with the late document"
    assert consumer.stats.assembly["rescored"] == 1 and consumer.stats.assembly["late_spans_rejoined"] == 1
    assert len(seen) == 2, "scored once per revision"
    written = read_topic(bootstrap, f"{topic_prefix}.evaluation-spans")
    evaluation_spans = [span for message in written for span in decode_message(message.value)]
    assert sorted(s.attr("tracescore.evaluation.revision") for s in evaluation_spans) == [0, 1]
    assert_all_committed(bootstrap, f"{topic_prefix}.group", topic)
