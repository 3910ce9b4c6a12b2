"""Text analysis for the offline judge: tokens, an index of context sentences, and the shape of a question.

Everything here is a pure function of its input strings. Text is only tokenised and compared, never
interpreted, so instructions embedded in a question, answer or context have no effect beyond their words.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from tracescore.score._segment import split_context_sentences
from tracescore.score.judges._offline_forms import common_forms
from tracescore.score.judges._offline_words import (
    AUXILIARIES,
    CJK_STOPWORDS,
    CONNECTORS,
    HIGH_WORDS,
    IRREGULAR_VERBS,
    LOW_WORDS,
    NEGATIONS,
    NUMBER_WORDS,
    PRONOUNS,
    STOPWORDS,
    TIME_WORDS,
    WH_WORDS,
    YES_NO,
    YES_NO_OPENER,
)

__all__ = [
    "Question",
    "Sentence",
    "Tok",
    "analyse_question",
    "index_context",
    "keys",
    "name_groups",
    "negated_keys",
    "tokens",
    "words",
]

# Words: numbers, then one token per CJK ideograph, runs of katakana / hiragana / hangul, then other letters.
_IDEOGRAPH = "\u3400-\u9fff\uf900-\ufaff"
_HIRAGANA, _KATAKANA, _HANGUL = "\u3040-\u309f", "\u30a0-\u30ff", "\uac00-\ud7af"
_WORD = re.compile(
    rf"\d+(?:[.,]\d+)*|[{_IDEOGRAPH}]|[{_KATAKANA}]+|[{_HIRAGANA}]+|[{_HANGUL}]+"
    rf"|[^\W\d_{_IDEOGRAPH}{_HIRAGANA}{_KATAKANA}{_HANGUL}]+"
)
_NOT = re.compile(r"n['’]t\b", re.IGNORECASE)
# "not-for-profit", "non-stop": a hyphenated compound is a word of its own, not a negation.
_NOT_COMPOUND = re.compile(r"\b(not|non|no)-(?=\w)", re.IGNORECASE)
_SCOPE_BREAK = re.compile(r"[,;:()]")
# Scraped passages often glue sentences ("...century.First for Women is..."); pysbd keeps those as one
# sentence, so a space is inserted at such a boundary before splitting.
_GLUED = re.compile(r"(?<=[^\s.][a-z0-9)\"”’][.!?])(?=[A-Z][a-z]|[A-Z]\.\s)")
_SPACES = re.compile(r"\s*")  # \s is what str.isspace() calls whitespace
_CHUNK = 2000  # blocks of this size keep the per-block cache useful and the splitting linear
_NEGATION_SCOPE = 2  # content words after a negation that it applies to
_OPENERS = WH_WORDS | AUXILIARIES
# A capitalised adjective of nationality ("Kings of Leon [American] rock bands") is a property, not a name.
_DEMONYM = re.compile(r"^[A-Z][a-z]+(?:ian|ican|ean|ese|ish)$")
_PUNCTUATION = "\"“”'‘’()?,:;.!"
# Where a sentence's conjunct clauses meet: "..., and sells", "... but closed", "...; it".
# A determiner after "and" opens a noun phrase ("Me First and the Gimme Gimmes"), not a clause.
_CONJUNCT = re.compile(r",?\s+(?:and|but|while|whereas|yet)\s+(?!(?:the|a|an)\b)(?=[a-z])|\s*;\s+")
_MAX_SUBJECT = 6  # keys; more is a lead-in ("In the summer of 1999 the ..."), not a subject


@dataclass(frozen=True, slots=True)
class Tok:
    key: str  # comparison form: folded, lowercased, lightly stemmed; numbers canonicalised
    surface: str  # as written, for reasons
    cap: bool  # capitalised and not a sentence opener: a proper-noun cue
    num: bool


def _fold(text: str) -> str:
    """Accent-fold (Único == Unico), expand n't, drop citation markers and write numeric dates in words
    (_offline_forms); the text is otherwise unchanged."""
    text = common_forms(text)
    if not text.isascii():
        # Marks are dropped after Latin, Greek and Cyrillic letters only: a Japanese voicing mark or a
        # Devanagari vowel sign changes the word.
        kept: list[str] = []
        for char in unicodedata.normalize("NFKD", text):
            if not (kept and unicodedata.combining(char) and kept[-1] < "\u0530"):
                kept.append(char)
        text = unicodedata.normalize("NFC", "".join(kept))
    text = text.replace("can't", "can not").replace("won't", "will not").replace("’", "'")
    if "-" in text:
        text = _NOT_COMPOUND.sub(r"\1", text)
    return _NOT.sub(" not", text)


@lru_cache(maxsize=65536)  # a vocabulary-sized memo of a pure function: words repeat across texts
def _stem(word: str) -> str:
    """The word's key. A final "ll" is written "l" in every key, base forms' too: British spelling doubles
    an "l" before -ed / -ing where American does not ("cancelled", "canceled", "cancel": one key), and
    "kill" / "killed" still share one ("kil"), so no list of words that keep their "ll" is needed."""
    key = _strip(word)
    return key[:-1] if len(key) > 3 and key.endswith("ll") else key


def _strip(word: str) -> str:
    """A light suffix stripper; it only has to map the inflections of one word to one key. Irregular verb
    forms go to their base first ("sold", "sells" -> "sell"), and a consonant doubled before -ing/-ed is
    undoubled ("beginning", "begins" -> "begin")."""
    word = IRREGULAR_VERBS.get(word, word)
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("ing") and len(word) > 5:
        word = _undouble(word[:-3])
    elif word.endswith("ed") and len(word) > 4:
        word = _undouble(word[:-2])
    elif word.endswith(("ches", "shes", "sses", "xes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    elif word.endswith("ly") and len(word) > 5:
        word = word[:-2]
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def _undouble(stem: str) -> str:
    # Only consonants English doubles before a suffix; "added" and "passed" keep theirs (add, pass). A
    # doubled "l" is left to _stem, which writes every key's final "ll" as "l".
    if len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] in "bgmnprt":
        return stem[:-1]
    return stem


def _number(raw: str) -> str:
    try:
        value = float(raw.replace(",", ""))
    except ValueError:
        return raw
    return str(int(value)) if value.is_integer() else repr(value)


def _cjk(run: str) -> list[Tok]:
    """Unspaced scripts: an ideograph is a token (function characters dropped), hiragana is grammar and is
    dropped, katakana runs (loanwords, names) are whole tokens, and a hangul word is keyed by its first two
    syllables so that an attached particle or ending ("서울은", "서울입니다") does not hide the word."""
    first = run[0]
    if "\u3040" <= first <= "\u309f" or run in CJK_STOPWORDS:
        return []
    key = run[:2] if "\uac00" <= first <= "\ud7af" else run
    return [Tok(key, run, False, False)]


def tokens(text: str) -> list[Tok]:
    """Content tokens in order: stopwords dropped, numbers canonicalised, CJK handled by _cjk."""
    out: list[Tok] = []
    folded = _fold(text)
    previous_end = -1
    for match in _WORD.finditer(folded):
        raw = match.group()
        low = raw.casefold()
        opener = previous_end < 0 or folded[previous_end : match.start()].strip()[-1:] in {".", "!", "?", ":"}
        previous_end = match.end()
        if raw[0].isdigit():
            out.append(Tok(_number(raw), raw, False, True))
        elif low in NUMBER_WORDS:
            out.append(Tok(NUMBER_WORDS[low], raw, False, True))
        elif low in STOPWORDS or low in YES_NO or low in NEGATIONS:  # negation is checked on its own
            continue
        elif "\u3040" <= low[0] <= "\ud7af":
            out.extend(_cjk(low))
        else:
            out.append(Tok(_stem(low), raw, raw[0].isupper() and not opener, False))
    return out


def words(text: str) -> list[str]:
    """Every lowercased word, stopwords included (for negation, yes/no and comparison cues)."""
    return [m.group().casefold() for m in _WORD.finditer(_fold(text))]


def keys(text: str) -> frozenset[str]:
    return frozenset(t.key for t in tokens(text))


def negated_keys(all_words: list[str]) -> frozenset[str]:
    """Keys of the content words a negation applies to ("not [an American] [band]"), from words()."""
    scoped: set[str] = set()
    left = 0
    for word in all_words:
        if word in NEGATIONS:
            left = _NEGATION_SCOPE
        elif left and word not in STOPWORDS:
            scoped.add(_number(word) if word[0].isdigit() else NUMBER_WORDS.get(word, _stem(word)))
            left -= 1
    return frozenset(scoped)


# --- context --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sentence:
    text: str
    keys: frozenset[str]
    order: tuple[str, ...]
    negated: frozenset[str]  # keys under a negation
    has_negation: bool
    continues: bool  # opens with a pronoun ("He founded ..."), so it is about the previous sentence's subject
    # Key orders of its conjunct clauses, each with the subject they share: "Acme Corp was founded in 1999
    # and sells anvils" also states "Acme Corp sells anvils" as one phrase. Empty for a single clause.
    clauses: tuple[tuple[str, ...], ...] = ()
    # Every lowercased word, function words included: a claim sharing almost none of them is in another
    # language, and the judge says it cannot check it rather than calling it invented.
    vocabulary: frozenset[str] = frozenset()


@lru_cache(maxsize=4096)
def _index_block(block: str) -> tuple[Sentence, ...]:
    """The indexed sentences of one block. Cached because RAG systems retrieve the same passages again and
    again, and within one record the verdicts and the chunk ratings read the same passages; the function
    is pure, so the cache changes speed only."""
    return tuple(_sentence(text) for text in split_context_sentences(_GLUED.sub(" ", block)))


# The name benchmarks/consumer_throughput.py clears and warms (it predates the per-block index).
_split_block = _index_block


def _sentence(text: str) -> Sentence:
    # Tokenised clause by clause: the separators ("and", ";") are no tokens, so the sentence's order is
    # the clauses' orders joined, and each text is tokenised once.
    parts = _CONJUNCT.split(text)
    part_orders = [tuple(t.key for t in tokens(part)) for part in parts]
    order = tuple(key for part_order in part_orders for key in part_order)
    opener = text.split(None, 1)[0].strip("\"“'(").casefold() if text.split() else ""
    vocabulary = frozenset(words(text))
    has_negation = not NEGATIONS.isdisjoint(vocabulary)
    # A negation reaches no further than its clause: "(but this is not formalised) and for navigation".
    scopes = _SCOPE_BREAK.split(text) if has_negation else ()
    return Sentence(
        text=text,
        keys=frozenset(order),
        order=order,
        negated=frozenset().union(*(negated_keys(words(scope)) for scope in scopes)),
        has_negation=has_negation,
        continues=opener in PRONOUNS,
        clauses=_clauses(parts, part_orders),
        vocabulary=vocabulary,
    )


def _clauses(parts: list[str], orders: list[tuple[str, ...]]) -> tuple[tuple[str, ...], ...]:
    """Conjunct clauses of a sentence as key orders. A clause opening in lowercase after "and"/"but"/";"
    continues the first clause's subject (its words before the first auxiliary, else its leading name), so
    the subject is put in front; a capitalised one has its own subject."""
    if len(parts) < 2:
        return ()
    head = parts[0].split()
    aux = next((i for i, w in enumerate(head) if w.casefold() in AUXILIARIES), 0)
    subject_words = head[:aux] if aux else _capital_run(head)
    subject = tuple(t.key for t in tokens(" ".join(subject_words)))
    if len(subject) > _MAX_SUBJECT:  # a long lead-in is not a subject: no clause gets it
        subject = ()
    clauses = [orders[0]]
    for part, own in zip(parts[1:], orders[1:], strict=True):
        clauses.append(own if part[:1].isupper() else subject + own)
    return tuple(c for c in clauses if c)


def _blocks(context: str) -> Iterator[str]:
    """Lines of at most ~_CHUNK characters, long ones cut at a sentence-looking boundary. A long line is
    walked by offset: slicing off each block's rest would copy the line once per block (quadratic)."""
    for line in context.splitlines():
        rest = line.strip()
        start, end = 0, len(rest)
        while end - start > _CHUNK:
            dot = rest.rfind(". ", start, start + _CHUNK)
            space = rest.rfind(" ", start, start + _CHUNK) if dot < 0 else -1
            cut = dot + 1 - start if dot >= 0 else space - start if space >= 0 else -1
            cut = cut if cut > _CHUNK // 2 else _CHUNK
            yield rest[start : start + cut]
            start = _SPACES.match(rest, start + cut).end()  # the rest's lstrip(), without copying it
        if start < end:
            yield rest[start:]


