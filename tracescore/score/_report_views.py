"""The report's view models: plain dicts and lists built from kept records, so the template stays
logic-free. Every text comes from a record and is untrusted; the template autoescapes it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tracescore.model import (
    FAITHFULNESS,
    FaithfulnessClaim,
    FaithfulnessDetails,
    RagRecord,
    Verdict,
    is_flagged,
)

__all__ = ["VERDICT_SEVERITY", "Kept", "css", "histogram", "kept", "record_view", "snippet"]

RANK_METRIC = FAITHFULNESS
# Worst first: a sentence holding several claims takes the colour of its worst verdict.
VERDICT_SEVERITY = {
    Verdict.CONTRADICTORY: 3,
    Verdict.NO_EVIDENCE: 2,
    Verdict.PARTIALLY_SUPPORTED: 1,
    Verdict.FULLY_SUPPORTED: 0,
}
_CONTEXT_CHARS = 20_000  # per record: a pathological context must not blow up the page
_SNIPPET_CHARS = 300
_BINS = 10


@dataclass
class Kept:
    """What the report shows of one record: scores, per-metric results and (when known) the texts."""

    id: str | None
    line: int | None
    scores: dict[str, float | None]
    results: dict[str, Any]
    reason: str | None
    query: str | None = None
    answer: str | None = None
    contexts: list[str] = field(default_factory=list)
    flagged: bool = False  # by at least one metric (is_flagged): listed among the flagged records


def kept(record: RagRecord | None, row: Mapping[str, Any], scores: Mapping[str, Any]) -> Kept:
    contexts = list(record.contexts) if record else list(row.get("contexts") or [])
    return Kept(
        id=row.get("id"),
        line=row.get("line"),
        scores=dict(scores),
        results=dict(row.get("results") or {}),
        reason=row.get("reason"),
        query=record.query if record else row.get("query"),
        answer=record.answer if record else row.get("answer"),
        contexts=_capped(contexts),
    )


def _capped(contexts: list[str]) -> list[str]:
    out, budget = [], _CONTEXT_CHARS
    for text in contexts:
        text = str(text)
        if budget <= 0:
            break
        out.append(text if len(text) <= budget else text[:budget] + " … [truncated]")
        budget -= len(text)
    return out


def histogram(scores: list[float], threshold: float) -> dict[str, Any]:
    """Geometry of an inline SVG bar chart: 10 bins over [0, 1], the last one closed."""
    counts = [0] * _BINS
    for s in scores:
        counts[min(_BINS - 1, max(0, math.floor(s * _BINS)))] += 1
    width, height, left, bottom, top = 420, 190, 44, 36, 18
    plot_w, plot_h = width - left - 10, height - bottom - top
    peak = max(counts) or 1
    bar_w = plot_w / _BINS
    bars = []
    for i, count in enumerate(counts):
        bar_h = plot_h * count / peak
        bars.append(
            {
                "x": round(left + i * bar_w + 1, 1),
                "y": round(top + plot_h - bar_h, 1),
                "w": round(bar_w - 2, 1),
                "h": round(bar_h, 1),
                "count": count,
                "low": (i + 1) / _BINS <= threshold,
                "range": f"{i / _BINS:.1f}–{(i + 1) / _BINS:.1f}",
            }
        )
    ticks = [{"x": round(left + i * bar_w, 1), "label": f"{i / _BINS:g}"} for i in range(0, _BINS + 1, 2)]
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "base": top + plot_h,
        "right": left + plot_w,
        "peak": peak,
        "bars": bars,
        "ticks": ticks,
        "threshold_x": round(left + plot_w * min(1.0, max(0.0, threshold)), 1),
    }


def _highlight(answer: str, claims: list[FaithfulnessClaim]) -> list[dict[str, Any]]:
    """The answer cut into segments; sentences that carry claims become marks coloured by verdict."""
    by_sentence: dict[str, list[FaithfulnessClaim]] = {}
    for claim in claims:
        sentence = claim.sentence.strip()
        if sentence:
            by_sentence.setdefault(sentence, []).append(claim)
    spans: list[tuple[int, int, list[FaithfulnessClaim]]] = []
    cursor = 0
    for sentence, group in by_sentence.items():
        # Sentences come in answer order, so search after the previous one first, then anywhere free.
        start = answer.find(sentence, cursor)
        if start < 0:
            start = answer.find(sentence)
        end = start + len(sentence)
        if start < 0 or any(start < e and s < end for s, e, _ in spans):
            continue  # not found verbatim: the claim is still listed under the answer
        spans.append((start, end, group))
        cursor = end
    segments, position = [], 0
    for start, end, group in sorted(spans, key=lambda s: s[0]):
        if start > position:
            segments.append({"text": answer[position:start]})
        worst = max(group, key=lambda c: VERDICT_SEVERITY[c.verdict])
        segments.append(
            {
                "text": answer[start:end],
                "verdict": css(worst.verdict),
                "title": "\n\n".join(_claim_tooltip(c) for c in group),
            }
        )
        position = end
    if position < len(answer):
        segments.append({"text": answer[position:]})
    return segments


def _claim_tooltip(claim: FaithfulnessClaim) -> str:
    text = f"{claim.verdict}: {claim.claim}"
    if claim.reason:
        text += f"\n{claim.reason}"
    if claim.evidence:
        text += f'\nEvidence: "{claim.evidence}"'
    return text


def css(verdict: Any) -> str:
    return str(verdict or "unknown").lower().replace("_", "-")


def record_view(kept: Kept, metrics: list[str], threshold: float | None) -> dict[str, Any]:
    faith = kept.results.get(RANK_METRIC) or {}
    # Read tolerantly: a scored file may be an older version's.
    claims = FaithfulnessDetails.read(faith.get("details") if isinstance(faith, Mapping) else None).claims
    scores = []
    for name in metrics:
        result = kept.results.get(name) or {}
        score = kept.scores.get(name)
        scores.append(
            {
                "name": name,
                "score": score,
                "low": score is not None
                and is_flagged(
                    {"score": score, "label": result.get("label") if isinstance(result, Mapping) else None},
                    threshold,
                ),
                "label": result.get("label") if isinstance(result, Mapping) else None,
                "reason": result.get("reason") if isinstance(result, Mapping) else None,
            }
        )
    answer = kept.answer
    return {
        "verdicts": " ".join(sorted({css(c.verdict) for c in claims})),
        "id": kept.id,
        "line": kept.line,
        "scores": scores,
        "query": kept.query,
        "answer": answer,
        "segments": _highlight(answer, claims) if answer is not None else [],
        "claims": [_claim_view(c) for c in claims],
        "contexts": kept.contexts,
        "reason": kept.reason,
    }


def _claim_view(claim: FaithfulnessClaim) -> dict[str, str]:
    """Every field the template reads, as text."""
    return {
        "claim": claim.claim,
        "verdict": claim.verdict.value,
        "reason": claim.reason,
        "evidence": claim.evidence,
        "css": css(claim.verdict),
    }


def snippet(text: str | None) -> str | None:
    if text is None or len(text) <= _SNIPPET_CHARS:
        return text
    return text[:_SNIPPET_CHARS] + "…"
