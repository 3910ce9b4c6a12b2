"""A claim as the offline judge reads it, and the context sentences it is aligned with.

`read_claim` splits the claim's tokens by what the question already says (a claim is judged by what it adds
to the question) and by what the context lacks; `find_evidence` aligns it with the context sentences it
rests on (_offline_evidence.align: the best sentence and its neighbours, plus sentences it merges). The
checks of _offline_checks then read both. Everything here is a pure function of its inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from tracescore.score.judges._offline_evidence import Alignment, align, postings
from tracescore.score.judges._offline_text import (
    Question,
    Sentence,
    Tok,
    analyse_question,
    index_context,
    keys,
    name_groups,
    tokens,
    words,
)
from tracescore.score.judges._offline_words import (
    AUXILIARIES,
    FRAMING_WORDS,
    NEGATIONS,
    NUMBER_WORDS,
    PRONOUNS,
    SOURCE_WORDS,
    YES_NO,
    script,
)

__all__ = [
    "Case",
    "Claim",
    "Evidence",
    "IndexedContext",
    "Lexicon",
    "OfflineTuning",
    "is_about_source",
    "is_framing",
    "read_case",
]

# Words of the same meaning as a lowercase word (synonyms, derived forms), lowercase: a claim's word the
# context lacks is matched to one of them that the context states. None: no lexicon (the default).
Lexicon = Callable[[str], Iterable[str]]

_FRAMING = keys(" ".join(FRAMING_WORDS))
_SOURCE = keys(" ".join(SOURCE_WORDS))
# "1. Acme opened in 1999 ...", "- Acme sells anvils": list markers are layout, not figures.
_LIST_MARKER = ("-", "*", "•", "–")
# Counts an answer may form itself by counting what the context lists ("The article lists three causes").
_COUNT_WORDS = frozenset(v for w, v in NUMBER_WORDS.items() if int(v) <= 12)
# A capitalised word and a context name of this much common prefix are one name in two forms ("Canadian",
# "Canada"; "Italian", "Italy"); "Johnson" and "Johnston" share less than 80% of the shorter.
_NAME_PREFIX_SHARE, _NAME_PREFIX_MIN = 0.8, 4
_SIBLING_PREFIX = 7  # derived forms of one long lowercase word ("eukaryotes", "eukaryotic")


@dataclass(frozen=True)
class OfflineTuning:
    """The offline judge's tuned thresholds, chosen on one half of the dev sets (by question, by passage)
    and measured on the other (benchmarks/halueval_accuracy.py --halves)."""

    # A claim whose new words are missing from the context at this share or more is NO_EVIDENCE.
    missing_share: float = 0.25
    # An answer of at most this many words is a bare answer ("Golf Magazine"), not a statement.
    fragment_words: int = 6
    # A claim whose weighted words are stated in its aligned sentences at less than this share is not
    # aligned: the judge cannot check it (a paraphrase or an addition: it cannot tell which).
    align_share: float = 0.34


@dataclass(frozen=True, slots=True)
class IndexedContext:
    """The indexed context of one record and its question, shared by all the record's claims."""

    sentences: list[Sentence]
    keys: frozenset[str]
    vocabulary: frozenset[str]  # every lowercased word, function words included
    scripts: frozenset[str]  # the writing systems of its words
    index: dict[str, tuple[int, ...]]  # key -> the sentences stating it
    question: Question
    # The question's words the context states, framing words left out ("Summarize the following
    # passage."): what anchors an answer in the context. Empty for a summary's instruction.
    anchor: frozenset[str]
    siblings: dict[str, str]  # 7-letter prefix -> the long context word it starts
    stems: dict[str, tuple[str, ...]]  # 4-letter prefix -> the context words it starts, for name forms
    lexicon: Lexicon | None = None

    @classmethod
    def of(cls, context: str, question: str, lexicon: Lexicon | None = None) -> IndexedContext:
        sentences = index_context(context)
        all_keys = frozenset().union(*(s.keys for s in sentences))
        vocabulary = frozenset().union(*(s.vocabulary for s in sentences))
        asked = analyse_question(question)
        stems: dict[str, list[str]] = {}
        for key in sorted(all_keys):
            if len(key) > _NAME_PREFIX_MIN and key.isalpha():
                stems.setdefault(key[:_NAME_PREFIX_MIN], []).append(key)
        return cls(
            sentences=sentences,
            keys=all_keys,
            vocabulary=vocabulary,
            scripts=frozenset(script(c) for c in {w[0] for w in vocabulary} if c.isalpha()),
            index=postings(sentences),
            question=asked,
            anchor=(asked.keys - _FRAMING) & all_keys,
            siblings={
                k[:_SIBLING_PREFIX]: k for k in sorted(all_keys, reverse=True) if len(k) >= 8 and k.isalpha()
            },
            stems={prefix: tuple(found) for prefix, found in stems.items()},
            lexicon=lexicon,
        )

    def spelling(self, tok: Tok) -> Tok:
        """The token as the context spells it: a lowercase word missing from the context is matched to a
        long context word of the same 7-letter prefix, a capitalised one to a context word of which it is a
        derived form ("Canadian", "canada": scraped contexts are often lowercased). Numbers must match
        exactly."""
        if tok.key in self.keys or tok.num:
            return tok
        if tok.surface[:1].isupper():
            candidates = self.stems.get(tok.key[:_NAME_PREFIX_MIN], ())
            found = next((n for n in candidates if _same_name(tok.key, n)), None)
        elif len(tok.key) >= 8:
            found = self.siblings.get(tok.key[:_SIBLING_PREFIX])
        else:
            found = None
        if found is None and self.lexicon is not None and not tok.cap:  # names have no synonyms
            found = self._related(tok.surface.casefold())
        return tok if found is None else Tok(found, tok.surface, tok.cap, tok.num)

    def _related(self, word: str) -> str | None:
        """The first context key among the lexicon's words of the same meaning (in its order)."""
        assert self.lexicon is not None
        return next((k for w in self.lexicon(word) for k in keys(w) if k in self.keys), None)


