"""Faithfulness: claims extracted from the answer, each judged against the retrieved context.

Two judge calls per record whatever the number of claims: the answer analysis (shared with answer relevancy,
see _analysis.py) extracts the claims, and one batched call judges them all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from tracescore._plural import counted
from tracescore.model import (
    FAITHFULNESS,
    ClaimsCap,
    FaithfulnessClaim,
    FaithfulnessDetails,
    MetricResult,
    RagRecord,
    Usage,
    Verdict,
    has_question,
)
from tracescore.score._segment import split_sentences
from tracescore.score.judges._protocol import Judge, JudgeError, JudgeTask, TaskKind
from tracescore.score.metrics._analysis import ANALYSIS_TASK, AnswerAnalysis, analyse_answer
from tracescore.score.metrics._protocol import UsesContexts

__all__ = [
    "VERDICTS_TASK",
    "ClaimVerdict",
    "Faithfulness",
    "Verdict",
    "VerdictsInput",
    "VerdictsOutput",
    "evidence_locations",
    "faithfulness_label",
]


DEFAULT_MAX_CLAIMS = 200
# The label rule's defaults (README, What "hallucinated" means): one confidently unsupported claim is enough,
# and a score below the threshold. Both chosen with the offline judge's thresholds on half 0 of both dev
# sets (questions, passages) and measured on half 1 (benchmarks/halueval_accuracy.py --halves): the best
# mean balanced accuracy that keeps specificity >= 0.6 on each shape, synthetic reworded summaries included
# (benchmarks/offline_shapes.py; 0.5 flags half of them). Chosen again in every fold of a 5-fold split of
# the dev sets' open part (their lockbox left out). On long answers the threshold carries most of the
# sensitivity and sits on the faithful answers' scores, so specificity falls on passages nobody read
# (BENCHMARKS, "Figures that hold on data we have not read"). With a judge that gives no confidence (an
# LLM), a score below 0.5 always has a sure unsupported claim, so the threshold changes nothing there.
DEFAULT_LABEL_RULE = "any_unsupported"
DEFAULT_MIN_CONFIDENCE = 0.5
DEFAULT_THRESHOLD = 0.4
LabelRule = Literal["any_unsupported", "threshold"]
_QUOTE_WORD = re.compile(r"\w+")
_MIN_QUOTE_OVERLAP = 0.6

DEFAULT_VERDICT_SCORES: Mapping[Verdict, float] = {
    Verdict.FULLY_SUPPORTED: 1.0,
    Verdict.PARTIALLY_SUPPORTED: 0.5,
    Verdict.NO_EVIDENCE: 0.0,
    Verdict.CONTRADICTORY: -1.0,
}


class VerdictsInput(BaseModel):
    question: str | None = Field(description="The user's question; null when it was not recorded.")
    context: str
    claims: list[str]


class ClaimVerdict(BaseModel):
    claim_index: int
    verdict: Verdict
    reason: str = Field(description="One sentence on why.")
    evidence: str = Field(default="", description="The quoted context span the verdict rests on, or empty.")
    # How sure the judge is of the verdict, 0..1; None when it does not say (then read as sure).
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class VerdictsOutput(BaseModel):
    verdicts: list[ClaimVerdict]


VERDICTS_TASK: JudgeTask[VerdictsInput, VerdictsOutput] = JudgeTask(
    name="faithfulness.verdicts",
    instruction=(
        "Judge every claim against the context only, never against your own knowledge. Verdicts: "
        "FULLY_SUPPORTED (the context states it), PARTIALLY_SUPPORTED (part of it is stated, the rest is "
        "missing), NO_EVIDENCE (the context says nothing about it), CONTRADICTORY (the context states "
        "otherwise). Quote the context words the verdict rests on as evidence. Return one verdict per claim, "
        "in claim order."
    ),
    input_model=VerdictsInput,
    output_model=VerdictsOutput,
    kind=TaskKind.CLAIM_VERDICTS,
    examples=(
        (
            VerdictsInput(
                question="Where is the Oberoi Group's head office?",
                context="The Oberoi Group is a hotel company with its head office in Delhi.",
                claims=[
                    "The Oberoi Group's head office is in Mumbai.",
                    "The Oberoi Group is a hotel company.",
                ],
            ),
            VerdictsOutput(
                verdicts=[
                    ClaimVerdict(
                        claim_index=0,
                        verdict=Verdict.CONTRADICTORY,
                        reason="The context puts the head office in Delhi.",
                        evidence="with its head office in Delhi",
                    ),
                    ClaimVerdict(
                        claim_index=1,
                        verdict=Verdict.FULLY_SUPPORTED,
                        reason="Stated directly.",
                        evidence="The Oberoi Group is a hotel company",
                    ),
                ]
            ),
        ),
    ),
)


class Faithfulness:
    """Share of the answer's claims that the context supports, verdict-weighted and clamped to [0, 1].

    `strict_mode` scores NO_EVIDENCE as -1 (unsupported is as bad as contradicted); `binary` reproduces
    RAGAS' supported/total; `verdict_scores` overrides the weights. The label is `faithfulness_label`:
    with `label_rule="any_unsupported"` (the default) one claim judged NO_EVIDENCE or CONTRADICTORY with
    confidence >= `min_confidence` makes the answer "hallucinated" whatever the score; with "threshold"
    only a score below `threshold` does (as does a low score under either rule). Stateless: one instance
    serves any number of concurrent records.
    """

    name = FAITHFULNESS
    tasks = (ANALYSIS_TASK, VERDICTS_TASK)
    uses_contexts = UsesContexts.NEEDED

    def __init__(
        self,
        *,
        strict_mode: bool = False,
        binary: bool = False,
        verdict_scores: Mapping[Verdict, float] | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        max_claims: int = DEFAULT_MAX_CLAIMS,
        label_rule: LabelRule = DEFAULT_LABEL_RULE,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
    ) -> None:
        if max_claims < 1:
            raise ValueError(f"max_claims must be at least 1, got {max_claims}")
        if label_rule not in ("any_unsupported", "threshold"):
            raise ValueError(f"label_rule must be 'any_unsupported' or 'threshold', got {label_rule!r}")
        if not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be within 0..1, got {min_confidence!r}")
        self.label_rule: LabelRule = label_rule
        self.min_confidence = min_confidence
        scores = dict(verdict_scores or DEFAULT_VERDICT_SCORES)
        if strict_mode:
            scores[Verdict.NO_EVIDENCE] = -1.0
        if binary:
            scores = {v: 1.0 if v is Verdict.FULLY_SUPPORTED else 0.0 for v in Verdict}
        self._verdict_scores: Mapping[Verdict, float] = scores
        self.threshold = threshold
        # Judging time grows faster than the answer; past this many sentences/claims the rest is not judged,
        # and the result says so (details["capped"], a warning).
        self.max_claims = max_claims

    async def score(self, record: RagRecord, judge: Judge) -> MetricResult:
        sentences = split_sentences(record.answer)
        if not sentences:
            return self._not_applicable(judge, "the answer is empty", Usage())
        if not any(c.strip() for c in record.contexts):
            return self._not_applicable(judge, "no retrieved context to check the answer against", Usage())
        usage = Usage()
        question = record.query if has_question(record) else None  # judged without one when not recorded
        total_sentences = len(sentences)
        judged_sentences = sentences[: self.max_claims]
        try:
            extracted = await analyse_answer(question, judged_sentences, judge)
            usage += extracted.usage
            claims = _claims_in_order(extracted.output, len(judged_sentences))
            total_claims = len(claims)
            claims = claims[: self.max_claims]
            if not claims:
                return self._not_applicable(judge, "the answer makes no checkable claim", usage)
            judged = await judge.run(
                VERDICTS_TASK,
                VerdictsInput(
                    question=question,
                    context="\n\n".join(c for c in record.contexts if c.strip()),
                    claims=[text for _, text in claims],
                ),
            )
            usage += judged.usage
        except JudgeError as exc:
            return MetricResult.error(self.name, exc.cause, judge=judge.name, usage=usage + exc.usage)
        rows = _locate_evidence(_claim_rows(claims, sentences, judged.output), record.contexts)
        capped = None
        if total_sentences > len(judged_sentences) or total_claims > len(claims):
            capped = ClaimsCap(
                max_claims=self.max_claims,
                answer_sentences=total_sentences,
                sentences_judged=len(judged_sentences),
                claims_judged=len(claims),
            )
        result = self._result(rows, capped, judge.name, usage)
        result.warnings.extend(dict.fromkeys(extracted.warnings + judged.warnings))
        if capped is not None:
            result.warnings.append(
                f"judged only the first {counted(len(claims), 'claim')} of an answer of "
                f"{counted(total_sentences, 'sentence')} (max_claims={self.max_claims})"
            )
        return result

    def result_of(self, claims: Sequence[FaithfulnessClaim], judge_name: str, usage: Usage) -> MetricResult:
        """What judged claims make of a result: score, label and counts. Also what a claim's new verdict makes
        of a recorded result (a claim grounded in an earlier turn of the conversation)."""
        return self._result(list(claims), None, judge_name, usage)

    def _result(
        self, rows: list[FaithfulnessClaim], capped: ClaimsCap | None, judge_name: str, usage: Usage
    ) -> MetricResult:
        weights = [self._verdict_scores[row.verdict] for row in rows]
        score = min(1.0, max(0.0, sum(weights) / len(weights)))
        counts = Counter(row.verdict for row in rows)
        label = faithfulness_label(
            score,
            rows,
            threshold=self.threshold,
            rule=self.label_rule,
            min_confidence=self.min_confidence,
        )
        details = FaithfulnessDetails(
            total_claims=len(rows),
            verdict_counts={v: counts.get(v, 0) for v in Verdict},
            unsupported_claims=len(_confidently_unsupported(rows, self.min_confidence)),
            label_rule=self.label_rule,
            claims=rows,
        )
        if capped is not None:
            details = details.model_copy(update={"capped": capped})
        return MetricResult(
            metric=self.name,
            score=score,
            label=label,
            judge=judge_name,
            usage=usage,
            details=details.to_details(),
        )

    def _not_applicable(self, judge: Judge, reason: str, usage: Usage) -> MetricResult:
        return MetricResult.not_applicable(self.name, reason, judge=judge.name, usage=usage)


def _claim_rows(
    claims: list[tuple[int, str]], sentences: list[str], judged: VerdictsOutput
) -> list[FaithfulnessClaim]:
    by_index = {v.claim_index: v for v in judged.verdicts}
    rows = []
    for index, (sentence_index, text) in enumerate(claims):
        verdict = by_index.get(index)
        rows.append(
            FaithfulnessClaim(
                claim=text,
                sentence=sentences[sentence_index],
                # A claim the judge skipped is unsupported, not silently dropped from the mean.
                verdict=verdict.verdict if verdict else Verdict.NO_EVIDENCE,
                reason=verdict.reason if verdict else "the judge returned no verdict for this claim",
                evidence=verdict.evidence if verdict else "",
                confidence=verdict.confidence if verdict else None,
            )
        )
    return rows


def _locate_evidence(rows: list[FaithfulnessClaim], contexts: tuple[str, ...]) -> list[FaithfulnessClaim]:
    """Each claim with its `context_index`: the retrieved document its quoted evidence comes from (None when
    it quotes none, or nothing the documents hold), so a reader can tell which source, or which turn of a
    conversation, the verdict rests on. The document that holds the quote, else the one sharing most of its
    words (at least `_MIN_QUOTE_OVERLAP` of them: a judge may quote loosely)."""
    if len(contexts) == 1:
        return [row.model_copy(update={"context_index": 0 if row.evidence.strip() else None}) for row in rows]
    folded = [" ".join(c.split()).casefold() for c in contexts]
    vocabularies: list[frozenset[str]] | None = None
    located = []
    for row in rows:
        quote = " ".join(row.evidence.split()).casefold()
        # A judge may quote several aligned sentences, best first and joined by an ellipsis (the offline
        # judge does); the claim rests on the first one a document holds.
        parts = [part.strip() for part in quote.split("…") if part.strip()] or [quote]
        found = next((i for part in parts for i, text in enumerate(folded) if part and part in text), None)
        if found is None and (words := set(_QUOTE_WORD.findall(quote))):
            vocabularies = vocabularies or [frozenset(_QUOTE_WORD.findall(text)) for text in folded]
            shared = [len(words & vocabulary) for vocabulary in vocabularies]
            best = max(range(len(shared)), key=shared.__getitem__)
            found = best if shared[best] >= _MIN_QUOTE_OVERLAP * len(words) else None
        located.append(row.model_copy(update={"context_index": found}))
    return located


def evidence_locations(quote: str, contexts: Sequence[str]) -> list[int]:
    """Every document that holds a part of `quote` (parts joined by an ellipsis, as the offline judge
    quotes), in the order of the parts; none when the quote is empty or no document holds a part."""
    folded = [" ".join(c.split()).casefold() for c in contexts]
    parts = [part.strip() for part in " ".join(quote.split()).casefold().split("…") if part.strip()]
    found: list[int] = []
    for part in parts:
        index = next((i for i, text in enumerate(folded) if part in text), None)
        if index is not None and index not in found:
            found.append(index)
    return found


def _claims_in_order(extracted: AnswerAnalysis, sentence_count: int) -> list[tuple[int, str]]:
    """(sentence index, claim) pairs in answer order; indices outside the answer are dropped."""
    pairs = [
        (group.sentence_index, claim.strip())
        for group in sorted(extracted.sentences, key=lambda g: g.sentence_index)
        if 0 <= group.sentence_index < sentence_count
        for claim in group.claims
        if claim.strip()
    ]
    return pairs


def faithfulness_label(
    score: float,
    claims: Sequence[FaithfulnessClaim | Mapping[str, Any]],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    rule: LabelRule = DEFAULT_LABEL_RULE,
    min_confidence: float = DEFAULT_MIN_CONFIDENCE,
) -> str:
    """The label, "hallucinated" or "faithful". A score below `threshold` is hallucinated under every
    rule; under "any_unsupported" so is an answer with one claim (a `FaithfulnessClaim`, or a row with
    `verdict` and optional `confidence`) judged NO_EVIDENCE or CONTRADICTORY with confidence >=
    `min_confidence`: an invented sentence beside a true one is not faithful at 0.5."""
    if score < threshold:
        return "hallucinated"
    rows = [c for c in claims if isinstance(c, FaithfulnessClaim)]
    rows += FaithfulnessDetails.read(
        {"claims": [c for c in claims if not isinstance(c, FaithfulnessClaim)]}
    ).claims
    if rule == "any_unsupported" and _confidently_unsupported(rows, min_confidence):
        return "hallucinated"
    return "faithful"


def _confidently_unsupported(
    claims: list[FaithfulnessClaim], min_confidence: float
) -> list[FaithfulnessClaim]:
    # A verdict without a confidence (an LLM judge that does not say) counts as sure.
    return [c for c in claims if c.unsupported and (c.confidence is None or c.confidence >= min_confidence)]
