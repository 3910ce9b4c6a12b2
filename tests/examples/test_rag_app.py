"""Pure-logic tests of the demo RAG app (examples/rag_app): no tracescore, no Kafka."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

# pysbd (a tracescore dependency) installs a top-level `examples` package that shadows the repo's
# namespace directory, so import the app by its own package name from the examples directory.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

from rag_app import (
    QUESTIONS,
    Retriever,
    alter,
    expectation_key,
    load_corpus,
    respond,
    run,
    schedule,
    split_sentences,
)

FAITHFUL = [q for q in QUESTIONS if q.alter is None]
ALTERED = [q for q in QUESTIONS if q.alter is not None]


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    return Retriever()


def test_corpus_has_a_dozen_short_documents() -> None:
    docs = load_corpus()
    assert len(docs) == 12
    for doc_id, raw in docs.items():
        body = raw.partition("\n")[2]
        assert 3 <= len(split_sentences(body)) <= 8, doc_id


@pytest.mark.parametrize("k", [2, 3])
def test_search_returns_k_passages(retriever: Retriever, k: int) -> None:
    contexts = retriever.search("What does the Team plan cost?", k)
    assert len(contexts) == k
    assert all(isinstance(c, str) and c for c in contexts)


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.text)
def test_retriever_ranks_the_source_document_first(retriever: Retriever, question) -> None:
    assert retriever.search_passages(question.text, 3)[0].doc_id == question.doc


@pytest.mark.parametrize("question", FAITHFUL, ids=lambda q: q.text)
def test_faithful_answer_is_a_context_sentence(retriever: Retriever, question) -> None:
    result = run(question, retriever)
    assert not result.altered and result.alteration is None
    assert result.answer in [s for c in result.contexts for s in split_sentences(c)]
    assert question.expect in result.answer


@pytest.mark.parametrize("question", ALTERED, ids=lambda q: q.text)
def test_altered_answer_is_not_supported_by_contexts(retriever: Retriever, question) -> None:
    result = run(question, retriever)
    faithful, _ = respond(question.text, result.contexts)
    assert result.altered and result.alteration == question.alter  # requested kind applied, no fallback
    assert result.answer != faithful
    assert result.answer not in " ".join(result.contexts)
    assert result.answer not in [s for c in result.contexts for s in split_sentences(c)]


CONTEXT = [
    "The Starter plan costs $19 per month. Starter customers pay by credit card, and Visa is accepted.",
    "Monthly subscriptions are not refunded. The Toronto region opened in 2023.",
]


def test_number_alteration_uses_a_number_absent_from_context() -> None:
    out, kind = alter("The Starter plan costs $19 per month.", CONTEXT, "number")
    assert (kind, out) == ("number", "The Starter plan costs $38 per month.")


def test_year_alteration_stays_plausible() -> None:
    out, _ = alter("The Toronto region opened in 2023.", CONTEXT, "number")
    assert out == "The Toronto region opened in 2025."


def test_entity_alteration_swaps_in_an_entity_absent_from_context() -> None:
    out, kind = alter("The Toronto region opened in 2023.", CONTEXT, "entity")
    assert kind == "entity"
    assert "Toronto" not in out and out.endswith("region opened in 2023.")
    assert out.split()[1] not in " ".join(CONTEXT)


def test_negation_alteration_flips_polarity_both_ways() -> None:
    assert alter("Monthly subscriptions are not refunded.", CONTEXT, "negation")[0] == (
        "Monthly subscriptions are refunded."
    )
    assert alter("Visa is accepted.", CONTEXT, "negation")[0] == "Visa is not accepted."


def test_addition_appends_an_invented_sentence() -> None:
    answer = "The Starter plan costs $19 per month."
    out, kind = alter(answer, CONTEXT, "addition")
    assert kind == "addition" and out.startswith(answer + " ")
    assert out[len(answer) + 1 :] not in " ".join(CONTEXT)


def test_inapplicable_alteration_falls_back_to_another_kind() -> None:
    out, kind = alter("Starter customers pay by credit card.", CONTEXT, "number")
    assert kind != "number" and out != "Starter customers pay by credit card."


def test_unknown_alteration_is_rejected() -> None:
    with pytest.raises(ValueError):
        alter("x.", CONTEXT, "typo")


def test_billing_route_is_mostly_altered_and_others_mostly_faithful() -> None:
    total = Counter(q.route for q in QUESTIONS)
    altered = Counter(q.route for q in ALTERED)
    assert set(total) == {"/billing", "/support", "/product"}
    assert altered["/billing"] > total["/billing"] / 2
    assert altered["/support"] <= total["/support"] / 4
    assert altered["/product"] <= total["/product"] / 4
    assert 0.2 <= len(ALTERED) / len(QUESTIONS) <= 0.3  # about one answer in four
    assert len(QUESTIONS) == 36 and len({q.text for q in QUESTIONS}) == 36


def test_schedule_cycles_and_interleaves_routes() -> None:
    plan = schedule(40)
    assert plan[:36] == list(QUESTIONS) and plan[36:] == list(QUESTIONS[:4])
    assert {q.route for q in plan[:3]} == {"/billing", "/support", "/product"}


def test_run_is_deterministic() -> None:
    first = [run(q, Retriever()) for q in QUESTIONS]
    second = [run(q, Retriever()) for q in QUESTIONS]
    assert first == second


def test_expectation_keys_are_unique_per_question(retriever: Retriever) -> None:
    keys = {expectation_key(r.query, r.answer) for r in (run(q, retriever) for q in QUESTIONS)}
    assert len(keys) == len(QUESTIONS)


def test_phases_drift_only_billing_and_healthy_alters_nothing(retriever: Retriever) -> None:
    from rag_app import PHASES

    assert PHASES == ("mixed", "healthy", "drift")
    drift = [run(q, retriever) for q in schedule(36, "drift")]
    assert all(r.altered == (r.route == "/billing") for r in drift)
    assert not any(run(q, retriever).altered for q in schedule(36, "healthy"))
    assert schedule(36, "mixed") == schedule(36)
    with pytest.raises(ValueError, match="unknown phase"):
        schedule(3, "sideways")