def _same_name(a: str, b: str) -> bool:
    shorter = min(len(a), len(b))
    if shorter < _NAME_PREFIX_MIN + 1 or a[:_NAME_PREFIX_MIN] != b[:_NAME_PREFIX_MIN]:
        return False
    common = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), shorter)
    return common >= _NAME_PREFIX_SHARE * shorter


@dataclass(frozen=True)  # no slots: `names` is computed once, when a check needs it
class Claim:
    """A claim as the checks read it: its tokens split by what the question already says."""

    text: str
    words: list[str]
    body: str  # without a leading yes/no (judged on its own against the question) or list marker
    polarity: bool | None  # the leading yes (True) / no (False) of an answer to a yes/no question
    toks: list[Tok]
    keys: frozenset[str]
    new: list[Tok]  # tokens the question does not contain: what the claim adds
    missing: list[Tok]  # new tokens the context lacks
    negated: bool
    fragment: bool  # a bare answer ("Lake Erie State Park"), not a statement
    picked: list[frozenset[str]]  # the question's named options the claim names
    about_source: bool  # "The passage describes ...": it characterises the text, in words of its own

    @cached_property
    def names(self) -> list[frozenset[str]]:
        """Key sets of its names (capitalised runs): a name of several words is one part of the claim."""
        return name_groups(self.body)

    @property
    def invented(self) -> list[Tok]:
        """Names and figures the context lacks; a small count spelled out ("three causes") is left out: the
        answer may have counted what the context lists."""
        return [t for t in self.missing if (t.num or t.cap) and not _spelled_count(t)]


def _spelled_count(tok: Tok) -> bool:
    return tok.num and NUMBER_WORDS.get(tok.surface.casefold()) in _COUNT_WORDS


def is_about_source(sentence: str, previous: str) -> bool:
    """The sentence talks about the documents: it names them ("The documents only cover ..."), or opens
    with a pronoun right after a sentence that does ("... based on the documents. They only describe ...")."""
    if keys(sentence) & _SOURCE:
        return True
    first = words(sentence)[:1]
    return bool(first) and first[0] in PRONOUNS and bool(keys(previous) & _SOURCE)


def is_framing(sentence: str) -> bool:
    """A sentence that only introduces the answer or names its source ("Here is a brief overview of the
    article:"): it makes no claim about the world."""
    found = keys(sentence)
    return bool(found & _SOURCE) and found <= _FRAMING


