"""`@tracescore.rag` puts a RAG call's query, contexts and answer on one span, for every call shape."""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import tracescore
from tracescore import semconv

CONTEXTS = ["Paris is the capital of France.", "France is in Europe."]


def only_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = [s for s in exporter.get_finished_spans() if s.instrumentation_scope.name == "tracescore"]
    assert len(spans) == 1, [s.name for s in spans]
    return spans[0]


def contexts_of(span: ReadableSpan) -> list[str]:
    attrs = span.attributes or {}
    out = []
    while (text := attrs.get(semconv.document_content_key(len(out)))) is not None:
        out.append(text)
    return out


def assert_rag_span(span: ReadableSpan, query: str, contexts: list[str], answer: str) -> None:
    attrs = span.attributes or {}
    assert attrs[semconv.OPENINFERENCE_SPAN_KIND] == "CHAIN"
    assert attrs[semconv.INPUT_VALUE] == query
    assert contexts_of(span) == contexts
    assert attrs[semconv.OUTPUT_VALUE] == answer
    assert json.loads(attrs[semconv.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": query}]}
    ]
    output_messages = json.loads(attrs[semconv.GEN_AI_OUTPUT_MESSAGES])
    assert [m["role"] for m in output_messages] == ["assistant"]
    assert output_messages[0]["parts"] == [{"type": "text", "content": answer}]


def test_message_json_is_the_bytes_json_dumps_writes_for_any_text(exporter: InMemorySpanExporter) -> None:
    # Quotes, backslashes, control characters, non-ASCII, a lone surrogate: what a consumer's JSON parser
    # and a byte-for-byte comparison with other SDKs both rely on.
    awkward = 'say "hi"\\ \n\t caf\u00e9 \u2028 \ud83d'

    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> str:
        return awkward

    answer(awkward, CONTEXTS)
    attrs = only_span(exporter).attributes or {}
    part = [{"type": "text", "content": awkward}]
    assert attrs[semconv.GEN_AI_INPUT_MESSAGES] == json.dumps([{"role": "user", "parts": part}])
    expected = [{"role": "assistant", "parts": part, "finish_reason": "stop"}]
    assert attrs[semconv.GEN_AI_OUTPUT_MESSAGES] == json.dumps(expected)


# --- the four call shapes ---------------------------------------------------------------------------


def test_sync_function(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> str:
        return "Paris."

    assert answer("Capital of France?", CONTEXTS) == "Paris."
    span = only_span(exporter)
    assert span.name == "answer"
    assert_rag_span(span, "Capital of France?", CONTEXTS, "Paris.")


async def test_async_function(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    async def answer(query: str, contexts: list[str]) -> str:
        return "Paris."

    assert await answer("Capital of France?", CONTEXTS) == "Paris."
    assert_rag_span(only_span(exporter), "Capital of France?", CONTEXTS, "Paris.")


def test_generator_function_records_the_concatenated_chunks(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def stream(query: str, contexts: list[str]) -> Iterator[str]:
        yield "Par"
        yield "is."

    assert list(stream("Capital of France?", CONTEXTS)) == ["Par", "is."]
    assert_rag_span(only_span(exporter), "Capital of France?", CONTEXTS, "Paris.")


async def test_async_generator_function_records_the_concatenated_chunks(
    exporter: InMemorySpanExporter,
) -> None:
    @tracescore.rag
    async def stream(query: str, contexts: list[str]) -> AsyncIterator[str]:
        yield "Par"
        yield "is."

    assert [chunk async for chunk in stream("Capital of France?", CONTEXTS)] == ["Par", "is."]
    assert_rag_span(only_span(exporter), "Capital of France?", CONTEXTS, "Paris.")


def test_generator_span_ends_only_when_the_stream_is_consumed(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def stream(query: str, contexts: list[str]) -> Iterator[str]:
        yield "a"
        yield "b"

    chunks = stream("q", CONTEXTS)
    assert next(chunks) == "a"
    assert exporter.get_finished_spans() == ()
    assert list(chunks) == ["b"]
    assert only_span(exporter).attributes[semconv.OUTPUT_VALUE] == "ab"


async def test_a_consumer_that_stops_a_stream_early_ends_its_span_without_error(
    exporter: InMemorySpanExporter,
) -> None:
    @tracescore.rag
    def stream(query: str, contexts: list[str]) -> Iterator[str]:
        yield "a"
        yield "b"

    @tracescore.rag
    async def stream_async(query: str, contexts: list[str]) -> AsyncIterator[str]:
        yield "a"
        yield "b"

    chunks = stream("q", CONTEXTS)
    assert next(chunks) == "a"
    chunks.close()
    async_chunks = stream_async("q", CONTEXTS)
    assert await anext(async_chunks) == "a"
    await async_chunks.aclose()
    spans = exporter.get_finished_spans()
    assert len(spans) == 2  # both ended, once
    for span in spans:
        assert span.status.status_code is not StatusCode.ERROR and not span.events
        assert semconv.OUTPUT_VALUE not in span.attributes  # a stream cut short has no answer to record


def test_rag_span_is_a_child_of_the_callers_span(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> str:
        return "a"

    with trace.get_tracer("app").start_as_current_span("POST /ask") as parent:
        answer("q", CONTEXTS)
    span = only_span(exporter)
    assert span.parent is not None
    assert span.parent.span_id == parent.get_span_context().span_id
    assert span.context.trace_id == parent.get_span_context().trace_id


# --- finding the query and contexts -----------------------------------------------------------------


@pytest.mark.parametrize("call", ["positional", "keyword"])
def test_question_and_documents_parameter_names(exporter: InMemorySpanExporter, call: str) -> None:
    @tracescore.rag
    def answer(question: str, documents: list[str]) -> str:
        return "Paris."

    if call == "positional":
        answer("Capital?", CONTEXTS)
    else:
        answer(documents=CONTEXTS, question="Capital?")
    assert_rag_span(only_span(exporter), "Capital?", CONTEXTS, "Paris.")


def test_docs_parameter_name(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(llm: Any, question: str, *, docs: list[str]) -> str:
        return "Paris."

    answer(object(), "Capital?", docs=CONTEXTS)
    assert_rag_span(only_span(exporter), "Capital?", CONTEXTS, "Paris.")


@dataclass
class _LangChainLikeDocument:
    page_content: str
    metadata: dict[str, Any]


def test_contexts_as_dicts_objects_and_strings(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str, contexts: list[Any]) -> str:
        return "a"

    answer(
        "q",
        [
            {"page_content": "from page_content", "id": 1},
            {"content": "from content"},
            {"text": "from text"},
            _LangChainLikeDocument("from an object", {"source": "x"}),
            "a plain string",
        ],
    )
    assert contexts_of(only_span(exporter)) == [
        "from page_content",
        "from content",
        "from text",
        "from an object",
        "a plain string",
    ]


def test_a_single_string_context_is_one_document(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str, contexts: str) -> str:
        return "a"

    answer("q", "the only document")
    assert contexts_of(only_span(exporter)) == ["the only document"]


def test_methods_are_supported(exporter: InMemorySpanExporter) -> None:
    class Pipeline:
        @tracescore.rag
        def run(self, query: str, contexts: list[str]) -> str:
            return f"answer to {query}"

    assert Pipeline().run("q", CONTEXTS) == "answer to q"
    assert_rag_span(only_span(exporter), "q", CONTEXTS, "answer to q")


# --- the called form --------------------------------------------------------------------------------


def test_name_and_fixed_route(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag(name="support-answer", route="/x")
    def answer(query: str, contexts: list[str]) -> str:
        return "a"

    answer("q", CONTEXTS)
    span = only_span(exporter)
    assert span.name == "support-answer"
    assert span.attributes[semconv.TRACESCORE_ROUTE] == "/x"


def test_route_read_from_the_call(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag(route_arg="route")
    def answer(query: str, contexts: list[str], route: str) -> str:
        return "a"

    answer("q", CONTEXTS, route="/billing")
    answer("q", CONTEXTS, "/shipping")
    routes = [s.attributes[semconv.TRACESCORE_ROUTE] for s in exporter.get_finished_spans()]
    assert routes == ["/billing", "/shipping"]


def test_no_route_attribute_without_a_route(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> str:
        return "a"

    answer("q", CONTEXTS)
    assert semconv.TRACESCORE_ROUTE not in only_span(exporter).attributes


def test_explicit_query_and_contexts_argument_names(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag(query_arg="prompt", contexts_arg="passages")
    def answer(prompt: str, passages: list[str], query: str = "not this") -> str:
        return "Paris."

    answer("Capital?", CONTEXTS)
    assert_rag_span(only_span(exporter), "Capital?", CONTEXTS, "Paris.")


def test_answer_extractor(exporter: InMemorySpanExporter) -> None:
    result = {"text": "Paris.", "tokens": 3}

    @tracescore.rag(answer=lambda r: r["text"])
    def answer(query: str, contexts: list[str]) -> dict[str, Any]:
        return result

    assert answer("q", CONTEXTS) is result
    assert only_span(exporter).attributes[semconv.OUTPUT_VALUE] == "Paris."


def test_mapping_return_with_an_answer_key(exporter: InMemorySpanExporter) -> None:
    result = {"answer": "Paris.", "sources": [1, 2]}

    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> dict[str, Any]:
        return result

    assert answer("q", CONTEXTS) is result
    assert_rag_span(only_span(exporter), "q", CONTEXTS, "Paris.")


# --- errors -----------------------------------------------------------------------------------------


def test_missing_query_parameter_is_a_decoration_time_type_error() -> None:
    def lookup_without_query(prompt: str, contexts: list[str]) -> str:
        return "a"

    with pytest.raises(TypeError, match="lookup_without_query") as excinfo:
        tracescore.rag(lookup_without_query)
    assert "query_arg" in str(excinfo.value)


def test_query_arg_naming_a_missing_parameter_is_a_type_error() -> None:
    def answer(prompt: str) -> str:
        return "a"

    with pytest.raises(TypeError, match="'user_prompt'"):
        tracescore.rag(query_arg="user_prompt")(answer)


def test_contexts_arg_naming_a_missing_parameter_is_a_type_error() -> None:
    def answer(query: str) -> str:
        return "a"

    with pytest.raises(TypeError, match="'passages'"):
        tracescore.rag(contexts_arg="passages")(answer)


@pytest.mark.parametrize("shape", ["sync", "async"])
async def test_exception_propagates_and_marks_the_span(exporter: InMemorySpanExporter, shape: str) -> None:
    error = ValueError("retriever down")

    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> str:
        raise error

    @tracescore.rag
    async def answer_async(query: str, contexts: list[str]) -> str:
        raise error

    with pytest.raises(ValueError) as excinfo:
        if shape == "sync":
            answer("q", CONTEXTS)
        else:
            await answer_async("q", CONTEXTS)
    assert excinfo.value is error
    assert not trace.get_current_span().get_span_context().is_valid  # the caller's context is back
    span = only_span(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert [e.name for e in span.events] == ["exception"]
    assert span.events[0].attributes["exception.type"] == "ValueError"
    assert span.events[0].attributes["exception.message"] == "retriever down"
    assert semconv.OUTPUT_VALUE not in span.attributes


async def test_exception_in_an_async_generator_propagates_and_marks_the_span(
    exporter: InMemorySpanExporter,
) -> None:
    @tracescore.rag
    async def stream(query: str, contexts: list[str]) -> AsyncIterator[str]:
        yield "partial"
        raise RuntimeError("model stream cut")

    received = []
    with pytest.raises(RuntimeError, match="model stream cut"):
        async for chunk in stream("q", CONTEXTS):
            received.append(chunk)
    assert received == ["partial"]
    assert only_span(exporter).status.status_code is StatusCode.ERROR


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("cannot render")


def test_a_context_whose_str_raises_is_named_not_raised(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str, contexts: Any) -> str:
        return "Paris."

    assert answer("q", _Unprintable()) == "Paris."
    span = only_span(exporter)
    assert contexts_of(span) == ["<unprintable _Unprintable>"]
    assert span.status.status_code is not StatusCode.ERROR
    assert span.attributes[semconv.OUTPUT_VALUE] == "Paris."


def test_failing_answer_extractor_does_not_break_the_call(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    @tracescore.rag(answer=lambda r: r["missing"])
    def answer(query: str, contexts: list[str]) -> dict[str, str]:
        return {"text": "Paris."}

    with caplog.at_level(logging.WARNING, logger="tracescore.instrument"):
        assert answer("q", CONTEXTS) == {"text": "Paris."}
    assert any(r.name == "tracescore.instrument" for r in caplog.records)
    assert semconv.OUTPUT_VALUE not in only_span(exporter).attributes


# --- record_contexts --------------------------------------------------------------------------------


def test_record_contexts_inside_a_decorated_function(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str) -> str:
        tracescore.record_contexts([{"page_content": "retrieved inside"}, "second"])
        return "a"

    answer("q")
    assert_rag_span(only_span(exporter), "q", ["retrieved inside", "second"], "a")


def test_record_contexts_outside_any_span_is_a_no_op(exporter: InMemorySpanExporter) -> None:
    tracescore.record_contexts(["nowhere to go"])
    assert exporter.get_finished_spans() == ()


# --- the wrapper looks like the function ------------------------------------------------------------


def test_functools_wraps_preserved() -> None:
    @tracescore.rag
    def answer(query: str, contexts: list[str]) -> str:
        """Answer from the contexts."""
        return "a"

    @tracescore.rag(name="other")
    async def answer_async(query: str, contexts: list[str]) -> str:
        """Async answer."""
        return "a"

    @tracescore.rag
    def stream(query: str) -> Iterator[str]:
        yield "a"

    @tracescore.rag
    async def stream_async(query: str) -> AsyncIterator[str]:
        yield "a"

    assert answer.__name__ == "answer"
    assert answer.__doc__ == "Answer from the contexts."
    assert answer_async.__name__ == "answer_async"
    assert answer_async.__doc__ == "Async answer."
    assert inspect.iscoroutinefunction(answer_async)
    assert not inspect.iscoroutinefunction(answer)
    assert inspect.isgeneratorfunction(stream)
    assert inspect.isasyncgenfunction(stream_async)
    assert list(inspect.signature(answer).parameters) == ["query", "contexts"]


# --- regressions: defaults, record_contexts failures, streaming span scope ---------------------------


def test_parameter_defaults_are_recorded(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag(route_arg="route")
    def answer(query: str, contexts: tuple[str, ...] = ("default doc",), route: str = "/default") -> str:
        return "a"

    answer("q")
    span = only_span(exporter)
    assert contexts_of(span) == ["default doc"]
    assert span.attributes[semconv.TRACESCORE_ROUTE] == "/default"


def test_record_contexts_failure_does_not_break_the_call(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def answer(query: str) -> str:
        tracescore.record_contexts([_Unprintable(), "Paris is the capital."])
        return "a"

    assert answer("q") == "a"
    # The span is still complete: the bad context named, the good one and the answer recorded, no error.
    span = only_span(exporter)
    assert contexts_of(span) == ["<unprintable _Unprintable>", "Paris is the capital."]
    assert span.attributes[semconv.OUTPUT_VALUE] == "a"
    assert span.status.status_code is not StatusCode.ERROR


def test_generator_does_not_leak_its_span_into_the_caller(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def stream(query: str, contexts: list[str]) -> Iterator[str]:
        yield "a"
        yield "b"

    chunks = stream("q", CONTEXTS)
    next(chunks)
    leaked = trace.get_current_span()
    list(chunks)
    assert not leaked.get_span_context().is_valid
