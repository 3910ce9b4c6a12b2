"""How well does Faithfulness + OfflineJudge separate faithful from hallucinated answers?

    python benchmarks/halueval_accuracy.py [PATH ...] [--guard FILE ...] [--show-errors N] [--folds K]
        [--halves]

Each PATH is a JSONL file of records (query, contexts, answer, label faithful|hallucinated), one shape per
file; by default the two labelled dev sets next to the repository: HaluEval QA (one-line answers) and
FaithBench (news summaries of several sentences). A record is predicted hallucinated when Faithfulness
labels it so (the default label rule, README "What 'hallucinated' means") or its score is None (nothing
could be verified). Also prints a naive baseline measured in the same run: faithful iff every content word
of the answer appears in the context.

Then the honest figures. Records are grouped by question and documents (every answer to one question and
every summary of one passage stay together: `calibration_half`'s key). The tuned settings are the judge's
thresholds (OfflineTuning: missing-word share, bare-answer length, alignment share), the decision threshold
and the label rule's min_confidence; ONE setting is chosen for all files together (the shipped default
must serve every shape): the best mean balanced accuracy over the files, among the settings that keep the
specificity of every file, and of every `--guard` file, at MIN_SPECIFICITY or more (if none does, the best
mean). A guard is a shape whose faithful answers must not be flagged but whose balanced accuracy is not the
aim: e.g. the synthetic reworded summaries of benchmarks/offline_shapes.py --write (faithful summaries with
a third of their words replaced, which is what paraphrase looks like to a lexical judge). A record that
names its `half` (offline_shapes.py writes the half of the questions it was built from) keeps it.
`--folds K`: K-fold cross-validation over the groups, held-out predictions pooled per file. `--halves`: the
groups split by `calibration_half` (half 0 is also what calibrates the cascade's coefficients), chosen on
one half and measured on the other, in both directions, each direction reported per file beside the
shipped defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from _lockbox import DEV_SETS, locked, open_lockbox, reader

from tracescore.model import MetricResult, RagRecord
from tracescore.sample._calibration import calibration_half
from tracescore.score import faithfulness_label
from tracescore.score.judges import OfflineJudge, OfflineTuning
from tracescore.score.judges._offline_words import STOPWORDS
from tracescore.score.metrics import Faithfulness

DATA = Path(__file__).resolve().parents[1].parent / "shared/data"
DEFAULT_PATHS = (DATA / "halueval_qa_dev.jsonl", DATA / "faithbench_dev.jsonl")
MIN_SPECIFICITY = 0.6
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

    def line(self) -> str:
        return f"balanced {self.balanced_accuracy:.3f} TPR {self.tpr:.3f} TNR {self.tnr:.3f}"


@dataclass(frozen=True)
class Row:
    record: RagRecord
    hallucinated: bool
    group: tuple[str, tuple[str, ...]]  # question and documents: its answers are never split apart
    half: int


def load(path: Path, lockbox: bool = False) -> list[Row]:
    """The file's records; of a dev set, the open part, or with `lockbox` the lockbox only."""
    rows, reads = [], reader(path, lockbox)
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                raw = json.loads(line)
                if not reads(raw["contexts"]):
                    continue
                record = RagRecord(
                    id=raw.get("id"),
                    query=raw["query"],
                    contexts=tuple(raw["contexts"]),
                    answer=raw["answer"],
                )
                half = raw.get("half")
                if half not in (0, 1):
                    half = calibration_half(record.query, record.contexts)
                rows.append(
                    Row(record, raw["label"] == "hallucinated", (record.query, record.contexts), half)
                )
    return rows


def naive_is_hallucinated(record: RagRecord) -> bool:
    """The baseline: hallucinated unless every answer content word occurs somewhere in the context."""
    context = {w.lower() for c in record.contexts for w in _WORD.findall(c)}
    content = [w.lower() for w in _WORD.findall(record.answer) if w.lower() not in STOPWORDS]
    return not all(w in context for w in content)


async def score_all(records: list[RagRecord], tuning: OfflineTuning | None = None) -> list[MetricResult]:
    metric, judge = Faithfulness(), OfflineJudge(tuning)
    return await asyncio.gather(*(metric.score(r, judge) for r in records))


# The search space: the judge's tuned thresholds (missing share, bare-answer words, alignment share), the
# decision threshold and the label rule's min_confidence.
MISSING_SHARES = (0.15, 0.25, 0.34, 0.5)
# Fixed: a bare answer is told from a statement by English cues (no auxiliary, pronoun or verb), so a
# longer limit reads statements of other languages as bare answers ("La capitale de la France est Paris.").
FRAGMENT_WORDS = (6,)
ALIGN_SHARES = (0.34, 0.5, 0.67)
DECISION_THRESHOLDS = (0.1, 0.25, 0.4, 0.5)
MIN_CONFIDENCES = (0.3, 0.5, 0.7, 0.9)
Tuning = tuple[float, int, float]
# A judge variant's key (a Tuning here; benchmarks/offline_semantic.py adds its own) + (decision threshold,
# min_confidence).
Setting = tuple[object, ...]
Scores = dict[tuple[object, ...], list[MetricResult]]  # per judge variant, one result per row of one file


