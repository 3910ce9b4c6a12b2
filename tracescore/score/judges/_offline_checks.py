"""The checks of one claim, in the order they run: the first that decides gives the verdict (`judge_claim`).

A claim is judged by what it adds to the question, because a hallucinated answer usually reuses the
question's words and invents or misplaces only the answer part. In order:

1. another language: a claim that shares almost no words with the context, function words included, or is
   in a script the context does not use, is not checked (low confidence), never called invented;
2. invented name or number: a name or figure the context lacks is NO_EVIDENCE, near certain;
3. not aligned: a claim whose words are mostly stated in no context sentence (nor in two or three it merges)
   is a paraphrase or an addition, which a lexical judge cannot tell apart: NO_EVIDENCE at low confidence,
   said as such, so the label rule does not count it as an invention (in an answer to a question the
   context is about, it is an addition and goes on to the wording check);
4. misplaced name or number: one the context states, but not in the sentences the claim is aligned with;
5. wording gap: new words the context lacks, at the share they are missing;
6. negation mismatch against the aligned sentences;
7. the question's form: a pick between its named options must agree with the context's figures or
   statements, a bare yes/no with what the context states about every entity it names;
8. for claims that add words: a new name must be stated about the question's names it is attached to, a
   bare answer must occur as one phrase;

then the claim is grounded (FULLY, or PARTIAL with words missing), or adds nothing to the question.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracescore.model import Verdict
from tracescore.score.judges._offline_claim import Case, IndexedContext, OfflineTuning, read_case
from tracescore.score.judges._offline_evidence import about, coverage, phrase, value
from tracescore.score.judges._offline_text import Tok, negated_keys, words
from tracescore.score.judges._offline_words import script

__all__ = [
    "CONTRADICTORY",
    "FULLY",
    "NO_EVIDENCE",
    "PARTIAL",
    "ClaimJudgement",
    "judge_claim",
    "quoted_evidence",
]

# The verdicts of the claim-verdicts task, by short names (the judge answers the task's output model by
# validation and needs no metric module).
FULLY, PARTIAL, NO_EVIDENCE, CONTRADICTORY = (
    Verdict.FULLY_SUPPORTED,
    Verdict.PARTIALLY_SUPPORTED,
    Verdict.NO_EVIDENCE,
    Verdict.CONTRADICTORY,
)
_RANK = {FULLY: 3, PARTIAL: 2, NO_EVIDENCE: 1, CONTRADICTORY: 0}
# How sure a lexical verdict is (ClaimVerdict.confidence), by the evidence it rests on: a name or number the
# context lacks is near certain; a negation mismatch or a name tied to another subject likely; one the
# context states elsewhere than where the claim aligns, less; a claim that adds nothing checkable is weak
# evidence of invention, and one the judge cannot align or read is no evidence of it. The label rule counts
# unsupported verdicts at >= 0.5 (Faithfulness min_confidence).
_SURE, _LIKELY, _MISPLACED, _WEAK, _UNCHECKED = 0.9, 0.7, 0.6, 0.3, 0.2
_CONFIDENCE = {FULLY: _LIKELY, PARTIAL: 0.5, NO_EVIDENCE: _LIKELY, CONTRADICTORY: _LIKELY}
# Another language: under this share of a claim's words (of at least _FOREIGN_MIN_WORDS) in a context of at
# least _FOREIGN_MIN_VOCABULARY distinct words.
_FOREIGN_SHARE, _FOREIGN_MIN_WORDS, _FOREIGN_MIN_VOCABULARY = 0.1, 6, 50
# A name the context repeats in this share of its sentences (and at least _TOPIC_MIN) is what it is about:
# a claim need not state it where it aligns.
_TOPIC_SHARE, _TOPIC_MIN = 0.25, 3
# A name or figure stated with this many of the claim's other words somewhere is not misplaced.
_MISPLACED_WITH = 2


@dataclass(frozen=True, slots=True)
class ClaimJudgement:
    verdict: Verdict
    reason: str
    confidence: float


def _outcome(verdict: Verdict, reason: str, confidence: float | None = None) -> ClaimJudgement:
    return ClaimJudgement(verdict, reason, _CONFIDENCE[verdict] if confidence is None else confidence)


def _listed(toks: list[Tok]) -> str:
    return ", ".join(f"'{t.surface}'" for t in toks[:6])


def _aligned(case: Case) -> bool:
    return case.evidence.share >= case.tuning.align_share


def another_language(case: Case) -> ClaimJudgement | None:
    claim, context = case.claim, case.context
    if _aligned(case) or not claim.words:
        return None
    scripts = {script(w) for w in claim.words if w[0].isalpha()}
    foreign_script = bool(scripts) and scripts.isdisjoint(context.scripts)
    # Function words make most of any sentence: a claim of several words sharing almost none with a context
    # of some length is in another language (a short context may lack even "the").
    shared = sum(w in context.vocabulary for w in claim.words) / len(claim.words)
    foreign_words = (
        len(claim.words) >= _FOREIGN_MIN_WORDS
        and len(context.vocabulary) >= _FOREIGN_MIN_VOCABULARY
        and shared < _FOREIGN_SHARE
    )
    if foreign_script or foreign_words:
        return _outcome(
            NO_EVIDENCE,
            "Not checked: the claim shares almost no words with the context, function words included "
            "(another language?); the offline judge cannot compare them.",
            _UNCHECKED,
        )
    return None


def invented_name_or_number(case: Case) -> ClaimJudgement | None:
    invented = case.claim.invented
    if invented:
        return _outcome(NO_EVIDENCE, f"The context does not contain {_listed(invented)}.", _SURE)
    return None


def not_aligned(case: Case) -> ClaimJudgement | None:
    """A claim no context sentence states: a summary's paraphrase as often as an addition, so not checked.
    An answer to a question the context is about ("How much does annual billing save?") is anchored by it:
    a sentence of it that the context does not state is an addition, the usual form of a hallucinated
    answer, and goes on to the wording check like any claim."""
    context = case.context
    if _aligned(case) or not case.claim.toks or context.anchor:
        return None
    return _outcome(
        NO_EVIDENCE,
        f"Not checked: no context sentence states most of this claim ({case.evidence.share:.0%} of it); "
        "a paraphrase or an addition, which the offline judge cannot tell apart.",
        _UNCHECKED,
    )


def misplaced_name_or_number(case: Case) -> ClaimJudgement | None:
    """A name or figure the context states, but never together with the claim's other words: hallucinated
    answers often take a real name or number from the context and attach it to the wrong fact."""
    claim, near, context = case.claim, case.evidence.near, case.context
    topic = max(_TOPIC_MIN, _TOPIC_SHARE * len(context.sentences))
    elsewhere = []
    for tok in claim.new:
        # An initial ("C. S. Lewis") is no name of its own; a topic name need not be restated.
        if not (tok.num or (tok.cap and len(tok.key) > 1)) or tok.key not in context.keys or tok.key in near:
            continue
        stated_in = context.index[tok.key]
        if len(stated_in) >= topic:
            continue
        own = next((g for g in claim.names if tok.key in g), frozenset({tok.key}))
        others = claim.keys - own
        if not any(len(context.sentences[i].keys & others) >= _MISPLACED_WITH for i in stated_in):
            elsewhere.append(tok)
    if elsewhere:
        return _outcome(
            NO_EVIDENCE,
            f"The context states {_listed(elsewhere)}, but never together with the rest of this claim.",
            _MISPLACED,
        )
    return None


def wording_gap(case: Case) -> ClaimJudgement | None:
    missing, new = case.claim.missing, case.claim.new
    if missing and len(missing) >= case.tuning.missing_share * len(new):
        share = round(min(_SURE, len(missing) / len(new)), 2)  # the more is missing, the surer
        if case.claim.about_source:  # "two different films": how a summary characterises the text
            share = min(share, _WEAK)
        return _outcome(NO_EVIDENCE, f"What the claim adds is not in the context: {_listed(missing)}.", share)
    return None


def negation_mismatch(case: Case) -> ClaimJudgement | None:
    """A negative claim needs a negative statement among its aligned sentences (or, less surely, one about
    the same words elsewhere); a positive claim is contradicted when its best sentence negates a word it
    adds, or every word that sentence negates ("Monthly subscriptions are [not] refunded" restating the
    question)."""
    claim, evidence, context = case.claim, case.evidence, case.context
    best = evidence.best
    if best is None:
        return None
    if claim.negated and not any(s.has_negation for s in evidence.sentences):
        scope = negated_keys(words(claim.body))
        if any(context.sentences[i].negated & scope for k in scope for i in context.index.get(k, ())):
            return _outcome(
                NO_EVIDENCE,
                "The context states this negation only in a sentence the claim is not aligned with.",
                _WEAK,
            )
        overlap = len(claim.keys & evidence.near) / max(1, len(claim.keys))
        if overlap >= 0.6:
            return _outcome(CONTRADICTORY, "The context states this without the claim's negation.")
        return _outcome(NO_EVIDENCE, "The context states no such negation.", 0.5)
    negated = best.negated if not claim.negated else frozenset()
    if negated and ({t.key for t in claim.new} & negated or negated <= claim.keys):
        return _outcome(CONTRADICTORY, "The context negates what the claim states.")
    return None


def _judge_choice(picked: frozenset[str], context: IndexedContext) -> ClaimJudgement | None:
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


def _judge_yes_no(polarity: bool, context: IndexedContext) -> ClaimJudgement:
    """A yes/no: does the context state the question's predicate of every entity the question names?"""
    question, sentences = context.question, context.sentences
    entities = question.entities
    predicate = question.keys.difference(*entities) & context.keys if entities else frozenset()
    if question.relational or not predicate:
        return _outcome(PARTIAL, "The context covers the question; the yes/no needs a comparison.")
    holds = all(coverage(sentences, e, predicate) == 1.0 for e in entities)
    if polarity and holds:
        return _outcome(FULLY, "The context states the asked property of every entity.")
    if polarity:
        return _outcome(NO_EVIDENCE, "The context does not state the asked property of every entity.")
    if holds:
        return _outcome(CONTRADICTORY, "The context states the asked property of every entity.")
    return _outcome(PARTIAL, "The context does not state the asked property of every entity.")


