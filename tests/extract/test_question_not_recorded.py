"""Faithfulness needs an answer and evidence, not a question: an interaction with both and no recoverable
question is read, with `record.query` None and the reason on the interaction. A
question found only in a tool call's arguments is the model's search, not the user's question."""

from __future__ import annotations

import json

from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.model import ExtractSkip

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours on a single charge."
ANSWER = "The Aurora X2 battery lasts 14 hours."


def test_a_question_only_in_a_tool_calls_arguments_is_not_the_users_question() -> None:
    agent = span("agent.run", {KIND: "AGENT", "output.value": ANSWER})
    tool = span(
        "search_docs",
        {KIND: "TOOL", "input.value": json.dumps({"input": QUESTION}), "output.value": "done"},
        parent=agent.span_id,
        start=1,
    )
    retriever = span(
        "retrieve",
        {KIND: "RETRIEVER", "input.value": QUESTION, "retrieval.documents.0.document.content": DOC},
        parent=tool.span_id,
        start=2,
    )
    [rag] = extract(trace(agent, tool, retriever)).interactions
    assert rag.record.query is None and rag.record.contexts == (DOC,) and rag.record.answer == ANSWER
    assert rag.question_missing is not None and "no question recorded" in rag.question_missing


def test_a_chains_own_retriever_query_is_still_its_question() -> None:
    chain = span(
        "chain", {KIND: "CHAIN", "input.value": json.dumps({"a": 1, "b": 2}), "output.value": ANSWER}
    )
    retriever = span(
        "retrieve",
        {KIND: "RETRIEVER", "input.value": QUESTION, "retrieval.documents.0.document.content": DOC},
        parent=chain.span_id,
        start=1,
    )
    [rag] = extract(trace(chain, retriever)).interactions
    assert rag.record.query == QUESTION and rag.question_missing is None


def test_a_genai_agent_called_with_a_message_list_it_did_not_record() -> None:
    said = json.dumps([{"role": "assistant", "content": ANSWER}])
    agent = span(
        "invoke_agent support",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.input.messages": "[]",
            "gen_ai.output.messages": said,
        },
    )
    tool = span(
        "execute_tool search",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.arguments": json.dumps({"query": QUESTION}),
            "gen_ai.tool.call.result": json.dumps([DOC]),
        },
        parent=agent.span_id,
        start=1,
    )
    [rag] = extract(trace(agent, tool)).interactions
    assert rag.record.query is None and rag.record.contexts == (DOC,)
    assert "gen_ai.input.messages" in (rag.question_missing or "")


def test_a_repr_question_is_no_question() -> None:
    chain = span(
        "chain",
        {
            KIND: "CHAIN",
            "input.value": "AgentWorkflowStartEvent(user_msg=ChatMessage(role=<MessageRole.USER: 'user'>, b",
            "output.value": ANSWER,
        },
    )
    retriever = span(
        "r", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=chain.span_id, start=1
    )
    [rag] = extract(trace(chain, retriever)).interactions
    assert rag.record.query is None and "program repr" in (rag.question_missing or "")


def test_without_an_answer_or_documents_it_is_still_a_skip() -> None:
    agent = span("agent.run", {KIND: "AGENT", "output.value": ANSWER})
    [skip] = extract(trace(agent)).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT
    agent = span("agent.run", {KIND: "AGENT"})
    retriever = span(
        "r", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, parent=agent.span_id, start=1
    )
    [skip] = extract(trace(agent, retriever)).skips
    assert skip.reason == ExtractSkip.MISSING_ANSWER


def test_genai_and_openllmetry_never_take_a_tools_query_for_the_question() -> None:
    said = json.dumps([{"role": "assistant", "content": ANSWER}])
    agent = span("invoke_agent a", {"gen_ai.operation.name": "invoke_agent", "gen_ai.output.messages": said})
    tool = span(
        "execute_tool search", {"gen_ai.operation.name": "execute_tool"}, parent=agent.span_id, start=1
    )
    retrieval = span(
        "retrieval kb",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": "aurora battery",
            "gen_ai.retrieval.documents": json.dumps([{"content": DOC}]),
        },
        parent=tool.span_id,
        start=2,
    )
    [rag] = extract(trace(agent, tool, retrieval)).interactions
    assert rag.record.query is None and rag.record.contexts == (DOC,)
    workflow = span(
        "agent.workflow",
        {"traceloop.span.kind": "workflow", "traceloop.entity.output": json.dumps(ANSWER)},
    )
    search = span(
        "search_docs.tool",
        {
            "traceloop.span.kind": "tool",
            "traceloop.entity.input": json.dumps({"kwargs": {"query": "aurora battery"}}),
            "traceloop.entity.output": json.dumps([DOC]),
        },
        parent=workflow.span_id,
        start=1,
    )
    [rag] = extract(trace(workflow, search)).interactions
    assert rag.record.query is None and rag.record.contexts == (DOC,)
