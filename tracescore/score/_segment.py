"""Sentence segmentation shared by the metrics and the offline judge.

Answers go through pysbd (rule-based, no model, careful with abbreviations and lists), because each claim
stays tied to the answer sentence a user sees. Retrieved contexts are much longer and only need sentence
windows for evidence, so they use a small regular-expression splitter that is ~20x faster (pysbd was
40-75% of the offline judge's time); benchmarks/offline_throughput.py measures both, and the accuracy
benchmark checks that the verdicts do not suffer.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pysbd

__all__ = ["split_context_sentences", "split_sentences"]

# Words a period follows without ending the sentence (lowercase, without the period).
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft no nos vol vols fig figs ed eds rev gen col lt sgt capt cmdr adm "
    "gov sen rep pres inc ltd co corp bros dept univ assn est approx ca cf vs etc al jan feb mar apr jun "
    "jul aug sep sept oct nov dec e.g i.e u.s u.k u.n a.m p.m".split()
)
# A sentence end: terminal punctuation, closing quotes or brackets, then whitespace; or a CJK full stop.
_END = re.compile(r"[.!?][\"”’')\]]*\s+|[。！？]")
_INITIALS = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]?\.?")


@lru_cache(maxsize=8)
def _segmenter(language: str) -> pysbd.Segmenter:
    return pysbd.Segmenter(language=language, clean=False)


def split_sentences(text: str, language: str = "en") -> list[str]:
    """Sentences of `text`, stripped, empty ones dropped. Falls back to English for unknown languages."""
    text = text.strip()
    if not text:
        return []
    if not _END.search(text) and "\n" not in text:
        return [text]  # one sentence: nothing for pysbd to split
    try:
        segmenter = _segmenter(language)
    except ValueError:
        segmenter = _segmenter("en")
    return [s.strip() for s in segmenter.segment(text) if s.strip()]


def split_context_sentences(text: str) -> list[str]:
    """Sentences of a retrieved passage: cut after . ! ? (and closing quotes) before whitespace, unless the
    period ends an abbreviation or an initial, or the next word starts in lowercase."""
    sentences, start = [], 0
    for match in _END.finditer(text):
        end = match.end()
        if end < len(text) and text[match.start()] == "." and not _ends_sentence(text, match.start(), end):
            continue
        piece = text[start:end].strip()
        if piece:
            sentences.append(piece)
        start = end
    rest = text[start:].strip()
    if rest:
        sentences.append(rest)
    return sentences


def _ends_sentence(text: str, period: int, after: int) -> bool:
    following = text[after]
    if following.islower() or following in ",;:":
        return False
    word = text[text.rfind(" ", 0, period) + 1 : period + 1]
    bare = word.strip("\"“'(").casefold().rstrip(".")
    if bare in _ABBREVIATIONS:
        return False
    # "J." in "J. R. R. Tolkien", "U.S." before a name.
    return not (len(bare) == 1 and bare.isalpha()) and not (
        "." in bare and _INITIALS.fullmatch(word.strip("\"“'("))
    )
