"""The deterministic offline judge: answers metric tasks from lexical evidence, with no model and no network.

Claims are the answer's sentences (refusals and framing sentences make none), each aligned with the context
sentences it rests on and judged against them by the checks of _offline_checks.

Question, answer and context are only tokenised and compared (see _offline_text), never interpreted, so an
instruction embedded in them has no effect beyond its words. Pure functions only: one instance serves any
number of concurrent records.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tracescore.model import OFFLINE_JUDGE, Usage, Verdict
from tracescore.score.judges._offline_checks import judge_claim, quoted_evidence
from tracescore.score.judges._offline_claim import (
    IndexedContext,
    Lexicon,
    OfflineTuning,
    is_about_source,
    is_framing,
)
from tracescore.score.judges._offline_relevance import rate_answer, rate_chunks
from tracescore.score.judges._offline_settings import OfflineJudgeSettings
from tracescore.score.judges._offline_text import tokens, words
from tracescore.score.judges._offline_words import COURTESY_PATTERNS, REFUSAL_PATTERNS
from tracescore.score.judges._prompt import fit_to_budget, log_trimmed, text_chars
from tracescore.score.judges._protocol import JudgeError, Judgement, JudgeTask, TaskKind

__all__ = ["OfflineJudge", "OfflineJudgeSettings", "OfflineTuning", "answer_claims", "answer_verdicts"]

logger = logging.getLogger(__name__)

_EVIDENCE_CHARS = 300
# Verdicts that the part of a trimmed context not read could change, their confidence there (below the label
# rule's default min_confidence, 0.5: not sure enough to flag an answer alone) and what their reason adds.
_MAYBE_CUT_OFF = frozenset({Verdict.NO_EVIDENCE, Verdict.PARTIALLY_SUPPORTED})
_CUT_CONFIDENCE = 0.25
_CUT_NOTE = (
    "The context was trimmed before judging (max_context_chars): the evidence may be in the part cut off."
)
_MAX_COUNT = 20  # a list's lead-in counting its items names at most this many ("three causes:")
_OFFLOAD_CHARS = 20_000  # inputs this large run in a worker thread so the event loop keeps serving


# --- handlers and the judge -----------------------------------------------------------------------------


def _is_refusal(sentence: str) -> bool:
    low = sentence.casefold().replace("’", "'")
    return any(p.search(low) for p in REFUSAL_PATTERNS)


def _is_courtesy(sentence: str) -> bool:
    """A courtesy ("Sure!", "Let me know if you have any other questions!") or a question back to the user
    ("Would you like me to compare plans?"): it asserts nothing. One with a figure stays a claim: a figure
    is what an answer most often invents ("Did you know it includes 25 seats?")."""
    low = sentence.casefold().replace("’", "'")
    polite = sentence.rstrip().endswith("?") or any(p.search(low) for p in COURTESY_PATTERNS)
    return polite and not any(t.num for t in tokens(sentence))


def _makes_no_claim(sentence: str) -> bool:
    return not words(sentence) or _is_refusal(sentence) or is_framing(sentence) or _is_courtesy(sentence)


def _introduces_what_follows(sentences: list[str], i: int) -> bool:
    """A lead-in of a list ("Version 4.2 added:", "You can export your data:"): it says what the items
    below are, and the items are its claims, each checked on its own. One that counts them ("The passage
    describes two different films:") claims the count, and stays a claim: on FaithBench such counts carry
    hallucinations. A count is a whole number up to _MAX_COUNT, so a version ("4.2 added:") is none."""
    lead_in = sentences[i].rstrip()
    counts = any(t.num and t.key.isdigit() and int(t.key) <= _MAX_COUNT for t in tokens(lead_in))
    return i < len(sentences) - 1 and lead_in.endswith(":") and not counts


def _explains_a_refusal(sentences: list[str], i: int) -> bool:
    """What follows "I don't know based on the documents." about the documents ("They only describe the
    plan's price.") explains the refusal: it claims nothing about the world. One with a figure stays a
    claim: a figure is what an answer most often invents."""
    if i == 0 or not _is_refusal(sentences[i - 1]):
        return False
    sentence = sentences[i]
    return is_about_source(sentence, sentences[i - 1]) and not any(t.num for t in tokens(sentence))


def answer_claims(data: Any) -> dict[str, Any]:
    """Each answer sentence is one claim (fragments too: the verdict sees the question); refusals and
    what explains them, courtesies and questions back to the user, sentences that only introduce the
    answer ("Here is a summary of the passage:") and a list's lead-in none. No reverse questions (that
    needs a language model): answer relevancy uses the direct rating."""
    answer = data.answer_sentences
    sentences = [
        {
            "sentence_index": i,
            "claims": []
            if _makes_no_claim(s) or _introduces_what_follows(answer, i) or _explains_a_refusal(answer, i)
            else [s.strip()],
        }
        for i, s in enumerate(answer)
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


def answer_verdicts(
    data: Any, tuning: OfflineTuning | None = None, lexicon: Lexicon | None = None
) -> dict[str, Any]:
    """One verdict per claim, with the context sentences it is aligned with quoted as evidence (none when
    the judge could not align it)."""
    tuning = tuning or OfflineTuning()
    context = IndexedContext.of(data.context, data.question or "", lexicon)
    verdicts = []
    for i, claim in enumerate(data.claims):
        outcome, case = judge_claim(claim, context, tuning)
        verdicts.append(
            {
                "claim_index": i,
                "verdict": outcome.verdict,
                "reason": outcome.reason,
                "evidence": quoted_evidence(case)[:_EVIDENCE_CHARS].strip(),
                "confidence": outcome.confidence,
            }
        )
    return {"verdicts": verdicts}


class OfflineJudge:
    """Deterministic, free and offline. Answers the task kinds it can compute (claims, claim verdicts,
    chunk ratings) whichever metric asks; refuses free-form criteria, which need a language model.

    `lexicon` (none by default) names words of the same meaning as a claim's word the context lacks: the
    hook benchmarks/offline_wordnet.py measures WordNet through (BENCHMARKS.md: it did not help)."""

    name = OFFLINE_JUDGE

    def __init__(
        self,
        tuning: OfflineTuning | None = None,
        lexicon: Lexicon | None = None,
        *,
        settings: OfflineJudgeSettings | None = None,
    ) -> None:
        self.tuning = tuning or OfflineTuning()
        self.lexicon = lexicon
        self.settings = settings or OfflineJudgeSettings()
        handlers: dict[TaskKind, Callable[[Any], dict[str, Any]]] = {
            TaskKind.ANSWER_CLAIMS: answer_claims,
            TaskKind.CLAIM_VERDICTS: lambda data: answer_verdicts(data, self.tuning, self.lexicon),
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
        # Cut as the LLM judge cuts: the judge's time grows with the text, and no input may stall a consumer.
        payload, trimmed = fit_to_budget(data.model_dump(mode="json"), self.settings.max_context_chars)
        if trimmed:
            log_trimmed(logger, task.name, self.settings.max_context_chars, trimmed)
            data = task.input_model.model_validate(payload)
        # Every string counts (a list of chunks too): a large input runs off the event loop.
        if text_chars(payload) > _OFFLOAD_CHARS:
            output = await asyncio.to_thread(handler, data)
        else:
            output = handler(data)
        if trimmed:
            output = _doubted(output)
        return Judgement(
            output=task.output_model.model_validate(output),
            usage=Usage(),
            warnings=tuple(t.warning for t in trimmed),
        )


def _doubted(output: dict[str, Any]) -> dict[str, Any]:
    """Verdicts on a trimmed input: a claim the kept text does not (fully) support may rest on the part cut
    off, so its verdict is not a sure one (its confidence falls below the label rule's default
    min_confidence) and its reason says why. A contradiction or full support stands: the kept text states
    it."""
    for verdict in output.get("verdicts", ()):
        if verdict["verdict"] in _MAYBE_CUT_OFF:
            confidence = verdict["confidence"]
            verdict["confidence"] = min(_CUT_CONFIDENCE, 1.0 if confidence is None else confidence)
            verdict["reason"] = f"{verdict['reason'].rstrip()} {_CUT_NOTE}"
    return output