def index_context(context: str) -> list[Sentence]:
    return [sentence for block in _blocks(context) for sentence in _index_block(block)]


# --- question -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    keys: frozenset[str]
    options: tuple[frozenset[str], ...]  # the two named choices of "A or B" questions, else ()
    direction: str | None  # "low"/"high": the option with the smaller/larger figure is the answer
    about_time: bool  # the figures to compare are years
    yes_no: bool
    entities: tuple[frozenset[str], ...]  # the named things a yes/no question asks about
    relational: bool  # "same"/"different"/"in common": two facts compared, beyond lexical checking
    names: frozenset[str]  # keys of every capitalised run (named entity) of the question


def _capital_run(seq: list[str], backwards: bool = False, start: int = 0) -> list[str]:
    """The run of capitalised words at seq[start] onwards (connectors such as 'of' allowed inside).

    Walking backwards, a word ending in ',' or ':' belongs to the previous clause and ends the run."""
    run: list[str] = []
    for i in range(start, len(seq)):
        word = seq[i]
        if backwards and i > start and word.endswith((",", ":", ";")):
            break
        bare = word.strip(_PUNCTUATION)
        following = seq[i + 1].strip(_PUNCTUATION) if i + 1 < len(seq) else ""
        named = bare[:1].isupper() or bare[:1].isdigit()
        if not (named or (bare.lower() in CONNECTORS and run and following[:1].isupper())):
            # Stopped by a lowercase word: a nationality just before it is an adjective ("American rock").
            while not backwards and run and _DEMONYM.match(run[-1]):
                run.pop()
            break
        run.append(word)
        if not backwards and word.endswith((",", "?", ":", ";")):
            break
    return run[::-1] if backwards else run


