"""Offline answers to the relevance questions: lexical overlap with the question, plus the answer's form.

Deliberately simple and explainable: a judge without a language model cannot tell a relevant paraphrase
from an unrelated sentence reliably, so these ratings are coarse (and say so in their reasons).
"""

from __future__ import annotations

import re
from typing import Any

from tracescore.score.judges._offline_text import index_context, keys, tokens, words

__all__ = ["rate_answer", "rate_chunks"]

_FRAGMENT_WORDS = 6
_NUMBER_QUESTION = re.compile(
    r"^\s*(?:how (?:many|much|long|old|far|often)|in what year|what year|when)\b", re.I
)
_PERSON_QUESTION = re.compile(r"^\s*(?:who|whom|whose)\b", re.I)


def rate_answer(question: str, answer: str) -> tuple[int, str]:
    """A 1-5 relevance rating of a (non-refusal) answer, with the reason."""
    asked = keys(question)
    answer_tokens = tokens(answer)
    given = frozenset(t.key for t in answer_tokens)
    if not given:
        return 1, "The answer has no content words."
    expected_miss = _expected_type_missing(question, answer_tokens)
    if len(words(answer)) <= _FRAGMENT_WORDS:
        # A bare answer ("Delhi", "In 1844") is direct by its form; only its type can be checked.
        if expected_miss:
            return 3, f"A short answer, but {expected_miss}."
        return 5, "A short, direct answer to the question."
    coverage = len(asked & given) / len(asked) if asked else 1.0
    rating = 1 + min(4, round(coverage / 0.5 * 4))  # half the question's words or more: fully on topic
    if expected_miss:
        rating -= 1
    reason = f"Shares {len(asked & given)} of the question's {len(asked)} content words"
    return max(1, min(5, rating)), reason + (f"; {expected_miss}." if expected_miss else ".")


def _expected_type_missing(question: str, answer_tokens: list) -> str | None:
    if _NUMBER_QUESTION.match(question) and not any(t.num for t in answer_tokens):
        return "the question asks for a number or date and the answer gives none"
    if _PERSON_QUESTION.match(question) and not any(t.surface[:1].isupper() for t in answer_tokens):
        return "the question asks for a person and the answer names none"
    return None


def rate_chunks(data: Any) -> dict[str, Any]:
    """One 0-2 rating per chunk (`data.question`, `data.chunks`) by the share of question words it holds."""
    asked = keys(data.question)
    ratings = []
    for index, chunk in enumerate(data.chunks):
        # From the indexed passage, which the claim verdicts of the same record read too.
        shared = asked & frozenset().union(*(s.keys for s in index_context(chunk)))
        coverage = len(shared) / len(asked) if asked else 0.0
        rating = 2 if coverage >= 0.5 else 1 if coverage >= 0.2 else 0
        reason = f"Contains {len(shared)} of the question's {len(asked)} content words."
        ratings.append({"chunk_index": index, "rating": rating, "reason": reason})
    return {"ratings": ratings}
