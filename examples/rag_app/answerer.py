"""Extractive answering, plus deterministic ways to make an answer unfaithful to its contexts.

The alterations imitate real RAG failures: a wrong number, an entity the context never mentions,
a flipped polarity, or a fluent extra sentence with invented facts.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from collections.abc import Callable, Sequence

from .retriever import split_sentences, tokenize

ALTERATIONS = ("number", "entity", "negation", "addition")

# Integers, thousands separators and decimals, but not clock times such as 08:00.
_NUMBER = re.compile(r"(?<![\w.,:])\d+(?:,\d{3})*(?:\.\d+)?(?![\d:])")
_AUX = re.compile(r"\b(is|are|was|were|can|will|does|do|has|have|must)\b(?! not)")

# Same-type substitutes; only one the contexts never mention is used, so the swap is unsupported.
_ENTITY_GROUPS: tuple[tuple[str, ...], ...] = (
    ("Stockholm", "Frankfurt", "Ohio", "Toronto", "Singapore", "Dublin", "Sydney", "Mumbai"),
    ("Visa", "Mastercard", "American Express", "PayPal"),
    ("USD", "EUR", "GBP", "CHF"),
    ("Tallinn", "Berlin", "Austin", "Helsinki", "Warsaw"),
    ("ISO 27001", "PCI DSS", "HIPAA"),
    ("AES-256", "AES-128", "ChaCha20"),
    ("Central European Time", "Pacific Time", "Coordinated Universal Time"),
    ("March", "June", "September", "November"),
    ("PDF", "CSV", "XML"),
    ("email", "phone", "chat", "video call"),
    ("weekdays", "weekends"),
    # Plan names last: they occur in many sentences, so swapping them is the least targeted change.
    ("Starter", "Team", "Enterprise", "Business", "Professional"),
)

# Plausible, fluent, and absent from the corpus: the kind of detail a model invents.
_INVENTED = (
    "Customers who prepay for two years receive an additional 30% loyalty discount.",
    "This policy has applied since 2017, when it was approved by the Northwind Cloud board.",
    "Customers in the Dublin region are exempt from this policy.",
    "A one-time onboarding fee of $250 applies to new Enterprise contracts.",
    "Registered nonprofit organizations receive these terms at half price.",
    "Exceptions can be requested by phone on Saturdays between 10:00 and 14:00.",
)


def _sentences(contexts: Sequence[str]) -> list[str]:
    return [s for c in contexts for s in split_sentences(c)]


def extract(query: str, contexts: Sequence[str]) -> str:
    """The context sentence sharing the most (IDF-weighted) terms with the query."""
    sents = _sentences(contexts)
    if not sents:
        return "I could not find this in the documentation."
    bags = [set(tokenize(s)) for s in sents]
    df = Counter(t for bag in bags for t in bag)
    q = set(tokenize(query))

    def weight(i: int) -> float:
        return sum(math.log(1 + len(bags) / df[t]) for t in q & bags[i])

    # Earlier sentences win ties: retrieval ranked their passage higher.
    return sents[max(range(len(sents)), key=lambda i: (weight(i), -i))]


def _change_number(text: str, context: str) -> str | None:
    m = _NUMBER.search(text)
    if not m:
        return None
    raw = m.group()
    value = raw.replace(",", "")
    if "." in value:
        # Bump the last digit: 99.95 -> 99.99, 0.042 -> 0.046; subtle, like a real misquote.
        candidates = [value[:-1] + str((int(value[-1]) + d) % 10) for d in (4, 3, 7)]
    else:
        n = int(value)
        candidates = [str(x) for x in ((n + 2, n - 3) if 1990 <= n <= 2030 else (n * 2, n * 3, n + 1))]
    known = set(_NUMBER.findall(context.replace(",", "")))
    for c in candidates:
        if c not in known and c != value:
            new = f"{int(c):,}" if "," in raw else c
            return text[: m.start()] + new + text[m.end() :]
    return None


def _swap_entity(text: str, context: str) -> str | None:
    for group in _ENTITY_GROUPS:
        present = [e for e in group if re.search(rf"\b{re.escape(e)}\b", text)]
        absent = [e for e in group if not re.search(rf"\b{re.escape(e)}\b", context)]
        if present and absent:
            return re.sub(rf"\b{re.escape(present[0])}\b", absent[0], text, count=1)
    return None


def _negate(text: str, context: str) -> str | None:
    if " not " in text:  # Already negative: dropping the negation flips it just as well.
        return text.replace(" not ", " ", 1)
    out, n = _AUX.subn(r"\1 not", text, count=1)
    return out if n else None


def _add_sentence(text: str, context: str) -> str | None:
    # Keyed on the answer text, so the same question always gets the same invention.
    start = zlib.crc32(text.encode())
    for i in range(len(_INVENTED)):
        extra = _INVENTED[(start + i) % len(_INVENTED)]
        if extra not in context:
            return f"{text} {extra}"
    return None


_ALTER: dict[str, Callable[[str, str], str | None]] = {
    "number": _change_number,
    "entity": _swap_entity,
    "negation": _negate,
    "addition": _add_sentence,
}


def alter(answer: str, contexts: Sequence[str], kind: str) -> tuple[str, str]:
    """Make `answer` unfaithful; returns (new answer, alteration actually applied).

    Falls back through the other kinds when `kind` does not apply to this sentence
    (e.g. no number to change); "addition" always applies.
    """
    if kind not in _ALTER:
        raise ValueError(f"unknown alteration {kind!r}; expected one of {ALTERATIONS}")
    context = " ".join(contexts)
    for k in (kind, *(a for a in ALTERATIONS if a != kind)):
        out = _ALTER[k](answer, context)
        if out and out != answer:
            return out, k
    raise AssertionError("unreachable: addition always applies")


def respond(query: str, contexts: Sequence[str], alteration: str | None = None) -> tuple[str, str | None]:
    """(answer, alteration applied or None). Faithful answers are verbatim context sentences."""
    answer = extract(query, contexts)
    return alter(answer, contexts, alteration) if alteration else (answer, None)
