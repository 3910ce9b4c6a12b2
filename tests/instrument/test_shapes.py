"""Every RAG shape: `@retriever` and `@generation` children of `@rag`, manual spans, documents of any common
shape, methods of every kind, and the OpenInference + OTel GenAI attributes each span carries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tracescore import semconv

DOCS = ["Paris is the capital of France.", "France is in Europe."]


def spans_by_name(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {s.name: s for s in exporter.get_finished_spans() if s.instrumentation_scope.name == "tracescore"}


def documents(span: ReadableSpan) -> list[dict[str, Any]]:
    attrs = dict(span.attributes or {})
    out = []
    while (content := attrs.get(semconv.document_key(len(out), "content"))) is not None:
        index = len(out)
        doc = {"content": content}
        for field in ("id", "score", "metadata"):
            if (value := attrs.get(semconv.document_key(index, field))) is not None:
                doc[field] = json.loads(value) if field == "metadata" else value
        out.append(doc)
    return out


# --- framework documents, read by shape (no framework imported) ---------------------------------------


class LangChainDocument:
    """The attributes of langchain_core.documents.Document that tracescore reads."""

    def __init__(self, page_content: str, metadata: dict[str, Any], id: str | None = None) -> None:
        self.page_content, self.metadata, self.id = page_content, metadata, id


class TextNode:
    """llama_index.core.schema.TextNode's text, node_id and metadata."""

    def __init__(self, text: str, node_id: str, metadata: dict[str, Any]) -> None:
        self.text, self.node_id, self.metadata = text, node_id, metadata


class NodeWithScore:
    def __init__(self, node: TextNode, score: float) -> None:
        self.node, self.score = node, score


# --- @retriever and roll-up ---------------------------------------------------------------------------


@tracescore.retriever
def search(query: str) -> list[Any]:
    return [
        {"content": DOCS[0], "id": "d1", "score": 0.9, "metadata": {"source": "wiki"}},
        LangChainDocument(DOCS[1], {"page": 3}, id="lc-7"),
        NodeWithScore(TextNode("Lyon is in France.", "node-42", {"file": "a.txt"}), 0.5),
    ]


@tracescore.generation(model="gpt-4o-mini")
def generate(messages: list[dict[str, str]]) -> str:
    return "Paris."


@tracescore.rag(route="/geo")
def answer(query: str) -> str:
    search(query)  # its documents roll up onto this span
    return generate([{"role": "system", "content": "Use the context."}, {"role": "user", "content": query}])


