"""One claim judged against the context: the claim is read once (`read_claim`), its evidence found once, then
a fixed sequence of named checks runs and the first that decides gives the verdict (`judge_claim`).

A claim is judged by what it adds to the question, because a hallucinated answer usually reuses the
question's words and invents or misplaces only the answer part: its *new* words, numbers and names must be
in the context; a new name or number must be stated about the question's names it is attached to; a bare
answer ("Lake Erie State Park") must occur as one phrase; a claim that only restates the question supports
nothing. On top of that: a negation mismatch with the context is CONTRADICTORY, a pick between the named
options of a "which ..., A or B?" question must agree with the figures or statements the context gives for
A and B, and a bare yes/no is checked against what the context states about every entity the question
names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracescore.score.judges._offline_evidence import about, coverage, phrase, value, window
from tracescore.score.judges._offline_text import Question, Sentence, Tok, name_groups, tokens, words
from tracescore.score.judges._offline_words import AUXILIARIES, NEGATIONS, PRONOUNS, YES_NO

__all__ = [
    "CONTRADICTORY",
    "FULLY",
    "NO_EVIDENCE",
    "PARTIAL",
    "Context",
    "OfflineTuning",
    "Outcome",
    "judge_claim",
]

# The verdict vocabulary of the claim-verdicts task (plain strings: the judge answers the task's output
# model by validation and needs no metric module).
FULLY, PARTIAL, NO_EVIDENCE, CONTRADICTORY = (
    "FULLY_SUPPORTED",
    "PARTIALLY_SUPPORTED",
    "NO_EVIDENCE",
    "CONTRADICTORY",
)
_RANK = {FULLY: 3, PARTIAL: 2, NO_EVIDENCE: 1, CONTRADICTORY: 0}
# How sure a lexical verdict is (ClaimVerdict.confidence), by the evidence it rests on: a name or number the
# context lacks is near certain; a negation mismatch or a name tied to another subject likely; a claim that
# adds nothing checkable is weak evidence of invention. The label rule counts unsupported verdicts at >= 0.5.
_SURE, _LIKELY, _WEAK = 0.9, 0.7, 0.3
_CONFIDENCE = {FULLY: _LIKELY, PARTIAL: 0.5, NO_EVIDENCE: _LIKELY, CONTRADICTORY: _LIKELY}


@dataclass(frozen=True)
class OfflineTuning:
    """The offline judge's two tuned thresholds (benchmarks/halueval_accuracy.py chooses them by
    cross-validation over questions; these defaults are what it picks on the full dev set)."""

    # A claim whose new words are missing from the context at this share or more is NO_EVIDENCE.
    missing_share: float = 0.25
    # An answer of at most this many words is a bare answer ("Golf Magazine"), not a statement.
    fragment_words: int = 6


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: str
    reason: str
    confidence: float


def _outcome(verdict: str, reason: str, confidence: float | None = None) -> Outcome:
    return Outcome(verdict, reason, _CONFIDENCE[verdict] if confidence is None else confidence)


@dataclass(frozen=True, slots=True)
class Context:
    """The indexed context of one record, shared by all its claims."""

    sentences: list[Sentence]
    keys: frozenset[str]
    question: Question
    variants: Callable[[Tok], Tok]  # a claim token as the context spells it (derived forms of long words)


@dataclass(frozen=True, slots=True)
class _Claim:
    """A claim as the checks read it: its tokens split by what the question already says."""

    words: list[str]
    body: str  # without a leading yes/no, which is judged on its own against the question
    polarity: bool | None  # the leading yes (True) / no (False) of an answer to a yes/no question
    toks: list[Tok]
    keys: frozenset[str]
    new: list[Tok]  # tokens the question does not contain: what the claim adds
    missing: list[Tok]  # new tokens the context lacks
    negated: bool
    fragment: bool  # a bare answer ("Lake Erie State Park"), not a statement
    picked: list[frozenset[str]]  # the question's named options the claim names


@dataclass(frozen=True, slots=True)
class _Evidence:
    best: Sentence | None  # the context sentence that best matches the claim
    near: frozenset[str]  # claim keys stated in it or its neighbours


def read_claim(text: str, context: Context, tuning: OfflineTuning) -> _Claim:
    question = context.question
    claim_words = words(text)
    polarity = YES_NO.get(claim_words[0]) if claim_words and question.yes_no else None
    body = text if polarity is None else (text.split(None, 1)[1:] or [""])[0]
    toks = list({t.key: t for t in map(context.variants, tokens(body))}.values())
    keys = frozenset(t.key for t in toks)
    new = [t for t in toks if t.key not in question.keys]
    # A bare answer rather than a statement: short, no auxiliary, pronoun or verb. English cues, so only
    # Latin-script claims qualify (a Russian statement needs no verb).
    fragment = (
        len(claim_words) <= tuning.fragment_words
        and all(c < "\u0250" for c in body if c.isalpha())
        and not any(w in AUXILIARIES or w in PRONOUNS for w in claim_words)
        and not any(w.islower() and w.rstrip(".,;!?").endswith("ed") for w in body.split())
    )
    return _Claim(
        words=claim_words,
        body=body,
        polarity=polarity,
        toks=toks,
        keys=keys,
        new=new,
        missing=[t for t in new if t.key not in context.keys],
        negated=bool(NEGATIONS.intersection(words(body))),
        fragment=fragment,
        picked=[o for o in question.options if len(o & keys) * 2 >= len(o)],
    )


def _find_evidence(claim: _Claim, context: Context) -> _Evidence:
    question = context.question
    repeat = [t for t in claim.toks if t.key in question.keys and t.key in context.keys]
    # A bare yes/no has no words of its own: the evidence is then what the context says on the question.
    weights = {t.key: 1 for t in repeat} | {t.key: 2 for t in claim.new} or dict.fromkeys(
        question.keys & context.keys, 1
    )
    at, near = window(context.sentences, weights)
    return _Evidence(context.sentences[at] if at >= 0 else None, frozenset(near))


def _listed(toks: list[Tok]) -> str:
    return ", ".join(f"'{t.surface}'" for t in toks[:6])


# --- the checks, in the order they run; each decides (an Outcome) or passes (None) ----------------------

Check = Callable[[_Claim, _Evidence, Context, OfflineTuning], Outcome | None]


def invented_name_or_number(claim: _Claim, _: _Evidence, __: Context, ___: OfflineTuning) -> Outcome | None:
    hard = [t for t in claim.missing if t.num or t.cap]
    if hard:
        return _outcome(NO_EVIDENCE, f"The context does not contain {_listed(hard)}.", _SURE)
    return None


def wording_gap(claim: _Claim, _: _Evidence, __: Context, tuning: OfflineTuning) -> Outcome | None:
    missing, new = claim.missing, claim.new
    if missing and len(missing) >= tuning.missing_share * len(new):
        share = round(min(_SURE, len(missing) / len(new)), 2)  # the more is missing, the surer
        return _outcome(NO_EVIDENCE, f"What the claim adds is not in the context: {_listed(missing)}.", share)
    return None


def negation_mismatch(claim: _Claim, evidence: _Evidence, _: Context, __: OfflineTuning) -> Outcome | None:
    """A negative claim needs a negative statement in the context; a positive claim is contradicted when the
    context negates a word it adds, or every word the context negates in that sentence ("Monthly
    subscriptions are [not] refunded" restating the question)."""
    best = evidence.best
    if best is None:
        return None
    if claim.negated and not best.has_negation:
        overlap = len(claim.keys & evidence.near) / max(1, len(claim.keys))
        if overlap >= 0.6:
            return _outcome(CONTRADICTORY, "The context states this without the claim's negation.")
        return _outcome(NO_EVIDENCE, "The context states no such negation.", 0.5)
    negated = best.negated if not claim.negated else frozenset()
    if negated and ({t.key for t in claim.new} & negated or negated <= claim.keys):
        return _outcome(CONTRADICTORY, "The context negates what the claim states.")
    return None


def _judge_choice(picked: frozenset[str], context: Context) -> Outcome | None:
    """A pick between two named options, checked against the context's figures or statements."""
    question, sentences = context.question, context.sentences
    other = question.options[1] if picked == question.options[0] else question.options[0]
    if question.direction is not None:
        mine, theirs = value(sentences, picked, question), value(sentences, other, question)
        if mine is not None and theirs is not None and mine != theirs:
            if (mine < theirs) == (question.direction == "low"):
                return _outcome(FULLY, f"The context's figures agree ({mine:g} against {theirs:g}).")
            return _outcome(
                CONTRADICTORY, f"The context's figures say otherwise ({mine:g} against {theirs:g})."
            )
        return None
    predicate = (question.keys - picked - other) & context.keys
    mine, theirs = coverage(sentences, picked, predicate), coverage(sentences, other, predicate)
    if mine - theirs >= 0.5:
        return _outcome(FULLY, "The context states what was asked about the chosen option only.")
    if theirs - mine >= 0.5:
        return _outcome(
            CONTRADICTORY, "The context states what was asked about the other option, not this one."
        )
    return None


def _judge_yes_no(polarity: bool, context: Context) -> Outcome:
    """A yes/no: does the context state the question's predicate of every entity the question names?"""
    question, sentences = context.question, context.sentences
    predicate = (
        question.keys.difference(*question.entities) & context.keys if question.entities else frozenset()
    )
    if question.relational or not predicate:
        return _outcome(PARTIAL, "The context covers the question; the yes/no needs a comparison.")
    holds = all(coverage(sentences, e, predicate) == 1.0 for e in question.entities)
    if polarity and holds:
        return _outcome(FULLY, "The context states the asked property of every entity.")
    if polarity:
        return _outcome(NO_EVIDENCE, "The context does not state the asked property of every entity.")
    if holds:
        return _outcome(CONTRADICTORY, "The context states the asked property of every entity.")
    return _outcome(PARTIAL, "The context does not state the asked property of every entity.")


def answer_to_the_question_form(
    claim: _Claim, _: _Evidence, context: Context, __: OfflineTuning
) -> Outcome | None:
    """A pick between the question's options, a yes/no: decisive when the claim adds nothing else, or when
    it goes against the context."""
    outcomes: list[Outcome] = []
    if len(claim.picked) == 1 and not claim.negated:
        choice = _judge_choice(claim.picked[0], context)
        if choice is not None:
            outcomes.append(choice)
    if claim.polarity is not None:
        outcomes.append(_judge_yes_no(claim.polarity, context))
    if outcomes and (not claim.new or min(_RANK[o.verdict] for o in outcomes) < _RANK[PARTIAL]):
        return min(outcomes, key=lambda o: _RANK[o.verdict])
    return None


def misattached_name(claim: _Claim, _: _Evidence, context: Context, __: OfflineTuning) -> Outcome | None:
    """A new name or number must be stated about each question name the claim relates it to: hallucinated
    answers often take a real name from the context and attach it to the wrong subject."""
    named = {t.key for t in claim.new if t.num or t.surface[:1].isupper()}
    for group in name_groups(claim.body) if named else ():
        rest = named - group
        if group & context.question.names and rest and not rest <= about(context.sentences, group):
            lost, subject = [t for t in claim.new if t.key in rest], " ".join(sorted(group))
            return _outcome(NO_EVIDENCE, f"The context never states {_listed(lost)} about '{subject}'.")
    return None


def bare_answer_not_a_phrase(
    claim: _Claim, _: _Evidence, context: Context, __: OfflineTuning
) -> Outcome | None:
    if claim.fragment and not claim.picked and not phrase(context.sentences, [t.key for t in claim.toks]):
        return _outcome(NO_EVIDENCE, "The context never names this as one phrase.", 0.6)
    return None


def grounded(claim: _Claim, _: _Evidence, __: Context, ___: OfflineTuning) -> Outcome:
    """What the claim adds is in the context (the checks above found nothing against it)."""
    if claim.missing:
        return _outcome(PARTIAL, f"Mostly stated; missing {_listed(claim.missing)}.")
    return _outcome(FULLY, f"Stated in the context: {_listed(claim.new)}.")


def adds_nothing(claim: _Claim, _: _Evidence, context: Context, __: OfflineTuning) -> Outcome:
    """A claim with no words of its own beyond the question's."""
    if not claim.toks:
        return _outcome(NO_EVIDENCE, "The claim has no content words to check.", _WEAK)
    if claim.fragment and phrase(context.sentences, [t.key for t in claim.toks]):
        return _outcome(PARTIAL, "The answer names something the question mentions.")
    return _outcome(NO_EVIDENCE, "The claim only restates the question; it adds no checkable answer.", _WEAK)


_CHECKS: tuple[Check, ...] = (
    invented_name_or_number,
    wording_gap,
    negation_mismatch,
    answer_to_the_question_form,
)
_CHECKS_OF_NEW_WORDS: tuple[Check, ...] = (misattached_name, bare_answer_not_a_phrase)


def judge_claim(text: str, context: Context, tuning: OfflineTuning) -> tuple[Outcome, Sentence | None]:
    """The verdict on one claim and the context sentence it rests on."""
    claim = read_claim(text, context, tuning)
    evidence = _find_evidence(claim, context)
    checks = (*_CHECKS, *_CHECKS_OF_NEW_WORDS) if claim.new else _CHECKS
    for check in checks:
        outcome = check(claim, evidence, context, tuning)
        if outcome is not None:
            return outcome, evidence.best
    settle = grounded if claim.new else adds_nothing
    return settle(claim, evidence, context, tuning), evidence.best
