"""Where the offline judge looks for evidence: the context sentences a claim is aligned with, and those that
mention a name, state a phrase or give a figure. Pure functions of the indexed context (see _offline_text)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracescore.score.judges._offline_text import Question, Sentence

__all__ = ["Alignment", "about", "align", "coverage", "mentions", "phrase", "postings", "value"]


def mentions(sentence: Sentence, entity: frozenset[str]) -> bool:
    return len(entity & sentence.keys) * 2 >= len(entity)


@dataclass(frozen=True, slots=True)
class Alignment:
    """The context sentences a claim rests on: the best-matching window (a sentence and its neighbours)
    plus up to `_MERGED - 1` other sentences that each state at least two more of the claim's parts (a
    claim that merges passage sentences), and the claim keys they state between them."""

    # Indices of the window's sentences that state a claim word, the one stating most first, then the
    # merged sentences in the order they were added; empty when no sentence shares a word with the claim.
    stated: tuple[int, ...]
    covered: frozenset[str]  # claim keys stated in them

    def sentences(self, sentences: list[Sentence]) -> list[Sentence]:
        return [sentences[i] for i in self.stated]


_MERGED = 3  # sentences a claim may rest on besides the anchor's neighbours (its anchor included)
_MERGE_MIN_PARTS = 2  # a lone name or number found elsewhere does not make a sentence part of the evidence


def postings(sentences: list[Sentence]) -> dict[str, tuple[int, ...]]:
    """key -> indices of the sentences stating it: claims look up only the sentences sharing their words."""
    found: dict[str, list[int]] = {}
    for i, sentence in enumerate(sentences):
        for key in sentence.keys:
            found.setdefault(key, []).append(i)
    return {key: tuple(at) for key, at in found.items()}


def align(
    sentences: list[Sentence],
    index: dict[str, tuple[int, ...]],
    weights: dict[str, int],
    parts: Callable[[], list[frozenset[str]]],
) -> Alignment:
    """Where a claim is stated. The anchor maximises the weight of the claim keys stated in it and its
    neighbours (facts stated across two adjacent sentences, "X was born in 1950. He founded Y.", count as
    stated together), then its own weight. Then, greedily, sentences anywhere in the context that state at
    least two of the claim's `parts()` (a name of several words is one part) not stated yet; `parts` is
    called only when the window leaves some of the claim unstated."""
    own: dict[int, int] = {}
    windowed: dict[int, int] = {}  # the weight of the claim keys stated in a sentence or its neighbours
    for key, weight in weights.items():
        stated_in = index.get(key, ())
        for i in stated_in:
            own[i] = own.get(i, 0) + weight
        for i in {j for at in stated_in for j in (at - 1, at, at + 1) if 0 <= j < len(sentences)}:
            windowed[i] = windowed.get(i, 0) + weight
    if not own:
        return Alignment((), frozenset())
    best = max(sorted(windowed), key=lambda i: (windowed[i], own.get(i, 0)))  # the first on a tie
    covered = {k for s in sentences[max(0, best - 1) : best + 2] for k in s.keys if k in weights}
    merged: list[int] = []
    taken = set(range(best - 1, best + 2))
    claim_parts = parts() if covered < weights.keys() else []
    while claim_parts and len(merged) < _MERGED - 1:
        open_parts = [p for p in claim_parts if not p <= covered]
        gains = {
            i: sum(1 for p in open_parts if p <= sentences[i].keys) for i in sorted(own) if i not in taken
        }
        pick = max(gains, key=lambda i: (gains[i], -abs(i - best)), default=None)
        if pick is None or gains[pick] < _MERGE_MIN_PARTS:
            break
        merged.append(pick)
        taken.add(pick)
        covered |= sentences[pick].keys & weights.keys()
    # The window's sentences that state something of the claim, the one stating most first (the middle one
    # on a tie); a neighbour stating nothing of it is no evidence.
    window = [i for i in (best, best - 1, best + 1) if 0 <= i < len(sentences) and own.get(i, 0)]
    window.sort(key=lambda i: -own[i])
    return Alignment((*window, *merged), frozenset(covered))


def value(sentences: list[Sentence], option: frozenset[str], question: Question) -> float | None:
    """The figure the context gives for `option`: the first year after its name for time comparisons,
    else the first number followed closely by a question word ("won 6 [Grand Slam] [titles]")."""
    for sentence in sentences:
        if not mentions(sentence, option):
            continue
        order = sentence.order
        start = max(i for i, k in enumerate(order) if k in option)
        for i in range(start, len(order)):
            key = order[i]
            if not key[:1].isdigit():
                continue
            is_year = len(key) == 4 and key.isdigit() and 1000 <= int(key) <= 2100
            if question.about_time and is_year:
                return float(key)
            if not question.about_time and not is_year and question.keys.intersection(order[i + 1 : i + 4]):
                return float(key)
    return None


def about(sentences: list[Sentence], group: frozenset[str]) -> set[str]:
    """Keys stated about a name: sentences naming it plus the pronoun sentences that follow them."""
    stated: set[str] = set()
    following = False
    for sentence in sentences:
        following = mentions(sentence, group) or (following and sentence.continues)
        if following:
            stated |= sentence.keys
    return stated


def phrase(sentences: list[Sentence], seq: list[str]) -> bool:
    """Does some sentence, or one of its conjunct clauses with the subject it shares ("Acme Corp was founded
    in 1999 and [Acme Corp] sells anvils"), state `seq` as one phrase: its keys in order, at most one other
    word between?"""
    if len(seq) < 2:
        return True
    wanted = set(seq)
    return any(
        _in_order(order, seq)
        for sentence in sentences
        if wanted <= sentence.keys
        for order in (sentence.order, *sentence.clauses)
    )


def _in_order(order: tuple[str, ...], seq: list[str]) -> bool:
    for start in (i for i, k in enumerate(order) if k == seq[0]):
        at, ok = start, True
        for key in seq[1:]:
            nxt = next((j for j in range(at + 1, min(at + 3, len(order))) if order[j] == key), None)
            if nxt is None:
                ok = False
                break
            at = nxt
        if ok:
            return True
    return False


def coverage(sentences: list[Sentence], entity: frozenset[str], predicate: frozenset[str]) -> float:
    """The largest share of `predicate` stated in one sentence that names `entity`."""
    if not predicate:
        return 0.0
    return max(
        (len(predicate & s.keys) / len(predicate) for s in sentences if mentions(s, entity)), default=0.0
    )