def _trim(run: list[str]) -> list[str]:
    """Drop question words ("Is", "Which") from the start of a name."""
    while run and run[0].lower().strip(",") in _OPENERS:
        run = run[1:]
    return run


def _options(question: str) -> tuple[str, str] | None:
    """The two named choices of "Which X, A or B?", "Is A or B the ...?", "between A and B ..."."""
    first = question.split()[0].lower() if question.split() else ""
    low = question.lower()
    if " or " in question and first in _OPENERS:
        conjunction = " or "
    elif re.search(r"\bbetween\b|\bwhich one\b|\bwhich of\b", low) and " and " in question:
        conjunction = " and "
    else:
        return None
    # The last " or " of a question, the first " and ": that is where two names meet in practice.
    at = question.rfind(conjunction) if conjunction == " or " else question.find(conjunction)
    left, right = question[:at], question[at + len(conjunction) :]
    left_run = _trim(_capital_run(left.split()[::-1], backwards=True))
    if not left_run:
        # "Which band was founded first, Hole, the band of ..., or The Wolfhounds?": first named clause.
        clauses = [c.strip() for c in left.split(",")[1:]]
        left_run = next((c.split() for c in clauses if c[:1].isupper()), [])
    right_run = _trim(_capital_run(right.split()))
    if not left_run or not right_run:
        return None
    return " ".join(left_run), " ".join(right_run)


