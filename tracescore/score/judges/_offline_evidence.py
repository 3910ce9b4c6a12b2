"""Where the offline judge looks for evidence: the context sentences that mention a name, state a phrase,
give a figure, or best match a claim. Pure functions of the indexed context (see _offline_text)."""

from __future__ import annotations

from tracescore.score.judges._offline_text import Question, Sentence

__all__ = ["about", "coverage", "mentions", "phrase", "value", "window"]


def mentions(sentence: Sentence, entity: frozenset[str]) -> bool:
    return len(entity & sentence.keys) * 2 >= len(entity)


def window(sentences: list[Sentence], weights: dict[str, int]) -> tuple[int, set[str]]:
    """The sentence that best matches the claim, and the keys of it plus its neighbours: facts stated
    across two adjacent sentences ("X was born in 1950. He founded Y.") still count as stated together."""
    own = [sum(w for k, w in weights.items() if k in s.keys) for s in sentences]
    best, best_score = -1, (0, 0)
    for i in range(len(sentences)):
        near = sentences[max(0, i - 1) : i + 2]
        score = (sum(w for k, w in weights.items() if any(k in s.keys for s in near)), own[i])
        if score > best_score:
            best, best_score = i, score
    if best < 0:
        return -1, set()
    return best, {k for s in sentences[max(0, best - 1) : best + 2] for k in s.keys if k in weights}


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
