"""An interaction whose question was not recorded: the evaluation record, the evaluation span and the
Phoenix annotation say so, and why the metrics that need the question have no score."""

from __future__ import annotations

from typing import Any

from tracescore import semconv
from tracescore.emit import evaluation_record, evaluation_span, span_annotation
from tracescore.extract import extract
from tracescore.model import DecodedSpan, MetricResult, Trace
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import AnswerRelevancy, evaluate_record

KIND = semconv.OPENINFERENCE_SPAN_KIND
DOC = "The Aurora X2 battery lasts 14 hours on a single charge."
ANSWER = "The Aurora X2 battery lasts 14 hours."
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"


def span(name: str, attributes: dict[str, Any], *, parent: str | None = None, start: int = 0) -> DecodedSpan:
    return DecodedSpan(
        trace_id=TRACE_ID,
        span_id=format(start + 1, "016x"),
        parent_span_id=parent,
        name=name,
        service_name="rag-api",
        scope_name="app",
        attributes=attributes,
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1,
    )


def trace(*spans: DecodedSpan) -> Trace:
    return Trace(TRACE_ID, spans)


def test_the_evaluation_record_and_span_say_the_question_was_not_recorded() -> None:
    agent = span("agent.run", {KIND: "AGENT", "output.value": ANSWER})
    retriever = span(
        "r", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=agent.span_id, start=1
    )
    [rag] = extract(trace(agent, retriever)).interactions
    result = MetricResult(metric="faithfulness", score=1.0, label="faithful", judge="offline")
    record = evaluation_record(rag, result, None)
    assert record.details["question_recorded"] is False
    assert record.details["question_missing"] == rag.question_missing
    attributes = evaluation_span(rag, result, start_ns=1).attributes or {}
    assert attributes["tracescore.question_recorded"] is False


async def test_phoenix_says_why_the_question_metrics_have_no_score() -> None:
    agent = span("agent.run", {KIND: "AGENT", "output.value": ANSWER})
    retriever = span(
        "r", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=agent.span_id, start=1
    )
    [rag] = extract(trace(agent, retriever)).interactions
    [relevancy] = await evaluate_record(rag.record, [AnswerRelevancy()], OfflineJudge())
    annotation = span_annotation(evaluation_record(rag, relevancy, None))
    assert annotation["result"]["label"] == "not_applicable" and annotation["result"]["score"] is None
    assert "question was not recorded" in annotation["result"]["explanation"]
    assert annotation["metadata"]["details"]["question_recorded"] is False
