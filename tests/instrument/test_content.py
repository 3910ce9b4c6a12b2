"""Content controls applied before a span leaves the process (capture, limits, redaction), and bad input that
must never reach the application as an exception."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import tracescore
from tracescore import semconv
from tracescore.instrument import BUILTIN_REDACTORS, ContentSettings
from tracescore.instrument._content import ContentPolicy
from tracescore.instrument._recorders import policy, set_policy


@pytest.fixture
def use_policy() -> Iterator[Callable[..., None]]:
    """Install a content policy as `tracescore.init(settings=..., redact=...)` does; restore afterwards."""
    before = policy()

    def install(hook: Callable[[str], str] | None = None, **settings: Any) -> None:
        set_policy(ContentPolicy(ContentSettings(**settings), hook))

    yield install
    set_policy(before)


@tracescore.retriever
def search(query: str) -> list[Any]:
    return [
        {"content": f"doc {i} about {query}", "id": i, "metadata": {"owner": "ann@example.com"}}
        for i in range(5)
    ]


@tracescore.rag
def answer(query: str) -> str:
    search(query)
    return f"answer to {query}"


def span(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    [found] = [s for s in exporter.get_finished_spans() if s.name == name]
    return found


# --- capture, limits -------------------------------------------------------------------------------------


def test_capture_off_keeps_structure_and_drops_every_text(
    exporter: InMemorySpanExporter, use_policy: Callable[..., None]
) -> None:
    use_policy(capture=False)
    assert answer("secret question") == "answer to secret question"
    for name in ("answer", "search"):
        attrs = dict(span(exporter, name).attributes or {})
        assert attrs[semconv.TRACESCORE_CONTENT_CAPTURED] is False
        assert semconv.GEN_AI_OPERATION_NAME in attrs and semconv.OPENINFERENCE_SPAN_KIND in attrs
        assert not [v for v in attrs.values() if isinstance(v, str) and "secret" in v], attrs
    search_attrs = span(exporter, "search").attributes
    assert search_attrs[semconv.document_key(4, "id")] == "4"  # ids and scores are not content
    assert semconv.document_key(0, "content") not in search_attrs


def test_long_texts_are_cut_and_the_span_says_which(
    exporter: InMemorySpanExporter, use_policy: Callable[..., None]
) -> None:
    use_policy(max_attribute_chars=20)
    answer("q" * 100)
    attrs = span(exporter, "answer").attributes
    assert attrs[semconv.INPUT_VALUE] == "q" * 20
    assert json.loads(attrs[semconv.GEN_AI_INPUT_MESSAGES])[0]["parts"][0]["content"] == "q" * 20
    assert set(attrs[semconv.TRACESCORE_TRUNCATED]) >= {
        semconv.INPUT_VALUE,
        semconv.OUTPUT_VALUE,
        semconv.document_key(0, "content"),
    }


def test_documents_past_the_limit_are_counted_on_the_span(
    exporter: InMemorySpanExporter, use_policy: Callable[..., None]
) -> None:
    use_policy(max_documents=3)
    answer("q")
    for name in ("answer", "search"):
        attrs = span(exporter, name).attributes
        assert semconv.document_key(2, "content") in attrs
        assert semconv.document_key(3, "content") not in attrs
        assert attrs[semconv.TRACESCORE_DOCUMENTS_OMITTED] == 2
    assert len(json.loads(span(exporter, "search").attributes[semconv.GEN_AI_RETRIEVAL_DOCUMENTS])) == 3


def test_no_marks_when_nothing_was_changed(exporter: InMemorySpanExporter) -> None:
    answer("q")
    attrs = span(exporter, "answer").attributes
    assert semconv.TRACESCORE_TRUNCATED not in attrs and semconv.TRACESCORE_DOCUMENTS_OMITTED not in attrs


# --- redaction -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "redacted"),
    [
        ("email", "mail ann.lee+x@mail.example.co.uk now", "mail [REDACTED_EMAIL] now"),
        ("phone", "call +1 415-555-0199 or (020) 7946 0958", "call [REDACTED_PHONE] or [REDACTED_PHONE]"),
        ("card", "card 4111 1111 1111 1111 ok", "card [REDACTED_CARD] ok"),
        ("card", "order 1234 5678 9012 3456 stays", "order 1234 5678 9012 3456 stays"),  # fails Luhn
        ("api_key", "key sk-proj-abcdefghijklmnop1234 end", "key [REDACTED_KEY] end"),
        ("api_key", "aws AKIAIOSFODNN7EXAMPLE end", "aws [REDACTED_KEY] end"),
        ("api_key", "gh ghp_" + "a" * 36 + " end", "gh [REDACTED_KEY] end"),
        (
            "api_key",
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
            "Authorization: [REDACTED_KEY]",
        ),
    ],
)
def test_builtin_redactors(name: str, text: str, redacted: str) -> None:
    assert BUILTIN_REDACTORS[name](text) == redacted


def test_redaction_runs_on_every_text_before_the_span_has_it(
    exporter: InMemorySpanExporter, use_policy: Callable[..., None]
) -> None:
    use_policy(hook=lambda text: text.replace("Acme", "[CLIENT]"), redact="all")
    answer("Acme card 4111-1111-1111-1111, mail bob@acme.io")
    for name in ("answer", "search"):
        values = [v for v in (span(exporter, name).attributes or {}).values() if isinstance(v, str)]
        blob = json.dumps(values)
        assert "4111" not in blob and "bob@acme.io" not in blob and "ann@example.com" not in blob
        assert "Acme" not in blob and "[CLIENT]" in blob


def test_unknown_redactor_names_are_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown redactor"):
        ContentSettings(redact="email,ssn")


# --- bad input ---------------------------------------------------------------------------------------------


class Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str")


def test_bad_values_never_reach_the_application(exporter: InMemorySpanExporter) -> None:
    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = cyclic

    @tracescore.rag(answer=lambda result: result)
    def ask(query: Any, contexts: Any) -> Any:
        return Unprintable()

    weird_docs = [
        None,
        b"\xff\xfe bytes",
        Unprintable(),
        {"content": "c", "metadata": cyclic},
        "x" * 1_000_000,
    ]
    result = ask(b"\xc3\x28 invalid utf-8", weird_docs)
    assert isinstance(result, Unprintable)
    attrs = span(exporter, "ask").attributes
    assert attrs[semconv.INPUT_VALUE] == "\ufffd( invalid utf-8"
    contents = [attrs[semconv.document_key(i, "content")] for i in range(5)]
    assert contents[:3] == ["None", "\ufffd\ufffd bytes", "<unprintable Unprintable>"]
    assert len(contents[4]) == ContentSettings().max_attribute_chars
    assert attrs[semconv.OUTPUT_VALUE] == "<unprintable Unprintable>"
    assert span(exporter, "ask").status.status_code is not StatusCode.ERROR


def test_none_query_and_answer_leave_the_attributes_out(exporter: InMemorySpanExporter) -> None:
    @tracescore.rag
    def ask(query: Any = None) -> None:
        return None

    ask()
    attrs = span(exporter, "ask").attributes
    assert semconv.INPUT_VALUE not in attrs and semconv.OUTPUT_VALUE not in attrs


def test_the_original_exception_is_reraised_unchanged_and_recorded(exporter: InMemorySpanExporter) -> None:
    error = ValueError("model unavailable")

    @tracescore.generation
    def generate(prompt: str) -> str:
        raise error

    @tracescore.rag
    def ask(query: str) -> str:
        return generate(query)

    with pytest.raises(ValueError) as raised:
        ask("q")
    assert raised.value is error
    for name in ("ask", "generate"):
        recorded = span(exporter, name)
        assert recorded.status.status_code is StatusCode.ERROR
        assert recorded.attributes[semconv.ERROR_TYPE] == "ValueError"
        assert recorded.events[0].attributes["exception.message"] == "model unavailable"
    assert trace.get_current_span() is trace.INVALID_SPAN  # no context leaked


def test_an_abandoned_generator_ends_its_span_without_an_error_and_leaks_no_context(
    exporter: InMemorySpanExporter,
) -> None:
    @tracescore.rag
    def stream(query: str) -> Iterator[str]:
        yield from ("a", "b", "c")

    chunks = stream("q")
    assert next(chunks) == "a"
    assert trace.get_current_span() is trace.INVALID_SPAN  # the caller never runs inside the span
    del chunks
    gc.collect()
    recorded = span(exporter, "stream")
    assert recorded.end_time is not None
    assert recorded.status.status_code is not StatusCode.ERROR
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_metadata_from_the_context_is_redacted_too(
    exporter: InMemorySpanExporter, use_policy: Callable[..., None]
) -> None:
    use_policy(redact="email")
    with tracescore.attributes(metadata={"contact": "ann@example.com"}):
        answer("q")
    metadata = json.loads(span(exporter, "answer").attributes[semconv.METADATA])
    assert metadata == {"contact": "[REDACTED_EMAIL]"}
