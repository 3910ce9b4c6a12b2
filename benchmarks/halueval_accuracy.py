"""How well does Faithfulness + OfflineJudge separate faithful from hallucinated answers?

    python benchmarks/halueval_accuracy.py [PATH] [--show-errors N] [--folds K] [--halves]

PATH is a JSONL file of records (query, contexts, answer, label faithful|hallucinated); by default the
HaluEval QA dev set next to the repository. A record is predicted hallucinated when Faithfulness labels it
so (the default label rule: a score below 0.5, or one claim judged NO_EVIDENCE/CONTRADICTORY with
confidence >= 0.5) or its score is None (nothing could be verified). Also prints a naive baseline measured
in the same run: faithful iff every content word of the answer appears in the context.

Then the honest figures. K-fold cross-validation over questions (both answers of a question stay in one
fold): on each fold the judge's tuned thresholds (OfflineTuning: missing-word share, bare-answer length),
the decision threshold and the label rule's min_confidence are chosen on the other K-1 folds and measured
on the held-out fold; the held-out predictions of all folds are pooled into one confusion matrix, beside
the naive rule's on the same records. `--halves`: the questions split in two halves (seeded); settings
chosen on one half, measured on the other, in both directions, each direction reported on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tracescore.model import MetricResult, RagRecord
from tracescore.score import faithfulness_label
from tracescore.score.judges import OfflineJudge, OfflineTuning
from tracescore.score.judges._offline_words import STOPWORDS
from tracescore.score.metrics import Faithfulness

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
_WORD = re.compile(r"\w+")


@dataclass
class Confusion:
    """Counts with "hallucinated" as the positive class."""

    tp: int = 0
    fn: int = 0
    tn: int = 0
    fp: int = 0

    def add(self, hallucinated: bool, predicted_hallucinated: bool) -> None:
        if hallucinated:
            self.tp += predicted_hallucinated
            self.fn += not predicted_hallucinated
        else:
            self.fp += predicted_hallucinated
            self.tn += not predicted_hallucinated

    @property
    def tpr(self) -> float:
        return self.tp / max(1, self.tp + self.fn)

    @property
    def tnr(self) -> float:
        return self.tn / max(1, self.tn + self.fp)

    @property
    def balanced_accuracy(self) -> float:
        return (self.tpr + self.tnr) / 2

    @property
    def accuracy(self) -> float:
        return (self.tp + self.tn) / max(1, self.tp + self.tn + self.fp + self.fn)


def load(path: Path) -> list[tuple[RagRecord, bool]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                raw = json.loads(line)
                record = RagRecord(
                    id=raw.get("id"),
                    query=raw["query"],
                    contexts=tuple(raw["contexts"]),
                    answer=raw["answer"],
                )
                rows.append((record, raw["label"] == "hallucinated"))
    return rows


def naive_is_hallucinated(record: RagRecord) -> bool:
    """The baseline: hallucinated unless every answer content word occurs somewhere in the context."""
    context = {w.lower() for c in record.contexts for w in _WORD.findall(c)}
    content = [w.lower() for w in _WORD.findall(record.answer) if w.lower() not in STOPWORDS]
    return not all(w in context for w in content)


async def score_all(records: list[RagRecord], tuning: OfflineTuning | None = None) -> list[MetricResult]:
    metric, judge = Faithfulness(), OfflineJudge(tuning)
    return await asyncio.gather(*(metric.score(r, judge) for r in records))


# The search space: the judge's two tuned thresholds, the decision threshold and the label rule's
# min_confidence.
MISSING_SHARES = (0.15, 0.25, 0.34, 0.5, 0.75, 1.0)
FRAGMENT_WORDS = (3, 4, 6, 8, 10)
DECISION_THRESHOLDS = (0.25, 0.5, 0.75)
MIN_CONFIDENCES = (0.3, 0.5, 0.7, 0.95)
Setting = tuple[float, int, float, float]
Scores = dict[tuple[float, int], list[MetricResult]]


def _predict(result: MetricResult, threshold: float, min_confidence: float = 0.5) -> bool:
    """The label rule (any_unsupported) at these settings; an unscored record counts as hallucinated."""
    if result.score is None:
        return True
    claims = result.details.get("claims") or []
    label = faithfulness_label(result.score, claims, threshold=threshold, min_confidence=min_confidence)
    return label == "hallucinated"


def _confusion(labels: list[bool], predictions: list[bool]) -> Confusion:
    confusion = Confusion()
    for hallucinated, predicted in zip(labels, predictions, strict=True):
        confusion.add(hallucinated, predicted)
    return confusion


def _held_out(scores: Scores, labels: list[bool], rows: list[int], setting: Setting) -> Confusion:
    share, fragment, threshold, confidence = setting
    predictions = [_predict(scores[(share, fragment)][i], threshold, confidence) for i in rows]
    return _confusion([labels[i] for i in rows], predictions)


def _accuracy(scores: Scores, labels: list[bool], rows: list[int], setting: Setting) -> float:
    return _held_out(scores, labels, rows, setting).balanced_accuracy


def _choose(scores: Scores, labels: list[bool], train: list[int]) -> Setting:
    settings = itertools.product(MISSING_SHARES, FRAGMENT_WORDS, DECISION_THRESHOLDS, MIN_CONFIDENCES)
    # The first best on ties.
    return max(settings, key=lambda setting: _accuracy(scores, labels, train, setting))


def _all_scores(records: list[RagRecord]) -> Scores:
    scores: Scores = {}
    for share, fragment in itertools.product(MISSING_SHARES, FRAGMENT_WORDS):
        tuning = OfflineTuning(missing_share=share, fragment_words=fragment)
        scores[(share, fragment)] = asyncio.run(score_all(records, tuning))
    return scores


def _question_order(records: list[RagRecord], seed: int) -> list[str]:
    questions = sorted({r.query for r in records})
    random.Random(seed).shuffle(questions)
    return questions


def halves(
    rows: list[tuple[RagRecord, bool]], seed: int = 0
) -> list[tuple[str, Setting, Confusion, Confusion]]:
    """Per direction (A->B, B->A): (name, setting chosen on one half, its confusion on the other half, the
    shipped defaults' confusion on that other half)."""
    records, labels = [r for r, _ in rows], [h for _, h in rows]
    scores = _all_scores(records)
    questions = _question_order(records, seed)
    half_a = set(questions[: len(questions) // 2])
    a = [i for i, r in enumerate(records) if r.query in half_a]
    b = [i for i, r in enumerate(records) if r.query not in half_a]
    defaults = OfflineTuning()
    metric = Faithfulness()
    shipped: Setting = (
        defaults.missing_share,
        defaults.fragment_words,
        metric.threshold,
        metric.min_confidence,
    )
    out = []
    for name, train, test in (("tuned on A, measured on B", a, b), ("tuned on B, measured on A", b, a)):
        chosen = _choose(scores, labels, train)
        out.append(
            (name, chosen, _held_out(scores, labels, test, chosen), _held_out(scores, labels, test, shipped))
        )
    return out


def cross_validate(
    rows: list[tuple[RagRecord, bool]], folds: int, seed: int = 0
) -> tuple[Confusion, Confusion, list[Setting]]:
    """(pooled held-out confusion of the tuned judge, the naive rule's on the same records, the settings
    chosen per fold)."""
    records, labels = [r for r, _ in rows], [h for _, h in rows]
    scores = _all_scores(records)
    questions = _question_order(records, seed)
    fold_of = {q: i % folds for i, q in enumerate(questions)}
    held_labels: list[bool] = []
    held_predictions: list[bool] = []
    naive_predictions: list[bool] = []
    chosen: list[Setting] = []
    for fold in range(folds):
        train = [i for i, r in enumerate(records) if fold_of[r.query] != fold]
        test = [i for i, r in enumerate(records) if fold_of[r.query] == fold]
        best = _choose(scores, labels, train)
        share, fragment, threshold, confidence = best
        chosen.append(best)
        held_labels += [labels[i] for i in test]
        held_predictions += [_predict(scores[(share, fragment)][i], threshold, confidence) for i in test]
        naive_predictions += [naive_is_hallucinated(records[i]) for i in test]
    return (
        _confusion(held_labels, held_predictions),
        _confusion(held_labels, naive_predictions),
        chosen,
    )


def evaluate(
    path: Path,
) -> tuple[Confusion, Confusion, int, float, list[tuple[RagRecord, bool, MetricResult]]]:
    """(offline confusion, baseline confusion, None scores, records/second, misclassified rows)."""
    rows = load(path)
    started = time.perf_counter()
    results = asyncio.run(score_all([r for r, _ in rows]))
    elapsed = time.perf_counter() - started
    offline, naive, nones, errors = Confusion(), Confusion(), 0, []
    for (record, hallucinated), result in zip(rows, results, strict=True):
        nones += result.score is None
        predicted = result.score is None or result.label == "hallucinated"
        offline.add(hallucinated, predicted)
        naive.add(hallucinated, naive_is_hallucinated(record))
        if predicted != hallucinated:
            errors.append((record, hallucinated, result))
    return offline, naive, nones, len(rows) / max(elapsed, 1e-9), errors


_SETTING = "(missing share, bare-answer words, decision threshold, min_confidence)"


def _setting(setting: Setting) -> str:
    share, fragment, threshold, confidence = setting
    return f"({share:g}, {fragment}, {threshold:g}, {confidence:g})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument(
        "--show-errors", type=int, default=0, metavar="N", help="print N misclassified records"
    )
    parser.add_argument(
        "--folds", type=int, default=5, help="cross-validation folds over questions (0: skip)"
    )
    parser.add_argument(
        "--halves", action="store_true", help="also: tune on one half of the questions, measure on the other"
    )
    args = parser.parse_args(argv)
    if not args.path.exists():
        print(f"no such file: {args.path}", file=sys.stderr)
        return 2
    offline, naive, nones, speed, errors = evaluate(args.path)
    total = offline.tp + offline.tn + offline.fp + offline.fn
    print(f"records:                      {total}")
    print(f"balanced accuracy (offline):  {offline.balanced_accuracy:.4f}")
    print(f"accuracy (offline):           {offline.accuracy:.4f}")
    print(f"TPR (hallucinated caught):    {offline.tpr:.4f}")
    print(f"TNR (faithful passed):        {offline.tnr:.4f}")
    print(f"None scores:                  {nones}")
    print(f"balanced accuracy (naive):    {naive.balanced_accuracy:.4f}")
    print(f"records/second:               {speed:.0f}")
    if args.folds > 1:
        held, naive_held, chosen = cross_validate(load(args.path), args.folds)
        print(
            f"\n{args.folds}-fold cross-validation over questions "
            "(tuned on K-1 folds, measured on the other):"
        )
        print(f"balanced accuracy (offline, held out): {held.balanced_accuracy:.4f}")
        print(f"TPR / TNR (held out):                  {held.tpr:.4f} / {held.tnr:.4f}")
        print(f"balanced accuracy (naive, same folds): {naive_held.balanced_accuracy:.4f}")
        settings = ", ".join(_setting(s) for s in chosen)
        print(f"chosen {_SETTING} per fold: {settings}")
    if args.halves:
        print("\nhalves of the questions (seed 0), settings chosen on one, measured on the other:")
        for name, chosen_setting, held, shipped in halves(load(args.path)):
            print(
                f"{name}: TPR {held.tpr:.4f} TNR {held.tnr:.4f} balanced {held.balanced_accuracy:.4f} "
                f"(chosen {_setting(chosen_setting)}); shipped defaults on the same half: "
                f"TPR {shipped.tpr:.4f} TNR {shipped.tnr:.4f}"
            )
        print(f"settings are {_SETTING}")
    for record, hallucinated, result in errors[: args.show_errors]:
        print(
            "\n---",
            record.id,
            "label:",
            "hallucinated" if hallucinated else "faithful",
            "score:",
            result.score,
        )
        print("Q:", record.query)
        print("A:", record.answer)
        for claim in result.details.get("claims", []):
            print(f"  [{claim['verdict']}] {claim['reason']} | evidence: {claim['evidence'][:120]}")
        if result.reason:
            print("  reason:", result.reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
