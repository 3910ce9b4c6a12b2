"""The deterministic offline judge: answers metric tasks from lexical evidence, with no model and no network.

Claims are the answer's sentences (refusals make none). A claim is judged by what it adds to the question,
because a hallucinated answer usually reuses the question's words and invents or misplaces only the answer
part: its *new* words, numbers and names must be in the context; a new name or number must be stated about
the question's names it is attached to; a bare answer ("Lake Erie State Park") must occur as one phrase; a
claim that only restates the question supports nothing. On top of that: a negation mismatch with the context
is CONTRADICTORY, a pick between the named options of a "which ..., A or B?" question must agree with the
figures or statements the context gives for A and B, and a bare yes/no is checked against what the context
states about every entity the question names.

Question, answer and context are only tokenised and compared (see _offline_text), never interpreted, so an
instruction embedded in them has no effect beyond its words. Pure functions only: one instance serves any
number of concurrent records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tracescore.model import Usage
from tracescore.score.judges._offline_evidence import about, coverage, phrase, value, window
from tracescore.score.judges._offline_relevance import rate_answer, rate_chunks
from tracescore.score.judges._offline_text import (
    Question,
    Sentence,
    Tok,
    analyse_question,
    index_context,
    name_groups,
    tokens,
    words,
)
from tracescore.score.judges._offline_words import AUXILIARIES, NEGATIONS, PRONOUNS, REFUSAL_PATTERNS, YES_NO
from tracescore.score.judges._protocol import JudgeError, Judgement, JudgeTask, TaskKind

__all__ = ["OfflineJudge", "OfflineTuning", "answer_claims", "answer_verdicts"]

_EVIDENCE_CHARS = 300
_OFFLOAD_CHARS = 20_000  # inputs this large run in a worker thread so the event loop keeps serving

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

_Outcome = tuple[str, str]


@dataclass(frozen=True)
class OfflineTuning:
    """The offline judge's two tuned thresholds (benchmarks/halueval_accuracy.py chooses them by
    cross-validation over questions; these defaults are what it picks on the full dev set)."""

    # A claim whose new words are missing from the context at this share or more is NO_EVIDENCE.
    missing_share: float = 0.25
    # An answer of at most this many words is a bare answer ("Golf Magazine"), not a statement.
    fragment_words: int = 6


# --- claim verdicts -------------------------------------------------------------------------------------


def _listed(toks: list[Tok]) -> str:
    return ", ".join(f"'{t.surface}'" for t in toks[:6])


def _judge_choice(
    picked: frozenset[str], question: Question, sentences: list[Sentence], context: frozenset[str]
) -> _Outcome | None:
    """A pick between two named options, checked against the context's figures or statements."""
    other = question.options[1] if picked == question.options[0] else question.options[0]
    if question.direction is not None:
        mine, theirs = value(sentences, picked, question), value(sentences, other, question)
        if mine is not None and theirs is not None and mine != theirs:
            if (mine < theirs) == (question.direction == "low"):
                return FULLY, f"The context's figures agree ({mine:g} against {theirs:g})."
            return (
                CONTRADICTORY,
                f"The context's figures say otherwise ({mine:g} against {theirs:g}).",
            )
        return None
    predicate = (question.keys - picked - other) & context
    mine, theirs = coverage(sentences, picked, predicate), coverage(sentences, other, predicate)
    if mine - theirs >= 0.5:
        return FULLY, "The context states what was asked about the chosen option only."
    if theirs - mine >= 0.5:
        return (
            CONTRADICTORY,
            "The context states what was asked about the other option, not this one.",
        )
    return None


def _judge_yes_no(
    polarity: bool, question: Question, sentences: list[Sentence], context: frozenset[str]
) -> _Outcome:
    """A yes/no: does the context state the question's predicate of every entity the question names?"""
    predicate = question.keys.difference(*question.entities) & context if question.entities else frozenset()
    if question.relational or not predicate:
        return PARTIAL, "The context covers the question; the yes/no needs a comparison."
    holds = all(coverage(sentences, e, predicate) == 1.0 for e in question.entities)
    if polarity and holds:
        return FULLY, "The context states the asked property of every entity."
    if polarity:
        return NO_EVIDENCE, "The context does not state the asked property of every entity."
    if holds:
        return CONTRADICTORY, "The context states the asked property of every entity."
    return PARTIAL, "The context does not state the asked property of every entity."


