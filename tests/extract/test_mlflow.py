"""MLflow Tracing spans (mlflow.spanType / spanInputs / spanOutputs, JSON-encoded) read right at the edges the
recordings in fixtures/mlflow do not cover: no content, a huge repr output, a huge tool result, no root."""

from __future__ import annotations

import json
from typing import Any

from trace_builder import span, trace

from tracescore.extract import extract
from tracescore.extract._context import MAX_CONTEXTS
from tracescore.model import ExtractSkip

QUESTION = "How long does the Aurora X2 battery last?"
DOCS = ("The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg.")
ANSWER = "The Aurora X2 battery lasts 14 hours."


def _mlflow(span_type: str, inputs: Any = None, outputs: Any = None) -> dict[str, str]:
    """Attributes as MLflow writes them: every value JSON-encoded, a span type too."""
    attributes = {"mlflow.traceRequestId": json.dumps("tr-1"), "mlflow.spanType": json.dumps(span_type)}
    if inputs is not None:
        attributes["mlflow.spanInputs"] = json.dumps(inputs)
    if outputs is not None:
        attributes["mlflow.spanOutputs"] = json.dumps(outputs)
    return attributes


def _completion(content: str | None = ANSWER, tool: str | None = None) -> dict[str, Any]:
    calls = (
        [{"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}] if tool else None
    )
    message = {"role": "assistant", "content": content, "tool_calls": calls}
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def _chat_inputs(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": QUESTION}, *messages]}


def _rag(root_outputs: Any, *, llm: bool = True) -> list:
    root = span("answer_question", _mlflow("UNKNOWN", {"question": QUESTION}, root_outputs), start=0)
    documents = [{"page_content": d, "metadata": {}, "id": str(i)} for i, d in enumerate(DOCS)]
    retrieve = span(
        "retrieve", _mlflow("RETRIEVER", {"query": QUESTION}, documents), parent=root.span_id, start=1
    )
    chat = span(
        "Completions", _mlflow("CHAT_MODEL", _chat_inputs(), _completion()), parent=root.span_id, start=2
    )
    return [root, retrieve, *([chat] if llm else [])]


def test_a_traced_rag_function_is_one_interaction_on_its_own_span() -> None:
    spans = _rag(ANSWER)
    [rag] = extract(trace(*spans)).interactions
    assert rag.span is spans[0] and rag.convention == "mlflow"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, DOCS, ANSWER)
    assert [s.kind for s in rag.context_sources] == ["retriever", "retriever"]


def test_spans_without_content_are_skipped_saying_where_it_was_looked_for() -> None:
    root = span("answer_question", _mlflow("UNKNOWN"))
    retrieve = span("retrieve", _mlflow("RETRIEVER"), parent=root.span_id, start=1)
    chat = span("Completions", _mlflow("CHAT_MODEL"), parent=root.span_id, start=2)
    found = extract(trace(root, retrieve, chat))
    assert found.interactions == []
    [skip] = found.skips
    assert (
        skip.reason == ExtractSkip.MISSING_ANSWER
        and skip.span is root
        and "mlflow.spanOutputs" in skip.detail
    )


def test_a_100_kb_repr_output_is_never_the_answer() -> None:
    program_repr = "ChatResponse(message=ChatMessage(role='assistant', content='" + "x" * 100_000 + "'))"
    [rag] = extract(trace(*_rag(program_repr))).interactions
    assert rag.record.answer == ANSWER  # the LLM call's text
    found = extract(trace(*_rag(program_repr, llm=False)))
    assert found.interactions == []
    [skip] = found.skips
    assert (
        skip.reason == ExtractSkip.MISSING_ANSWER and "program repr" in skip.detail and len(skip.detail) < 500
    )


def test_a_streamed_output_is_answered_by_the_llm_call() -> None:
    chunks = ["The", " Aurora", " X2", " battery", " lasts", " 14", " hours."]
    spans = _rag(chunks)
    [rag] = extract(trace(*spans)).interactions
    assert rag.span is spans[0] and rag.record.answer == ANSWER


def test_a_huge_json_tool_result_is_judged_within_bounds() -> None:
    results = [{"content": f"Aurora fact {i}: " + "y" * 20_000} for i in range(200)]  # ~4 MB of JSON
    agent = span("aurora_agent", _mlflow("AGENT", {"question": QUESTION}, ANSWER), start=0)
    ask = span(
        "Completions",
        _mlflow("CHAT_MODEL", _chat_inputs(), _completion(None, "search")),
        parent=agent.span_id,
    )
    tool = span("search", _mlflow("TOOL", {"query": QUESTION}, results), parent=agent.span_id, start=2)
    answer = span("Completions", _mlflow("CHAT_MODEL", _chat_inputs(), _completion()), parent=agent.span_id)
    [rag] = extract(trace(agent, ask, tool, answer)).interactions
    assert rag.span is agent and len(rag.record.contexts) == MAX_CONTEXTS
    assert rag.record.contexts[0].startswith("Aurora fact 0: ")
    assert any("limit" in note for note in rag.context_notes)


def test_without_a_traced_root_the_function_calling_loop_is_one_interaction() -> None:
    """Only autolog: two LLM calls and the tool that ran between them, under an untraced request span."""
    request = span("POST /ask", {"http.route": "/ask"}, start=0)
    tool_message = {"role": "tool", "tool_call_id": "c1", "content": json.dumps(list(DOCS))}
    ask = span(
        "Completions",
        _mlflow("CHAT_MODEL", _chat_inputs(), _completion(None, "search")),
        parent=request.span_id,
        start=1,
    )
    answer = span(
        "Completions",
        _mlflow("CHAT_MODEL", _chat_inputs(tool_message), _completion()),
        parent=request.span_id,
        start=3,
    )
    found = extract(trace(request, ask, answer))
    [rag] = found.interactions
    assert found.skips == [] and rag.span is answer and rag.route == "/ask"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, DOCS, ANSWER)
    assert {s.kind for s in rag.context_sources} == {"tool_message"}
    # A tool span that recorded no output is no evidence: the result passed to the model is.
    tool = span("search", _mlflow("TOOL", {"query": QUESTION}), parent=request.span_id, start=2)
    [rag] = extract(trace(request, ask, tool, answer)).interactions
    assert rag.record.contexts == DOCS and {s.kind for s in rag.context_sources} == {"tool_message"}


def test_a_tool_that_wraps_a_retriever_is_read_once_through_it() -> None:
    agent = span("agent", _mlflow("AGENT", {"question": QUESTION}, ANSWER))
    tool = span("search", _mlflow("TOOL", {"q": QUESTION}, "\n".join(DOCS)), parent=agent.span_id, start=1)
    retrieve = span(
        "retrieve", _mlflow("RETRIEVER", {"q": QUESTION}, list(DOCS)), parent=tool.span_id, start=2
    )
    [rag] = extract(trace(agent, tool, retrieve)).interactions
    assert rag.record.contexts == DOCS and [s.kind for s in rag.context_sources] == ["retriever"] * 2


def test_a_reranker_output_replaces_the_documents_it_reranked() -> None:
    chain = span("rag", _mlflow("CHAIN", {"query": QUESTION}, {"answer": ANSWER, "sources": ["a"]}))
    retrieve = span(
        "retrieve", _mlflow("RETRIEVER", {"query": QUESTION}, [*DOCS, "noise"]), parent=chain.span_id, start=1
    )
    rerank = span(
        "rerank", _mlflow("RERANKER", {"query": QUESTION}, [{"page_content": DOCS[0]}]), parent=chain.span_id
    )
    [rag] = extract(trace(chain, retrieve, rerank)).interactions
    assert rag.record.contexts == (DOCS[0],) and rag.record.answer == ANSWER
    assert [s.kind for s in rag.context_sources] == ["reranker"]


def test_chat_inputs_and_other_clients_outputs_are_read() -> None:
    messages = {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUESTION}]
    }
    outputs = [
        {
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ANSWER}]}
            ]
        },
        {"generations": [[{"text": ANSWER, "type": "ChatGeneration"}]], "llm_output": {}},
        {"role": "assistant", "content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn"},
    ]
    for output in outputs:
        chain = span("agent", _mlflow("CHAIN", messages, None))
        retrieve = span("retrieve", _mlflow("RETRIEVER", {"q": QUESTION}, list(DOCS)), parent=chain.span_id)
        llm = span("llm", _mlflow("LLM", messages, output), parent=chain.span_id, start=2)
        [rag] = extract(trace(chain, retrieve, llm)).interactions
        assert (rag.span, rag.record.query, rag.record.answer) == (chain, QUESTION, ANSWER), output
    # LangChain autolog without a traced chain: the chat model's input is a batch of message lists.
    batch = [[{"type": "system", "content": "Be brief."}, {"type": "human", "content": QUESTION}]]
    retrieve = span("retrieve", _mlflow("RETRIEVER", {"query": "battery life"}, list(DOCS)), start=1)
    llm = span("ChatOpenAI", _mlflow("CHAT_MODEL", batch, outputs[1]), start=2)
    [rag] = extract(trace(retrieve, llm)).interactions
    assert (rag.span, rag.record.query, rag.record.contexts) == (llm, QUESTION, DOCS)


def test_retrieval_tool_and_helper_spans_alone_are_never_an_interaction() -> None:
    """A span type not written JSON-encoded (converted by another exporter) is read the same."""
    helper = span("format_context", {"mlflow.spanType": "UNKNOWN", "mlflow.spanOutputs": json.dumps(ANSWER)})
    retrieve = span(
        "retrieve", {"mlflow.spanType": "RETRIEVER", "mlflow.spanOutputs": json.dumps(list(DOCS))}
    )
    for spans in ((helper,), (retrieve,), (helper, retrieve)):
        found = extract(trace(*spans))
        assert found.interactions == [] and [s.reason for s in found.skips] == [ExtractSkip.NOT_RAG]
