"""extract(): every convention read once per interaction, never from the wrong text, on any trace shape."""

from __future__ import annotations

import json
from pathlib import Path

from trace_builder import span, span_id, trace

from tracescore import semconv
from tracescore.extract import extract
from tracescore.extract._extract import INTEGRATIONS_DOCS
from tracescore.extract._reader import SCRUBBED_SESSION_DOCS
from tracescore.model import DecodedSpan, ExtractSkip

KIND = semconv.OPENINFERENCE_SPAN_KIND
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours."
ANSWER = "The Aurora X2 battery lasts 14 hours."


def oi_rag(root_parent: str | None = None, answer: str = ANSWER, start: int = 0) -> list:
    """An OpenInference LangChain-shaped interaction: CHAIN -> RETRIEVER, LLM."""
    chain = span(
        "RunnableSequence",
        {KIND: "CHAIN", "input.value": QUESTION, "output.value": answer},
        parent=root_parent,
        scope="openinference.instrumentation.langchain",
        start=start,
    )
    retriever = span(
        "VectorStoreRetriever",
        {
            KIND: "RETRIEVER",
            "input.value": QUESTION,
            "output.value": json.dumps({"documents": [{"page_content": DOC, "metadata": {}}]}),
            "retrieval.documents.0.document.content": DOC,
        },
        parent=chain.span_id,
        scope="openinference.instrumentation.langchain",
        start=start + 1,
    )
    llm = span(
        "FakeListChatModel",
        {
            KIND: "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"Context: {DOC}\nQuestion: {QUESTION}",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        },
        parent=chain.span_id,
        scope="openinference.instrumentation.langchain",
        start=start + 2,
    )
    return [chain, retriever, llm]


def test_openinference_chain_is_one_interaction_and_the_retriever_is_never_an_answer() -> None:
    chain, retriever, llm = oi_rag()
    found = extract(trace(chain, retriever, llm))
    [rag] = found.interactions
    assert found.skips == []
    assert rag.span is chain and rag.convention == "openinference"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)
    assert rag.span_ids == {chain.span_id, retriever.span_id, llm.span_id}


def test_spans_out_of_order_give_the_same_interaction() -> None:
    chain, retriever, llm = oi_rag()
    [in_order] = extract(trace(chain, retriever, llm)).interactions
    [reversed_] = extract(trace(llm, retriever, chain)).interactions
    assert in_order == reversed_


def test_tracescore_span_around_an_instrumented_chain_is_scored_once_as_tracescore() -> None:
    ours = span(
        "answer",
        {
            KIND: "CHAIN",
            "input.value": QUESTION,
            "output.value": ANSWER,
            semconv.document_content_key(0): DOC,
            semconv.TRACESCORE_ROUTE: "/support",
        },
        scope=semconv.SDK_SCOPE,
    )
    found = extract(trace(ours, *oi_rag(root_parent=ours.span_id)))
    [rag] = found.interactions
    assert rag.span is ours and rag.convention == "tracescore" and rag.route == "/support"
    assert found.skips == []


def test_two_interactions_in_one_request_are_both_read_with_the_request_route() -> None:
    request = span("POST /ask", {semconv.HTTP_ROUTE: "/ask"}, scope="opentelemetry.instrumentation.fastapi")
    first = oi_rag(root_parent=request.span_id, start=10)
    second = oi_rag(root_parent=request.span_id, answer="It lasts 14 hours.", start=20)
    found = extract(trace(request, *first, *second))
    assert [r.record.answer for r in found.interactions] == [ANSWER, "It lasts 14 hours."]
    assert {r.route for r in found.interactions} == {"/ask"}


def test_a_missing_parent_makes_the_span_a_root_and_the_interaction_is_still_read() -> None:
    chain, retriever, llm = oi_rag(root_parent="00000000deadbeef")
    [rag] = extract(trace(chain, retriever, llm)).interactions
    assert rag.span is chain


def test_a_parent_cycle_neither_hangs_nor_builds_a_score() -> None:
    a, b = span_id(), span_id()
    looped = [
        span("x", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER}, sid=a, parent=b),
        span("y", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": DOC}, sid=b, parent=a),
    ]
    found = extract(trace(*looped))
    # Returns (no endless walk up the parents), and reads the one interaction there is, once, with its
    # documents: no interaction without contexts, none twice.
    [interaction] = found.interactions
    assert interaction.span.name == "x" and interaction.record.contexts == (DOC,)
    assert (interaction.record.query, interaction.record.answer) == (QUESTION, ANSWER)
    assert found.skips == []


