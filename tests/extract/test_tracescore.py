"""tracescore's own spans (`@tracescore.rag`): question, documents and answer named on one span."""

from __future__ import annotations

from typing import Any

import pytest
from trace_builder import span, trace

from tracescore import semconv
from tracescore.extract import Skip, extract
from tracescore.model import DecodedSpan, ExtractSkip, Interaction

RAG_ATTRS = {
    semconv.INPUT_VALUE: "Capital of France?",
    semconv.document_content_key(0): "Paris is the capital of France.",
    semconv.document_content_key(1): "France is in Europe.",
    semconv.OUTPUT_VALUE: "Paris.",
}


def decoded(attributes: dict[str, Any], name: str = "answer", scope: str = "tracescore") -> DecodedSpan:
    return span(name, attributes, scope=scope)


def read(one: DecodedSpan) -> Interaction | Skip:
    """The single outcome of a one-span trace."""
    found = extract(trace(one))
    outcomes = [*found.interactions, *found.skips]
    assert len(outcomes) == 1, outcomes
    return outcomes[0]


def test_a_full_tracescore_span_is_one_interaction() -> None:
    result = read(decoded({**RAG_ATTRS, semconv.TRACESCORE_ROUTE: "/billing"}))
    assert isinstance(result, Interaction)
    assert result.route == "/billing"
    assert result.record.query == "Capital of France?"
    assert result.record.contexts == ("Paris is the capital of France.", "France is in Europe.")
    assert result.record.answer == "Paris."


def test_route_falls_back_to_http_route_then_span_name() -> None:
    with_http = read(decoded({**RAG_ATTRS, semconv.HTTP_ROUTE: "/v1/ask"}))
    assert isinstance(with_http, Interaction)
    assert with_http.route == "/v1/ask"

    preferred = read(
        decoded({**RAG_ATTRS, semconv.HTTP_ROUTE: "/v1/ask", semconv.TRACESCORE_ROUTE: "/billing"})
    )
    assert isinstance(preferred, Interaction)
    assert preferred.route == "/billing"

    by_name = read(decoded(RAG_ATTRS, name="support-answer"))
    assert isinstance(by_name, Interaction)
    assert by_name.route == "support-answer"


@pytest.mark.parametrize("route", ["", 7])
def test_a_blank_or_non_text_tracescore_route_is_not_a_route(route: object) -> None:
    result = read(decoded({**RAG_ATTRS, semconv.TRACESCORE_ROUTE: route, semconv.HTTP_ROUTE: "/v1/ask"}))
    assert isinstance(result, Interaction)
    assert result.route == "/v1/ask"


@pytest.mark.parametrize("query", [None, "", "   "])
def test_without_a_question_the_answer_is_still_judged_against_its_documents(query: str | None) -> None:
    attrs = {k: v for k, v in RAG_ATTRS.items() if k != semconv.INPUT_VALUE}
    if query is not None:
        attrs[semconv.INPUT_VALUE] = query
    result = read(decoded(attrs))
    assert isinstance(result, Interaction)
    assert result.record.query is None and result.record.answer and result.record.contexts
    assert result.question_missing is not None and semconv.INPUT_VALUE in result.question_missing


def test_missing_answer_is_an_unexpected_skip() -> None:
    attrs = {k: v for k, v in RAG_ATTRS.items() if k != semconv.OUTPUT_VALUE}
    result = read(decoded(attrs))
    assert isinstance(result, Skip)
    assert result.reason == ExtractSkip.MISSING_ANSWER
    assert result.expected is False


@pytest.mark.parametrize(
    "contexts",
    [pytest.param([], id="no-documents"), pytest.param(["  ", "\n\t"], id="whitespace-only")],
)
def test_empty_context_is_an_unexpected_skip(contexts: list[str]) -> None:
    attrs = {semconv.INPUT_VALUE: "q", semconv.OUTPUT_VALUE: "a"}
    attrs.update({semconv.document_content_key(i): text for i, text in enumerate(contexts)})
    result = read(decoded(attrs))
    assert isinstance(result, Skip)
    assert result.reason == ExtractSkip.EMPTY_CONTEXT
    assert result.expected is False


def test_plain_non_rag_span_is_an_expected_skip() -> None:
    result = read(decoded({"http.method": "GET", semconv.HTTP_ROUTE: "/health"}, scope="app"))
    assert isinstance(result, Skip)
    assert result.reason == ExtractSkip.NOT_RAG
    assert result.expected is True


@pytest.mark.parametrize(
    ("attributes", "scope"),
    [
        pytest.param(RAG_ATTRS, semconv.EVALUATOR_SCOPE, id="evaluator-scope"),
        pytest.param(
            {**RAG_ATTRS, semconv.GEN_AI_EVALUATION_NAME: "faithfulness"}, "other-evaluator", id="attribute"
        ),
    ],
)
def test_evaluation_spans_are_never_read_as_answers(attributes: dict[str, Any], scope: str) -> None:
    result = read(decoded(attributes, scope=scope))
    assert isinstance(result, Skip)
    assert result.reason == ExtractSkip.NOT_RAG