def _predict(result: MetricResult, threshold: float, min_confidence: float) -> bool:
    """The label rule at these settings; an unscored record counts as hallucinated."""
    if result.score is None:
        return True
    claims = result.details.get("claims") or []
    label = faithfulness_label(result.score, claims, threshold=threshold, min_confidence=min_confidence)
    return label == "hallucinated"


@dataclass(frozen=True)
class Shape:
    """One labelled file, its results under every judge tuning, and whether it only guards specificity."""

    name: str
    rows: list[Row]
    scores: Scores
    guard: bool = False

    def confusion(self, setting: Setting, at: list[int]) -> Confusion:
        results, confusion = self.scores[setting[:-2]], Confusion()
        threshold, min_confidence = float(setting[-2]), float(setting[-1])
        for i in at:
            confusion.add(self.rows[i].hallucinated, _predict(results[i], threshold, min_confidence))
        return confusion


def _choose(shapes: list[Shape], train: list[list[int]]) -> Setting:
    """One setting for every shape: the best mean balanced accuracy over the shapes that are no guards on
    `train` (row indices per shape), among those keeping every shape's specificity at MIN_SPECIFICITY (the
    first best on ties). The judge variants are those every shape was scored with, in that order."""
    best: tuple[bool, float] | None = None
    chosen: Setting | None = None
    for tuning in shapes[0].scores:
        for threshold, confidence in itertools.product(DECISION_THRESHOLDS, MIN_CONFIDENCES):
            setting = (*tuning, threshold, confidence)
            held = [shape.confusion(setting, at) for shape, at in zip(shapes, train, strict=True)]
            aims = [c for shape, c in zip(shapes, held, strict=True) if not shape.guard]
            key = (
                all(c.tnr >= MIN_SPECIFICITY for c in held),
                statistics.mean(c.balanced_accuracy for c in aims),
            )
            if best is None or key > best:
                best, chosen = key, setting
    assert chosen is not None
    return chosen


def _all_scores(rows: list[Row]) -> Scores:
    records = [r.record for r in rows]
    return {
        tuning: asyncio.run(score_all(records, OfflineTuning(*tuning)))
        for tuning in itertools.product(MISSING_SHARES, FRAGMENT_WORDS, ALIGN_SHARES)
    }


def shipped() -> Setting:
    defaults, metric = OfflineTuning(), Faithfulness()
    return (
        defaults.missing_share,
        defaults.fragment_words,
        defaults.align_share,
        metric.threshold,
        metric.min_confidence,
    )


def halves(
    shapes: list[Shape], default: Setting | None = None
) -> list[tuple[str, Setting, list[Confusion], list[Confusion]]]:
    """Per direction: (name, the setting chosen on one half, its confusion per shape on the other half, the
    shipped defaults' (or `default`'s) confusion per shape on that half)."""
    default = default or shipped()
    a = [[i for i, r in enumerate(shape.rows) if r.half == 0] for shape in shapes]
    b = [[i for i, r in enumerate(shape.rows) if r.half == 1] for shape in shapes]
    out = []
    for name, train, test in (
        ("chosen on half 0, measured on half 1", a, b),
        ("chosen on half 1, measured on half 0", b, a),
    ):
        chosen = _choose(shapes, train)
        held = [shape.confusion(chosen, at) for shape, at in zip(shapes, test, strict=True)]
        ship = [shape.confusion(default, at) for shape, at in zip(shapes, test, strict=True)]
        out.append((name, chosen, held, ship))
    return out


def cross_validate(shapes: list[Shape], folds: int) -> tuple[list[Confusion], list[Setting]]:
    """(pooled held-out confusion per shape, the setting chosen per fold). Groups are dealt to folds round
    robin in sorted order, per shape."""
    fold_of = [
        {g: i % folds for i, g in enumerate(sorted({r.group for r in shape.rows}))} for shape in shapes
    ]
    pooled = [Confusion() for _ in shapes]
    chosen = []
    for fold in range(folds):
        train = [
            [i for i, r in enumerate(shape.rows) if f[r.group] != fold]
            for shape, f in zip(shapes, fold_of, strict=True)
        ]
        test = [
            [i for i, r in enumerate(shape.rows) if f[r.group] == fold]
            for shape, f in zip(shapes, fold_of, strict=True)
        ]
        setting = _choose(shapes, train)
        chosen.append(setting)
        for shape, at, total in zip(shapes, test, pooled, strict=True):
            held = shape.confusion(setting, at)
            total.tp, total.fn = total.tp + held.tp, total.fn + held.fn
            total.tn, total.fp = total.tn + held.tn, total.fp + held.fp
    return pooled, chosen