def test_retrieval_and_generation_in_separate_functions(exporter: InMemorySpanExporter) -> None:
    assert answer("Capital of France?") == "Paris."
    spans = spans_by_name(exporter)
    rag, retrieval, llm = spans["answer"], spans["search"], spans["generate"]
    assert retrieval.parent.span_id == rag.context.span_id and llm.parent.span_id == rag.context.span_id

    assert retrieval.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "RETRIEVER"
    assert retrieval.attributes[semconv.GEN_AI_OPERATION_NAME] == "retrieval"
    assert retrieval.attributes[semconv.GEN_AI_RETRIEVAL_QUERY_TEXT] == "Capital of France?"
    assert retrieval.attributes[semconv.INPUT_VALUE] == "Capital of France?"
    expected = [
        {"content": DOCS[0], "id": "d1", "score": 0.9, "metadata": {"source": "wiki"}},
        {"content": DOCS[1], "id": "lc-7", "metadata": {"page": 3}},
        {"content": "Lyon is in France.", "id": "node-42", "score": 0.5, "metadata": {"file": "a.txt"}},
    ]
    assert documents(retrieval) == expected
    assert json.loads(retrieval.attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS]) == [
        {"id": "d1", "score": 0.9},
        {"id": "lc-7"},
        {"id": "node-42", "score": 0.5},
    ]

    # The rag span carries the rolled-up documents: what the consumer reads and scores.
    assert rag.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "CHAIN"
    assert rag.attributes[semconv.GEN_AI_OPERATION_NAME] == "invoke_workflow"
    assert documents(rag) == expected
    assert rag.attributes[semconv.OUTPUT_VALUE] == "Paris."
    assert rag.attributes[semconv.TRACESCORE_ROUTE] == "/geo"

    assert llm.attributes[semconv.OPENINFERENCE_SPAN_KIND] == "LLM"
    assert llm.attributes[semconv.GEN_AI_OPERATION_NAME] == "chat"
    assert (
        llm.attributes[semconv.LLM_MODEL_NAME]
        == llm.attributes[semconv.GEN_AI_REQUEST_MODEL]
        == "gpt-4o-mini"
    )
    assert llm.attributes["llm.input_messages.0.message.role"] == "system"
    assert llm.attributes["llm.input_messages.1.message.content"] == "Capital of France?"
    assert llm.attributes["llm.output_messages.0.message.content"] == "Paris."
    assert json.loads(llm.attributes[semconv.GEN_AI_INPUT_MESSAGES])[1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "Capital of France?"}],
    }
    assert json.loads(llm.attributes[semconv.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "Paris."


def test_two_retrievals_number_their_documents_on_in_the_rag_span(exporter: InMemorySpanExporter) -> None:
    @tracescore.retriever
    def keyword(query: str) -> list[str]:
        return ["k1", "k2"]

    @tracescore.retriever(name="vector")
    def vector(question: str) -> list[str]:
        return ["v1"]

    @tracescore.rag
    def ask(query: str, contexts: list[str]) -> str:
        keyword(query)
        vector(question=query)
        return "a"

    ask("q", ["given"])
    assert [d["content"] for d in documents(spans_by_name(exporter)["ask"])] == ["given", "k1", "k2", "v1"]


async def test_async_retriever_and_streamed_async_generation(exporter: InMemorySpanExporter) -> None:
    @tracescore.retriever
    async def fetch(query: str) -> list[str]:
        return DOCS

    @tracescore.generation
    async def stream(prompt: str, model: str = "local-llm") -> AsyncIterator[str]:
        for word in ("Par", "is."):
            yield word

    @tracescore.rag
    async def ask(query: str) -> str:
        await fetch(query)
        return "".join([chunk async for chunk in stream(f"Answer: {query}")])

    assert await ask("q") == "Paris."
    spans = spans_by_name(exporter)
    assert [d["content"] for d in documents(spans["ask"])] == DOCS
    llm = spans["stream"]
    assert llm.attributes["llm.output_messages.0.message.content"] == "Paris."
    assert llm.attributes["llm.input_messages.0.message.content"] == "Answer: q"
    assert llm.attributes[semconv.GEN_AI_REQUEST_MODEL] == "local-llm"


def test_generator_retriever_records_every_yielded_document(exporter: InMemorySpanExporter) -> None:
    @tracescore.retriever
    def pages(query: str) -> Iterator[list[str]]:
        yield ["p1", "p2"]
        yield ["p3"]

    assert [doc for page in pages("q") for doc in page] == ["p1", "p2", "p3"]
    assert [d["content"] for d in documents(spans_by_name(exporter)["pages"])] == ["p1", "p2", "p3"]


def test_generation_reads_openai_completions_and_stream_chunks(exporter: InMemorySpanExporter) -> None:
    completion = ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Paris."}}
            ],
        }
    )

    def chunk(text: str) -> ChatCompletionChunk:
        return ChatCompletionChunk.model_validate(
            {
                "id": "c2",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": {"content": text}}],
            }
        )

    @tracescore.generation
    def complete(messages: list[dict[str, str]]) -> ChatCompletion:
        return completion

    @tracescore.generation
    def streamed(messages: list[dict[str, str]]) -> Iterator[ChatCompletionChunk]:
        yield chunk("Lyon ")
        yield chunk("too.")

    complete([{"role": "user", "content": "q"}])
    list(streamed([{"role": "user", "content": "q"}]))
    spans = spans_by_name(exporter)
    assert spans["complete"].attributes[semconv.OUTPUT_VALUE] == "Paris."
    assert spans["streamed"].attributes[semconv.OUTPUT_VALUE] == "Lyon too."


# --- manual capture -----------------------------------------------------------------------------------


