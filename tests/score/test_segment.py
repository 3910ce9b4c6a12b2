"""Sentence splitting: pysbd for answers, the fast splitter for contexts; both keep abbreviations whole."""

from __future__ import annotations

import pytest

from tracescore.score._segment import split_context_sentences, split_sentences


@pytest.mark.parametrize("split", [split_sentences, split_context_sentences])
def test_sentences_survive_abbreviations_initials_and_decimals(split) -> None:  # type: ignore[no-untyped-def]
    text = (
        "J. R. R. Tolkien wrote it in 1937. Dr. Smith paid 3.5 million dollars! "
        'He said "Go home." Then he left? Yes.'
    )
    assert split(text) == [
        "J. R. R. Tolkien wrote it in 1937.",
        "Dr. Smith paid 3.5 million dollars!",
        'He said "Go home."',
        "Then he left?",
        "Yes.",
    ]


def test_context_splitter_cuts_cjk_full_stops_and_keeps_lowercase_continuations() -> None:
    assert split_context_sentences("東京です。大阪です。") == ["東京です。", "大阪です。"]
    assert split_context_sentences("It costs approx. ten dollars, e.g. in Paris.") == [
        "It costs approx. ten dollars, e.g. in Paris."
    ]


def test_one_sentence_answers_skip_the_segmenter() -> None:
    assert split_sentences("  Lake Erie State Park  ") == ["Lake Erie State Park"]
    assert split_sentences("") == []