def test_non_json_retriever_output_is_an_explained_skip_not_a_score() -> None:
    chain = span("chain", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
    retriever = span("r", {KIND: "RETRIEVER", "output.value": "<html>not json"}, parent=chain.span_id)
    found = extract(trace(chain, retriever))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and chain.span_id in skip.detail


def test_documents_json_of_an_unknown_shape_is_not_read_as_documents() -> None:
    chain = span("chain", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
    odd = json.dumps({"documents": [{"embedding": [0.1, 0.2]}, 7]})
    retriever = span("r", {KIND: "RETRIEVER", "output.value": odd}, parent=chain.span_id)
    [skip] = extract(trace(chain, retriever)).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT


def test_manual_tracer_documents_in_output_json_are_read() -> None:
    chain = span(
        "rag", {KIND: "CHAIN", "input.value": json.dumps({"question": QUESTION}), "output.value": ANSWER}
    )
    retriever = span(
        "retrieve",
        {KIND: "RETRIEVER", "output.value": json.dumps([{"content": DOC, "id": "d1"}])},
        parent=chain.span_id,
    )
    [rag] = extract(trace(chain, retriever)).interactions
    assert rag.record.query == QUESTION and rag.record.contexts == (DOC,)


def test_a_megabyte_attribute_is_read_without_trouble() -> None:
    big = "The Aurora X2 battery lasts 14 hours. " * 28_000  # ~1 MB
    chain = span("chain", {KIND: "CHAIN", "input.value": QUESTION, "output.value": ANSWER})
    retriever = span(
        "r", {KIND: "RETRIEVER", "retrieval.documents.0.document.content": big}, parent=chain.span_id
    )
    [rag] = extract(trace(chain, retriever)).interactions
    assert rag.record.contexts == (big,)


def test_a_trace_with_nothing_to_score_is_one_explained_not_rag_skip() -> None:
    found = extract(trace(span("GET /health", {semconv.HTTP_ROUTE: "/health"}, scope="fastapi")))
    [skip] = found.skips
    assert skip.reason == ExtractSkip.NOT_RAG and skip.expected and "fastapi" in skip.detail
    assert INTEGRATIONS_DOCS in skip.detail and "@tracescore.rag" in skip.detail


def test_the_docs_pages_skips_point_to_exist() -> None:
    repo = Path(__file__).resolve().parents[2]
    for where in (INTEGRATIONS_DOCS, SCRUBBED_SESSION_DOCS):
        page, _, anchor = where.partition("#")
        assert (repo / page).is_file(), where
        assert not anchor or f"## {anchor.replace('-', ' ')}" in (repo / page).read_text().lower(), where


def test_genai_workflow_retrieval_and_chat() -> None:
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}])
    said = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])
    workflow = span(
        "invoke_workflow rag",
        {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.input.messages": user,
            "gen_ai.output.messages": said,
        },
    )
    retrieval = span(
        "retrieval store",
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": QUESTION,
            "gen_ai.retrieval.documents": json.dumps([{"id": "d1", "score": 0.9, "content": DOC}]),
        },
        parent=workflow.span_id,
    )
    chat = span(
        "chat m", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": said}, parent=workflow.span_id
    )
    [rag] = extract(trace(workflow, retrieval, chat)).interactions
    assert rag.convention == "genai" and rag.span is workflow
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)


def test_openllmetry_workflow_with_a_retrieval_task() -> None:
    workflow = span(
        "rag.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.name": "rag",
            "traceloop.entity.input": json.dumps({"args": [QUESTION], "kwargs": {}}),
            "traceloop.entity.output": json.dumps(ANSWER),
        },
    )
    retrieve = span(
        "retrieve.task",
        {
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "retrieve",
            "traceloop.entity.output": json.dumps([DOC]),
        },
        parent=workflow.span_id,
    )
    [rag] = extract(trace(workflow, retrieve)).interactions
    assert rag.convention == "openllmetry"
    assert (rag.record.query, rag.record.contexts, rag.record.answer) == (QUESTION, (DOC,), ANSWER)


def test_openllmetry_without_a_recorded_retrieval_is_an_explained_skip() -> None:
    workflow = span(
        "RunnableSequence.workflow",
        {
            "traceloop.span.kind": "workflow",
            "traceloop.entity.input": json.dumps({"inputs": QUESTION}),
            "traceloop.entity.output": json.dumps({"outputs": ANSWER}),
        },
    )
    llm = span(
        "ChatModel.chat",
        {"gen_ai.prompt.0.content": f"Context: {DOC} {QUESTION}", "gen_ai.completion.0.content": ANSWER},
        parent=workflow.span_id,
    )
    found = extract(trace(workflow, llm))
    assert found.interactions == []
    [skip] = found.skips
    assert skip.reason == ExtractSkip.NO_RETRIEVAL and "inside the LLM prompt" in skip.detail


def test_a_genai_retrieval_that_recorded_fewer_documents_than_it_returned_says_so() -> None:
    """OpenLIT records the first three documents of a retrieval and the full count: the record says the others
    were not judged, so a faithful answer that rests on them is not a mystery."""
    said = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])
    user = json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}])
    root = span("aurora_support_rag")
    documents = json.dumps([{"content": DOC}, {"content": "The Aurora X2 weighs 1.2 kg."}])

    def retrieval(count: int) -> DecodedSpan:
        attributes = {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": documents,
            "gen_ai.retrieval.document_count": count,
        }
        return span("retrieval VectorStoreRetriever", attributes, parent=root.span_id)

    chat = span(
        "chat model",
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": user, "gen_ai.output.messages": said},
        parent=root.span_id,
    )
    [cut] = extract(trace(root, retrieval(5), chat)).interactions
    assert len(cut.record.contexts) == 2
    [note] = cut.context_notes
    assert "returned 5 documents and recorded 2" in note
    [whole] = extract(trace(root, retrieval(2), chat)).interactions
    assert whole.context_notes == ()