def _judge_claim(
    claim: str,
    question: Question,
    sentences: list[Sentence],
    context: frozenset[str],
    variants: Callable[[Tok], Tok],
    tuning: OfflineTuning,
) -> tuple[str, str, float, Sentence | None]:
    claim_words = words(claim)
    polarity = YES_NO.get(claim_words[0]) if claim_words and question.yes_no else None
    # The claim without its leading yes/no, which is judged on its own against the question.
    body = claim if polarity is None else (claim.split(None, 1)[1:] or [""])[0]
    toks = list({t.key: t for t in map(variants, tokens(body))}.values())
    claim_keys = frozenset(t.key for t in toks)
    new = [t for t in toks if t.key not in question.keys]
    repeat = [t for t in toks if t.key in question.keys and t.key in context]
    missing = [t for t in new if t.key not in context]
    # A bare yes/no has no words of its own: the evidence is then what the context says on the question.
    weights = {t.key: 1 for t in repeat} | {t.key: 2 for t in new} or dict.fromkeys(
        question.keys & context, 1
    )
    at, near = window(sentences, weights)
    best = sentences[at] if at >= 0 else None

    # A bare answer ("Lake Erie State Park") rather than a statement: short, no auxiliary, pronoun or verb.
    # English cues, so only Latin-script claims qualify (a Russian statement needs no verb).
    fragment = (
        len(claim_words) <= tuning.fragment_words
        and all(c < "\u0250" for c in body if c.isalpha())
        and not any(w in AUXILIARIES or w in PRONOUNS for w in claim_words)
        and not any(w.islower() and w.rstrip(".,;!?").endswith("ed") for w in body.split())
    )

    def done(outcome: _Outcome, confidence: float | None = None) -> tuple[str, str, float, Sentence | None]:
        return outcome[0], outcome[1], _CONFIDENCE[outcome[0]] if confidence is None else confidence, best

    hard = [t for t in missing if t.num or t.cap]
    if hard:
        return done((NO_EVIDENCE, f"The context does not contain {_listed(hard)}."), _SURE)
    if missing and len(missing) >= tuning.missing_share * len(new):
        share = round(min(_SURE, len(missing) / len(new)), 2)  # the more is missing, the surer
        return done((NO_EVIDENCE, f"What the claim adds is not in the context: {_listed(missing)}."), share)

    # Negation: a negative claim needs a negative statement in the context, and the other way round.
    claim_negated = bool(NEGATIONS.intersection(words(body)))
    if claim_negated and best is not None and not best.has_negation:
        overlap = len(claim_keys & near) / max(1, len(claim_keys))
        if overlap >= 0.6:
            return done((CONTRADICTORY, "The context states this without the claim's negation."))
        return done((NO_EVIDENCE, "The context states no such negation."), 0.5)
    # A positive claim is contradicted when the context negates a word it adds, or every word the context
    # negates in that sentence ("Monthly subscriptions are [not] refunded" restating the question).
    negated = best.negated if best is not None and not claim_negated else frozenset()
    if negated and ({t.key for t in new} & negated or negated <= claim_keys):
        return done((CONTRADICTORY, "The context negates what the claim states."))

    outcomes: list[_Outcome] = []
    picked = [o for o in question.options if len(o & claim_keys) * 2 >= len(o)]
    if len(picked) == 1 and not claim_negated:
        choice = _judge_choice(picked[0], question, sentences, context)
        if choice is not None:
            outcomes.append(choice)
    if polarity is not None:
        outcomes.append(_judge_yes_no(polarity, question, sentences, context))
    if outcomes and (not new or min(_RANK[v] for v, _ in outcomes) < _RANK[PARTIAL]):
        return done(min(outcomes, key=lambda o: _RANK[o[0]]))

    if new:
        # A new name or number must be stated about each question name the claim relates it to: hallucinated
        # answers often take a real name from the context and attach it to the wrong subject.
        named = {t.key for t in new if t.num or t.surface[:1].isupper()}
        for group in name_groups(body) if named else ():
            rest = named - group
            if group & question.names and rest and not rest <= about(sentences, group):
                lost, subject = [t for t in new if t.key in rest], " ".join(sorted(group))
                return done((NO_EVIDENCE, f"The context never states {_listed(lost)} about '{subject}'."))
        if fragment and not picked and not phrase(sentences, [t.key for t in toks]):
            return done((NO_EVIDENCE, "The context never names this as one phrase."), 0.6)
        if missing:
            return done((PARTIAL, f"Mostly stated; missing {_listed(missing)}."))
        return done((FULLY, f"Stated in the context: {_listed(new)}."))
    if outcomes:
        return done(outcomes[0])
    if not toks:
        return done((NO_EVIDENCE, "The claim has no content words to check."), _WEAK)
    if fragment and phrase(sentences, [t.key for t in toks]):
        return done((PARTIAL, "The answer names something the question mentions."))
    return done((NO_EVIDENCE, "The claim only restates the question; it adds no checkable answer."), _WEAK)


