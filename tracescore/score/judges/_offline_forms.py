"""Ways of writing the same thing that the offline judge's tokens should not tell apart: citation markers
("[1]", "[doc 2]", "【3†source】") and dates ("2025-03-14", "14/03/2025", "Mar 14, 2025", "March 14, 2025").

Applied to answer, question and context alike before tokenising, so a faithful answer that cites its
sources or writes a date its own way reads as the context does, and a different date still differs. In a
walk of a healthy chat app (notes: newuser24) every answer with a citation marker was flagged ("The context
does not contain '1'"), and every date written in words against an ISO date in the document.
"""

from __future__ import annotations

import re

__all__ = ["common_forms"]

# "[1]", "[1, 2]", "[1-3]", "[^1]", "[doc 1]", "[source 2]", and an OpenAI file-search marker "【3†source】".
_CITATION = re.compile(
    r"\[\^?(?:(?:doc(?:ument)?|source|ref(?:erence)?|passage|context|chunk)s?\s*#?\s*)?\d+"
    r"(?:\s*[,;–-]\s*\d+)*\]|【[^】]{0,40}】",
    re.IGNORECASE,
)
# What a removed marker leaves behind: "(source: )", "(see )", "()".
_EMPTY_PAREN = re.compile(
    r"\s*\(\s*(?:(?:sources?|see|refs?|references?|cf\.?)\s*:?)?[\s,;]*\)", re.IGNORECASE
)

_MONTHS = "January February March April May June July August September October November December".split()
_ABBREVIATED = {m[:3].casefold(): m for m in _MONTHS} | {"sept": "September"}
# A month abbreviation next to a day or a year ("Mar 14", "14 Mar. 2025"): the full name, so it keys alike.
_SHORT_MONTH = re.compile(
    r"\b(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\.?(?=\s+\d)|(?<=\d\s)(Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept?|Oct|Nov|Dec)\b\.?"
)
# Numeric dates: year first (ISO, "2025/03/14") or year last ("14/03/2025", "3/14/2025", "14.03.2025").
_YEAR_FIRST = re.compile(r"\b(\d{4})([-/.])(\d{1,2})\2(\d{1,2})\b")
_YEAR_LAST = re.compile(r"\b(\d{1,2})([/.])(\d{1,2})\2(\d{4})\b")
# Whether any of the three can match: most texts have none, and contexts are long (the judge's time).
_DATE_HINT = re.compile(r"\d[-/.]\d|\b(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b")


def common_forms(text: str) -> str:
    """`text` with citation markers removed and numeric dates written "14 March 2025" (a day-month order
    only the numbers decide: "04/05/2025" is left as written)."""
    if "[" in text or "【" in text:
        stripped = _CITATION.sub("", text)
        if stripped != text:
            text = _EMPTY_PAREN.sub("", stripped)
    if _DATE_HINT.search(text):
        text = _SHORT_MONTH.sub(_full_month, text)
        text = _YEAR_FIRST.sub(_year_first, text)
        text = _YEAR_LAST.sub(_year_last, text)
    return text


def _full_month(match: re.Match[str]) -> str:
    return _ABBREVIATED[(match.group(1) or match.group(2)).casefold()]


def _written(day: int, month: int, year: str, original: str) -> str:
    if 1 <= month <= 12 and 1 <= day <= 31:
        return f"{day} {_MONTHS[month - 1]} {year}"
    return original


def _year_first(match: re.Match[str]) -> str:
    year, _, month, day = match.groups()
    return _written(int(day), int(month), year, match.group())


def _year_last(match: re.Match[str]) -> str:
    first, _, second, year = match.groups()
    a, b = int(first), int(second)
    if a > 12 >= b:  # day first
        return _written(a, b, year, match.group())
    if b > 12 >= a:  # month first
        return _written(b, a, year, match.group())
    return match.group()  # ambiguous: both readings stay possible, as the bare numbers