def test_manual_spans_for_code_that_cannot_be_decorated(exporter: InMemorySpanExporter) -> None:
    with tracescore.rag_span("handle", route="/manual") as s:
        s.set_query("Capital of France?")
        with tracescore.retriever_span() as r:
            r.set_query("Capital of France?")
            r.add_documents([{"text": DOCS[0], "doc_id": "x"}])
        s.add_contexts([DOCS[1]])
        with tracescore.generation_span(model="m") as g:
            g.set_messages("Capital of France?")
            g.set_output("Paris.")
        s.set_answer("Paris.")
    spans = spans_by_name(exporter)
    rag = spans["handle"]
    assert rag.attributes[semconv.INPUT_VALUE] == "Capital of France?"
    assert rag.attributes[semconv.TRACESCORE_ROUTE] == "/manual"
    assert [d["content"] for d in documents(rag)] == DOCS
    assert documents(spans["retrieve"]) == [{"content": DOCS[0], "id": "x"}]
    assert spans["generate"].attributes["llm.input_messages.0.message.role"] == "user"
    assert spans["retrieve"].parent.span_id == rag.context.span_id
    assert rag.attributes[semconv.OUTPUT_VALUE] == "Paris."


def test_manual_span_records_the_exception_and_lets_it_through(exporter: InMemorySpanExporter) -> None:
    with pytest.raises(KeyError), tracescore.rag_span("broken") as s:
        s.set_query("q")
        raise KeyError("missing")
    span = spans_by_name(exporter)["broken"]
    assert span.status.status_code.name == "ERROR"
    assert span.attributes[semconv.ERROR_TYPE] == "KeyError"
    assert [e.name for e in span.events] == ["exception"]


# --- methods of every kind ----------------------------------------------------------------------------


class Pipeline:
    prefix = "cls"

    @tracescore.rag
    def method(self, query: str, contexts: list[str]) -> str:
        return f"{type(self).__name__}:{query}"

    @classmethod
    @tracescore.rag
    def class_below(cls, query: str) -> str:
        return f"{cls.prefix}:{query}"

    @tracescore.rag
    @classmethod
    def class_above(cls, query: str) -> str:
        return f"{cls.prefix}:{query}"

    @staticmethod
    @tracescore.retriever
    def static_below(query: str) -> list[str]:
        return [query]

    @tracescore.generation
    @staticmethod
    def static_above(prompt: str) -> str:
        return prompt.upper()


def test_methods_classmethods_and_staticmethods(exporter: InMemorySpanExporter) -> None:
    pipeline = Pipeline()
    assert pipeline.method("q", DOCS) == "Pipeline:q"
    assert Pipeline.class_below("q") == pipeline.class_below("q") == "cls:q"
    assert Pipeline.class_above("q") == "cls:q"
    assert Pipeline.static_below("q") == pipeline.static_below("q") == ["q"]
    assert Pipeline.static_above("q") == "Q"
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == ["method", "class_below", "class_below", "class_above", "static_below", "static_below",
                     "static_above"]  # fmt: skip
    spans = spans_by_name(exporter)
    assert spans["method"].attributes[semconv.INPUT_VALUE] == "q"
    assert [d["content"] for d in documents(spans["method"])] == DOCS
    assert spans["class_above"].attributes[semconv.OUTPUT_VALUE] == "cls:q"
    assert spans["static_above"].attributes[semconv.OUTPUT_VALUE] == "Q"


# --- session, user, metadata ------------------------------------------------------------------------


def test_session_user_metadata_and_tags(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag(session_arg="session", user_arg="user")
    def ask(query: str, session: str, user: str) -> str:
        search(query)
        return "a"

    with tracescore.attributes(metadata={"tenant": "acme"}, tags=["beta"]):
        ask("q", "s-1", "u-1")
    spans = spans_by_name(exporter)
    rag = spans["ask"]
    assert rag.attributes[semconv.SESSION_ID] == rag.attributes[semconv.GEN_AI_CONVERSATION_ID] == "s-1"
    assert rag.attributes[semconv.USER_ID] == "u-1"
    for span in (rag, spans["search"]):  # the block's attributes reach every tracescore span in it
        assert json.loads(span.attributes[semconv.METADATA]) == {"tenant": "acme"}
        assert list(span.attributes[semconv.TAG_TAGS]) == ["beta"]


def test_every_span_names_its_genai_operation(exporter: InMemorySpanExporter) -> None:
    answer("q")
    operations = {s.name: s.attributes[semconv.GEN_AI_OPERATION_NAME] for s in exporter.get_finished_spans()}
    assert operations == {"answer": "invoke_workflow", "search": "retrieval", "generate": "chat"}
