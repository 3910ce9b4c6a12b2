"""A turn's unsupported claims judged again, against its own documents and what earlier turns of its
conversation retrieved (`tracescore conversations` holds those: records carry no documents).

Only the claims the turn's own documents gave no evidence for (NO_EVIDENCE) are judged again, in one call of
the judge that judged them first; a claim its own documents contradict stays so (the turn's own retrieval
is the fresher word). A claim judged supported now takes its new verdict, reason and quote; the others keep
theirs, so a grounding never makes a verdict worse. The result is rebuilt by the metric's own rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore.model import FaithfulnessDetails, MetricResult, Usage, Verdict
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._faithfulness import (
    DEFAULT_LABEL_RULE,
    VERDICTS_TASK,
    Faithfulness,
    LabelRule,
    VerdictsInput,
    evidence_locations,
)

__all__ = ["Regrounded", "ground_claims"]

_SUPPORTED = frozenset({Verdict.FULLY_SUPPORTED, Verdict.PARTIALLY_SUPPORTED})


@dataclass(frozen=True)
class Regrounded:
    """What judging the claims again found. `result` is None when no claim is supported now."""

    result: MetricResult | None
    # Claim row index -> the documents (indexes into the contexts judged) its new quote was found in.
    grounded: dict[int, list[int]]
    judged: int  # claims judged again
    usage: Usage


async def ground_claims(
    claims: Sequence[Mapping[str, Any]],
    contexts: Sequence[str],
    question: str | None,
    judge: Judge,
    label_rule: str | None = None,
) -> Regrounded:
    """Judge the NO_EVIDENCE rows of `claims` (a faithfulness result's `details["claims"]`) against
    `contexts`; raises the judge's JudgeError."""
    rows = [dict(claim) for claim in claims]
    if len(FaithfulnessDetails.read({"claims": rows}).claims) != len(rows):
        # An older record's claim without a readable verdict: the grounded claims could not be told apart.
        return Regrounded(None, {}, 0, Usage())
    open_rows = [i for i, row in enumerate(rows) if row.get("verdict") == Verdict.NO_EVIDENCE.value]
    texts = [c for c in contexts if c.strip()]
    if not open_rows or not texts:
        return Regrounded(None, {}, 0, Usage())
    judged = await judge.run(
        VERDICTS_TASK,
        VerdictsInput(
            question=question, context="\n\n".join(texts), claims=[str(rows[i]["claim"]) for i in open_rows]
        ),
    )
    grounded: dict[int, list[int]] = {}
    for verdict in judged.output.verdicts:
        if not 0 <= verdict.claim_index < len(open_rows) or verdict.verdict not in _SUPPORTED:
            continue
        index = open_rows[verdict.claim_index]
        rows[index] = {
            **rows[index],
            "verdict": verdict.verdict.value,
            "reason": verdict.reason,
            "evidence": verdict.evidence,
            "confidence": verdict.confidence,
        }
        grounded[index] = evidence_locations(verdict.evidence, contexts)
    if not grounded:
        return Regrounded(None, {}, len(open_rows), judged.usage)
    rule: LabelRule = "threshold" if label_rule == "threshold" else DEFAULT_LABEL_RULE
    judged_claims = FaithfulnessDetails.read({"claims": rows}).claims
    result = Faithfulness(label_rule=rule).result_of(judged_claims, judge.name, judged.usage)
    return Regrounded(result, grounded, len(open_rows), judged.usage)
