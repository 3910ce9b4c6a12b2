"""Sentence segmentation shared by the metrics and the offline judge (pysbd, rule-based, no model)."""

from __future__ import annotations

from functools import lru_cache

import pysbd

__all__ = ["split_sentences"]


@lru_cache(maxsize=8)
def _segmenter(language: str) -> pysbd.Segmenter:
    return pysbd.Segmenter(language=language, clean=False)


def split_sentences(text: str, language: str = "en") -> list[str]:
    """Sentences of `text`, stripped, empty ones dropped. Falls back to English for unknown languages."""
    text = text.strip()
    if not text:
        return []
    try:
        segmenter = _segmenter(language)
    except ValueError:
        segmenter = _segmenter("en")
    return [s.strip() for s in segmenter.segment(text) if s.strip()]