def _names(seq: list[str]) -> Iterator[list[str]]:
    """Every capitalised run of a word sequence, in one pass."""
    i = 0
    while i < len(seq):
        run = _capital_run(seq, start=i)
        if run and _trim(run):
            yield _trim(run)
        i += max(1, len(run))


def name_groups(text: str) -> list[frozenset[str]]:
    """Key sets of the capitalised runs (names) in `text`, sentence openers included."""
    return [k for k in (keys(" ".join(run)) for run in _names(text.split())) if k]


def analyse_question(question: str) -> Question:
    word_list = words(question)
    word_set = set(word_list)
    parsed = _options(question)
    options = (keys(parsed[0]), keys(parsed[1])) if parsed else ()
    if options and (not options[0] or not options[1] or options[0] == options[1]):
        options = ()
    direction = "low" if word_set & LOW_WORDS else "high" if word_set & HIGH_WORDS else None
    if direction and word_set & {"rank", "ranking", "ranked"}:
        direction = "low" if direction == "high" else "high"  # rank 1 is the highest ranking
    names = frozenset().union(*(keys(" ".join(r)) for r in _names(question.split())))
    yes_no = not options and bool(YES_NO_OPENER.match(question))
    entities: tuple[frozenset[str], ...] = ()
    if yes_no:
        body = question.split(None, 1)[1] if len(question.split()) > 1 else ""
        parts = re.split(r",|\band\b|\bor\b|\bboth\b", body)
        runs = (_trim(_capital_run(p.split())) for p in parts)
        # "Are A and B both American?": the lone nationality is the property asked about, not an entity.
        named = (r for r in runs if r and not all(_DEMONYM.match(w.strip(_PUNCTUATION)) for w in r))
        entities = tuple(e for e in (keys(" ".join(r)) for r in named) if e)
    return Question(
        keys=keys(question),
        options=options,
        direction=direction if options else None,
        about_time=bool(word_set & TIME_WORDS),
        yes_no=yes_no,
        entities=entities,
        relational=bool(word_set & {"same", "different", "similar", "common"}),
        names=names,
    )