def read_claim(text: str, context: IndexedContext, tuning: OfflineTuning) -> Claim:
    question = context.question
    claim_words = words(text)
    polarity = YES_NO.get(claim_words[0]) if claim_words and question.yes_no else None
    body = text if polarity is None else (text.split(None, 1)[1:] or [""])[0]
    body = _without_list_marker(body)
    toks = list({t.key: t for t in map(context.spelling, tokens(body))}.values())
    claim_keys = frozenset(t.key for t in toks)
    # A sentence about the source ("The passage describes ...") frames its facts: the framing words are
    # no part of what it claims.
    about_source = bool(claim_keys & _SOURCE)
    framing = _FRAMING if about_source else frozenset()
    new = [t for t in toks if t.key not in question.keys and t.key not in framing]
    # A bare answer rather than a statement: short, no auxiliary, pronoun or verb. English cues, so only
    # Latin-script claims qualify (a Russian statement needs no verb).
    fragment = (
        len(claim_words) <= tuning.fragment_words
        and all(c < "\u0250" for c in body if c.isalpha())
        and not any(w in AUXILIARIES or w in PRONOUNS for w in claim_words)
        and not any(w.islower() and w.rstrip(".,;!?").endswith("ed") for w in body.split())
        and not _present_verb(body.split())
    )
    return Claim(
        text=text,
        words=claim_words,
        body=body,
        polarity=polarity,
        toks=toks,
        keys=claim_keys,
        new=new,
        missing=[t for t in new if t.key not in context.keys],
        negated=bool(NEGATIONS.intersection(words(body))),
        fragment=fragment,
        picked=[o for o in question.options if len(o & claim_keys) * 2 >= len(o)],
        about_source=about_source,
    )


# What follows a present-tense verb ("includes 10 seats", "covers the weekend") and seldom a plural noun.
_OBJECT_OPENERS = frozenset("the a an its their his her this these every each".split())


def _present_verb(body: list[str]) -> bool:
    """A statement's verb in the third person ("The Pro plan includes 10 seats."): a lowercase word in -s
    followed by a figure or a determiner. Without it such a short statement read as a bare answer, which
    must be one phrase of the context, and was flagged though the context states it."""
    for word, following in pairwise(body):
        if not (word.islower() and word.endswith("s") and not word.endswith(("ss", "us", "is"))):
            continue
        if following[:1].isdigit() or following[:1] in "$€£" or following.casefold() in _OBJECT_OPENERS:
            return True
    return False


def _without_list_marker(text: str) -> str:
    head, _, rest = text.lstrip().partition(" ")
    numbered = head[:-1].isdigit() and head[-1:] in ".)" and len(head) <= 3
    return rest if rest and (numbered or head in _LIST_MARKER) else text


@dataclass(frozen=True, slots=True)
class Evidence:
    """The context sentences a claim is aligned with."""

    alignment: Alignment
    sentences: list[Sentence]  # the best-matching first, then its neighbours and the merged ones
    share: float  # weighted share of the claim's words stated in them (the question's words count)

    @property
    def best(self) -> Sentence | None:
        return self.sentences[0] if self.sentences else None

    @property
    def near(self) -> frozenset[str]:
        return self.alignment.covered


def find_evidence(claim: Claim, context: IndexedContext) -> Evidence:
    question = context.question
    asked = question.keys & context.keys
    repeat = [t for t in claim.toks if t.key in asked]
    # A bare yes/no has no words of its own: the evidence is then what the context says on the question.
    weights = {t.key: 1 for t in repeat} | {t.key: 2 for t in claim.new} or dict.fromkeys(asked, 1)

    def parts() -> list[frozenset[str]]:
        groups = claim.names
        loose = [frozenset({k}) for k in weights if not any(k in g for g in groups)]
        return [p for p in (*(g & weights.keys() for g in groups), *loose) if p]

    alignment = align(context.sentences, context.index, weights, parts)
    # The question anchors an answer to it: its words the context states count as aligned, so "Delhi"
    # answering "Where is the head office?" is aligned wherever Delhi is. A summary's question ("Summarize
    # the passage") anchors nothing: its claims align by their own words.
    anchored = {**dict.fromkeys(asked, 1), **weights}
    stated = alignment.covered | asked
    total = sum(anchored.values())
    share = sum(w for k, w in anchored.items() if k in stated) / total if total else 0.0
    return Evidence(alignment, alignment.sentences(context.sentences), share)


@dataclass(frozen=True, slots=True)
class Case:
    """Everything a check reads: the claim, its evidence, the record's context and the tuning."""

    claim: Claim
    evidence: Evidence
    context: IndexedContext
    tuning: OfflineTuning


def read_case(text: str, context: IndexedContext, tuning: OfflineTuning) -> Case:
    claim = read_claim(text, context, tuning)
    return Case(claim, find_evidence(claim, context), context, tuning)