def answer_to_the_question_form(case: Case) -> ClaimJudgement | None:
    """A pick between the question's options, a yes/no: decisive when the claim adds nothing else, or when
    it goes against the context."""
    claim, context = case.claim, case.context
    outcomes: list[ClaimJudgement] = []
    if len(claim.picked) == 1 and not claim.negated:
        choice = _judge_choice(claim.picked[0], context)
        if choice is not None:
            outcomes.append(choice)
    if claim.polarity is not None:
        outcomes.append(_judge_yes_no(claim.polarity, context))
    if outcomes and (not claim.new or min(_RANK[o.verdict] for o in outcomes) < _RANK[PARTIAL]):
        return min(outcomes, key=lambda o: _RANK[o.verdict])
    return None


def misattached_name(case: Case) -> ClaimJudgement | None:
    """A new name or number must be stated about each question name the claim relates it to: hallucinated
    answers often take a real name from the context and attach it to the wrong subject."""
    claim, context = case.claim, case.context
    named = {t.key for t in claim.new if t.num or t.surface[:1].isupper()}
    for group in claim.names if named else ():
        rest = named - group
        if group & context.question.names and rest and not rest <= about(context.sentences, group):
            lost, subject = [t for t in claim.new if t.key in rest], " ".join(sorted(group))
            return _outcome(NO_EVIDENCE, f"The context never states {_listed(lost)} about '{subject}'.")
    return None