# --- handlers and the judge -----------------------------------------------------------------------------


def _is_refusal(sentence: str) -> bool:
    low = sentence.casefold().replace("’", "'")
    return any(p.search(low) for p in REFUSAL_PATTERNS)


def answer_claims(data: Any) -> dict[str, Any]:
    """Each answer sentence is one claim (fragments too: the verdict sees the question); refusals none.
    No reverse questions (that needs a language model): answer relevancy uses the direct rating."""
    sentences = [
        {"sentence_index": i, "claims": [] if _is_refusal(s) or not words(s) else [s.strip()]}
        for i, s in enumerate(data.answer_sentences)
    ]
    if not any(group["claims"] for group in sentences):
        return {
            "sentences": sentences,
            "noncommittal": True,
            "relevance": 1,
            "relevance_reason": "The answer declines to answer.",
        }
    rating, reason = rate_answer(data.question or "", " ".join(data.answer_sentences))
    return {"sentences": sentences, "relevance": rating, "relevance_reason": reason}


def answer_verdicts(data: Any, tuning: OfflineTuning = OfflineTuning()) -> dict[str, Any]:
    """One verdict per claim, with the best-matching context sentence quoted as evidence."""
    sentences = index_context(data.context)
    context = frozenset().union(*(s.keys for s in sentences))
    question = analyse_question(data.question or "")
    # Derived forms of one long word ("eukaryotes", "eukaryotic") share a 7-letter prefix; a lowercase claim
    # word missing from the context is matched to such a sibling. Names must match exactly.
    siblings = {k[:7]: k for k in sorted(context, reverse=True) if len(k) >= 8 and k.isalpha()}

    def variants(tok: Tok) -> Tok:
        if tok.key in context or tok.num or tok.surface[:1].isupper() or len(tok.key) < 8:
            return tok
        sibling = siblings.get(tok.key[:7])
        return tok if sibling is None else Tok(sibling, tok.surface, tok.cap, tok.num)

    verdicts = []
    for i, claim in enumerate(data.claims):
        verdict, reason, confidence, best = _judge_claim(
            claim, question, sentences, context, variants, tuning
        )
        evidence = best.text[:_EVIDENCE_CHARS].strip() if best is not None else ""
        verdicts.append(
            {
                "claim_index": i,
                "verdict": verdict,
                "reason": reason,
                "evidence": evidence,
                "confidence": confidence,
            }
        )
    return {"verdicts": verdicts}


class OfflineJudge:
    """Deterministic, free and offline. Answers the task kinds it can compute (claims, claim verdicts,
    chunk ratings) whichever metric asks; refuses free-form criteria, which need a language model."""

    name = "offline"

    def __init__(self, tuning: OfflineTuning | None = None) -> None:
        self.tuning = tuning or OfflineTuning()
        handlers: dict[TaskKind, Callable[[Any], dict[str, Any]]] = {
            TaskKind.ANSWER_CLAIMS: answer_claims,
            TaskKind.CLAIM_VERDICTS: lambda data: answer_verdicts(data, self.tuning),
            TaskKind.CHUNK_RATINGS: rate_chunks,
        }
        self._handlers = handlers

    def can_answer(self, task: JudgeTask[Any, Any]) -> bool:
        return task.kind in self._handlers

    async def run(self, task: JudgeTask[Any, Any], data: Any) -> Judgement[Any]:
        handler = self._handlers.get(task.kind)
        if handler is None:
            raise JudgeError(
                f"the offline judge cannot answer task '{task.name}' (free-form criteria); use an LLM judge"
            )
        if not isinstance(data, task.input_model):
            data = task.input_model.model_validate(data, from_attributes=True)
        if sum(len(v) for v in data.model_dump().values() if isinstance(v, str)) > _OFFLOAD_CHARS:
            output = await asyncio.to_thread(handler, data)
        else:
            output = handler(data)
        return Judgement(output=task.output_model.model_validate(output), usage=Usage())