_SETTING = "(missing share, bare-answer words, alignment share, decision threshold, min_confidence)"


def _setting(setting: Setting) -> str:
    return "(" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in setting) + ")"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=list(DEFAULT_PATHS))
    parser.add_argument(
        "--guard",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a shape whose specificity must stay >= MIN_SPECIFICITY too (repeatable)",
    )
    parser.add_argument(
        "--show-errors", type=int, default=0, metavar="N", help="print N misclassified records per file"
    )
    parser.add_argument("--folds", type=int, default=0, help="cross-validation folds over groups (0: skip)")
    parser.add_argument(
        "--halves", action="store_true", help="also: choose on one half of the groups, measure on the other"
    )
    parser.add_argument(
        "--lockbox",
        action="store_true",
        help="score the dev sets' lockbox only, with the shipped defaults (once per change; recorded)",
    )
    args = parser.parse_args(argv)
    missing = [p for p in [*args.paths, *args.guard] if not p.exists()]
    if missing:
        print(f"no such file: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    if args.lockbox and (args.show_errors or args.folds or args.halves or args.guard):
        print("--lockbox scores the shipped defaults only: no --show-errors, --folds, --halves or --guard")
        return 2
    if args.lockbox:
        if not any(locked(p) for p in args.paths):
            print(f"--lockbox: none of the files is a dev set ({', '.join(sorted(DEV_SETS))})")
            return 2
        open_lockbox(args.paths)
    loaded = [load(path, args.lockbox) for path in args.paths]
    for path, rows in zip(args.paths, loaded, strict=True):
        started = time.perf_counter()
        results = asyncio.run(score_all([r.record for r in rows]))
        speed = len(rows) / max(time.perf_counter() - started, 1e-9)
        offline, naive = Confusion(), Confusion()
        errors = []
        for row, result in zip(rows, results, strict=True):
            predicted = result.score is None or result.label == "hallucinated"
            offline.add(row.hallucinated, predicted)
            naive.add(row.hallucinated, naive_is_hallucinated(row.record))
            if predicted != row.hallucinated:
                errors.append((row, result))
        groups = [len({r.group for r in rows if r.half == h}) for h in (0, 1)]
        part = (
            ("the lockbox" if args.lockbox else "the open part, lockbox left out") if locked(path) else "all"
        )
        print(f"{path.name} ({part}): {len(rows)} records, {sum(r.hallucinated for r in rows)} hallucinated")
        print(
            f"  split by question and documents: half 0 {sum(r.half == 0 for r in rows)} records / "
            f"{groups[0]} groups, half 1 {sum(r.half == 1 for r in rows)} / {groups[1]}"
        )
        print(
            f"  shipped defaults, all records:  {offline.line()}  (None scores: "
            f"{sum(r.score is None for r in results)}, {speed:.0f} records/s)"
        )
        print(f"  naive rule, all records:        {naive.line()}")
        for row, result in errors[: args.show_errors]:
            label = "hallucinated" if row.hallucinated else "faithful"
            print("\n  ---", row.record.id, "label:", label, "score:", result.score)
            for claim in result.details.get("claims", []):
                print(f"    [{claim['verdict']}] {claim['reason']} | evidence: {claim['evidence'][:100]}")
    if args.folds > 1 or args.halves:
        shapes = [Shape(p.name, rows, _all_scores(rows)) for p, rows in zip(args.paths, loaded, strict=True)]
        for path in args.guard:
            rows = load(path)
            shapes.append(Shape(f"{path.name} (guard)", rows, _all_scores(rows), guard=True))
        print(f"\nsettings are {_SETTING}; shipped {_setting(shipped())}")
        print(
            "one setting for all files: best mean balanced accuracy, specificity >= "
            f"{MIN_SPECIFICITY} each (guards included)"
        )
        if args.folds > 1:
            pooled, chosen = cross_validate(shapes, args.folds)
            print(f"\n{args.folds}-fold cross-validation over groups, held-out predictions pooled:")
            for shape, confusion in zip(shapes, pooled, strict=True):
                print(f"  {shape.name}: {confusion.line()}")
            print(f"  chosen per fold: {', '.join(_setting(s) for s in chosen)}")
        if args.halves:
            print("\nhalves (calibration_half), chosen on one, measured on the other:")
            for direction, setting, held, ship in halves(shapes):
                print(f"  {direction}: chosen {_setting(setting)}")
                for shape, confusion, default in zip(shapes, held, ship, strict=True):
                    print(f"    {shape.name}: {confusion.line()}   | shipped defaults: {default.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