def bare_answer_not_a_phrase(case: Case) -> ClaimJudgement | None:
    claim = case.claim
    if (
        claim.fragment
        and not claim.picked
        and not phrase(case.context.sentences, [t.key for t in claim.toks])
    ):
        return _outcome(NO_EVIDENCE, "The context never names this as one phrase.", 0.6)
    return None


def grounded(case: Case) -> ClaimJudgement:
    """What the claim adds is in the context (the checks above found nothing against it)."""
    claim = case.claim
    if claim.missing:
        return _outcome(PARTIAL, f"Mostly stated; missing {_listed(claim.missing)}.")
    return _outcome(FULLY, f"Stated in the context: {_listed(claim.new)}.")


def adds_nothing(case: Case) -> ClaimJudgement:
    """A claim with no words of its own beyond the question's (or the framing of a summary)."""
    claim = case.claim
    if not claim.toks:
        return _outcome(NO_EVIDENCE, "The claim has no content words to check.", _WEAK)
    if claim.fragment and phrase(case.context.sentences, [t.key for t in claim.toks]):
        return _outcome(PARTIAL, "The answer names something the question mentions.")
    return _outcome(NO_EVIDENCE, "The claim only restates the question; it adds no checkable answer.", _WEAK)


Check = Callable[[Case], ClaimJudgement | None]
_CHECKS: tuple[Check, ...] = (
    another_language,
    invented_name_or_number,
    not_aligned,
    misplaced_name_or_number,
    wording_gap,
    negation_mismatch,
    answer_to_the_question_form,
)
_CHECKS_OF_NEW_WORDS: tuple[Check, ...] = (misattached_name, bare_answer_not_a_phrase)


def quoted_evidence(case: Case) -> str:
    """The aligned sentences, the best first; nothing for a claim the judge could not align. A sentence that
    states none of the claim's words the ones before it did not (a neighbour naming only the subject) is
    left out of the quote: what a reader checks the claim against, not everything the judge looked at."""
    if not _aligned(case):
        return ""
    claim_keys = case.claim.keys
    quoted: list[str] = []
    stated: set[str] = set()
    for sentence in case.evidence.sentences:
        states = sentence.keys & claim_keys
        if quoted and states <= stated:
            continue
        quoted.append(sentence.text)
        stated |= states
    return " … ".join(quoted)


def judge_claim(text: str, context: IndexedContext, tuning: OfflineTuning) -> tuple[ClaimJudgement, Case]:
    """The verdict on one claim, and the case it was judged on (its evidence)."""
    case = read_case(text, context, tuning)
    checks = (*_CHECKS, *_CHECKS_OF_NEW_WORDS) if case.claim.new else _CHECKS
    for check in checks:
        outcome = check(case)
        if outcome is not None:
            return outcome, case
    settle = grounded if case.claim.new else adds_nothing
    return settle(case), case
