"""Does the label rule lose specificity when long answers grow longer, or come from other models? (issue 34)

    python benchmarks/offline_shift.py [FAITHBENCH.jsonl] [--repeats N] [--seed S] [--cap N]
        [--criterion balanced|target|both]

The label rule flags an answer when ANY claim looks unsupported (a confidence >= min_confidence) or its
score is under the decision threshold. If each faithful claim has a small chance p of looking unsupported,
a faithful answer of n claims is flagged with chance ~1-(1-p)^n: specificity falls as answers grow, and
settings chosen on shorter answers do not hold on longer ones. The file is any labelled JSONL of long
answers (query, contexts, answer, label; `summarizer` names the model that wrote an answer, "?" if absent);
of the FaithBench dev set, the open part only (benchmarks/_lockbox.py: the lockbox is never read here).
The judge is the offline judge at its shipped tuning (every fold of halueval_accuracy.py chooses it).

1. The shipped rule by stratum: claim count, answer length and summarising model; the faithful answers'
   per-claim rate of a counted unsupported claim, and what 1-(1-p)^n predicts from it.
2. Shift splits. Each repeat halves the passages at random (A, B: a passage's summaries stay together) and,
   for the model split, the models too (M1, M2). A rule's settings are chosen on A's part and measured on
   B's part of another shape, beside a control on B of the training shape (the same passages, no shift):
   - `length`: chosen on A's short answers (claims <= the median), measured on B's long ones; control B's
     short ones.
   - `doubled`, `tripled`: chosen on A's answers, measured on B's answers joined 2 or 3 at a time per
     passage (hallucinated if any part is; `--cap` bounds the joins with a hallucinated part per passage,
     every all-faithful join is kept); control B's answers.
   - `models`: chosen on A's answers by M1, measured on B's by M2; control B's by M1.
   - `passages`: chosen on A, measured on B (no shape shift, the reference).
   Two choices, each on the training part: `balanced`, halueval_accuracy.py's (the best balanced accuracy
   keeping specificity >= MIN_SPECIFICITY), and `target` (the best specificity keeping sensitivity >=
   TARGET_SENSITIVITY). Confusions are pooled over the repeats.
3. Candidate rules, each a family of settings chosen that way (benchmarks/_shift_rules.py):
   - `today`: the shipped rule (decision threshold x min_confidence).
   - `score`: the decision threshold alone (no claim counts on its own).
   - `per-claim`: the score threshold, and a claim counts only at a confidence whose per-claim false-flag
     rate p(c), measured on the training part's faithful claims, keeps 1-(1-p(c))^n <= alpha for the
     answer's n claims: the bar rises with the claim count, so the answer-level rate does not.
   - `mean-lr`: no minimum at all: each claim's verdict band (supported, partly, unsupported by confidence)
     has a likelihood ratio hallucinated / faithful fitted on the training part, and the answer is flagged
     when the MEAN over its claims reaches lambda (an answer with one bad claim among n: the mixture's
     likelihood ratio is that mean; for faithful answers its expectation is 1 at every length).
   - `mixture`: the same ratios, each claim wrong with chance r in a hallucinated answer: flagged when
     the sum of log(1 + r (LR - 1)) over the claims reaches a bar (r and the bar chosen).
4. The gate: a candidate would replace today's rule only if, on every scenario's shifted part, its
   sensitivity stays >= 0.65 and its specificity beats today's rule chosen the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from _lockbox import reader
from _shift_rules import FAMILIES, Answer, Family, answer_of
from halueval_accuracy import DATA, MIN_SPECIFICITY, Confusion, Row, load, score_all

from tracescore.score.metrics import Faithfulness

DEFAULT_PATH = DATA / "faithbench_dev.jsonl"
LENGTH_BINS = ((1, 2), (3, 3), (4, 5), (6, 1_000))
TARGET_SENSITIVITY = 0.7
GATE_SENSITIVITY = 0.65
JOINED = {2: "doubled", 3: "tripled"}


def joined(rows: list[Row], k: int, cap: int) -> list[Row]:
    """Longer answers of the same passages: k answers to one passage joined into one (hallucinated if any
    is). Per passage every combination of k faithful answers, and up to `cap` of the others (seeded)."""
    rng, out = random.Random(k), []
    by_passage: dict[tuple[str, ...], list[Row]] = defaultdict(list)
    for row in rows:
        by_passage[row.record.contexts].append(row)
    for group in by_passage.values():
        combos = list(itertools.combinations(group, k))
        faithful = [c for c in combos if not any(r.hallucinated for r in c)]
        others = [c for c in combos if any(r.hallucinated for r in c)]
        for combo in faithful + rng.sample(others, min(cap, len(others))):
            answer = "\n\n".join(r.record.answer for r in combo)
            first = combo[0]
            record = first.record.model_copy(update={"answer": answer})
            out.append(Row(record, any(r.hallucinated for r in combo), first.group, first.half))
    return out


def answers(path: Path, cap: int) -> tuple[list[Answer], dict[int, list[Answer]]]:
    """The file's answers (open part of a dev set) scored by the shipped offline judge; and, per k in
    JOINED, its answers joined k at a time (`joined`)."""
    rows, reads = load(path), reader(path)
    models: dict[str | None, str] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip() and reads((raw := json.loads(line))["contexts"]):
                models[raw.get("id")] = raw.get("summarizer") or "?"
    out = []
    for part in (rows, *(joined(rows, k, cap) for k in JOINED)):
        results = asyncio.run(score_all([r.record for r in part]))
        out.append(
            [
                answer_of(row, result, models.get(row.record.id, "?"))
                for row, result in zip(part, results, strict=True)
                if result.score is not None
            ]
        )
    return out[0], dict(zip(JOINED, out[1:], strict=True))


def confusion(items: Sequence[Answer], predict: Callable[[Answer], bool]) -> Confusion:
    out = Confusion()
    for item in items:
        out.add(item.hallucinated, predict(item))
    return out


def _balanced(c: Confusion) -> tuple[bool, float]:
    """halueval_accuracy.py's choice: the best balanced accuracy keeping specificity >= 0.6."""
    return c.tnr >= MIN_SPECIFICITY, c.balanced_accuracy


def _target(c: Confusion) -> tuple[bool, float]:
    """The issue's target read as a choice: the best specificity keeping sensitivity >= 0.7
    (the target's 0.65 with a margin)."""
    return c.tpr >= TARGET_SENSITIVITY, c.tnr if c.tpr >= TARGET_SENSITIVITY else c.tpr


CRITERIA: dict[str, Callable[[Confusion], tuple[bool, float]]] = {"balanced": _balanced, "target": _target}


def choose(family: Family, train: Sequence[Answer], criterion: str) -> Callable[[Answer], bool]:
    """The family's setting that the criterion ranks first on `train` (the first of equals)."""
    fitted, key = family.fit(train), CRITERIA[criterion]
    best, chosen = None, None
    for setting in family.settings:
        rank = key(confusion(train, lambda a, s=setting: fitted(a, s)))
        if best is None or rank > best:
            best, chosen = rank, setting
    return lambda a: fitted(a, chosen)


def strata(items: list[Answer]) -> None:
    shipped = Faithfulness()
    flag = FAMILIES["today"].fit(items)
    setting = (shipped.threshold, shipped.min_confidence)
    faithful = [a for a in items if not a.hallucinated]
    counted = sum(
        c.unsupported and c.confidence >= shipped.min_confidence for a in faithful for c in a.claims
    )
    p = counted / max(1, sum(len(a.claims) for a in faithful))
    print(f"1. the shipped rule {setting} by stratum (faithful claims counted unsupported: p = {p:.3f})")
    print(
        "   stratum                          answers  halluc.  sensitivity  specificity  any-claim flags "
        "(faithful)  1-(1-p)^n  score flags (faithful)"
    )
    median_chars = statistics.median(len(a.text) for a in items)
    groups: dict[str, list[Answer]] = defaultdict(list)
    for a in items:
        low, high = next(b for b in LENGTH_BINS if b[0] <= len(a.claims) <= b[1])
        groups[f"claims {low}-{high}" if high < 1_000 else f"claims {low}+"].append(a)
        longer = len(a.text) > median_chars
        groups[f"chars > {median_chars:.0f}" if longer else f"chars <= {median_chars:.0f}"].append(a)
        groups[f"model {a.model.split('/')[-1]}"].append(a)
    for name, group in sorted(groups.items(), key=lambda kv: (kv[0].split()[0] == "model", kv[0])):
        c = confusion(group, lambda a: flag(a, setting))
        neg = [a for a in group if not a.hallucinated]
        anyc = sum(a.counted(shipped.min_confidence) > 0 for a in neg) / max(1, len(neg))
        low = sum(a.score < shipped.threshold for a in neg) / max(1, len(neg))
        expect = statistics.mean(1 - (1 - p) ** len(a.claims) for a in neg) if neg else 0.0
        print(
            f"   {name[:32]:<32} {len(group):>7}  {c.tp + c.fn:>7}  {c.tpr:>11.3f}  {c.tnr:>11.3f}  "
            f"{anyc:>26.3f}  {expect:>9.3f}  {low:>22.3f}"
        )


Split = tuple[str, list[Answer], list[Answer], list[Answer]]


def splits(items: list[Answer], longer: dict[int, list[Answer]], repeats: int, seed: int) -> Iterator[Split]:
    """Per repeat, per scenario: (scenario, train, test, control)."""
    rng = random.Random(seed)
    passages = sorted({a.passage for a in items})
    models = sorted({a.model for a in items})
    median = statistics.median(len(a.claims) for a in items)
    for _ in range(repeats):
        side_a = set(rng.sample(passages, len(passages) // 2))
        m1 = set(rng.sample(models, len(models) // 2))
        a = [x for x in items if x.passage in side_a]
        b = [x for x in items if x.passage not in side_a]
        short = [x for x in b if len(x.claims) <= median]
        yield "length", [x for x in a if len(x.claims) <= median], [x for x in b if x not in short], short
        for k, name in JOINED.items():
            yield name, a, [x for x in longer[k] if x.passage not in side_a], b
        by_m1 = [x for x in b if x.model in m1]
        yield "models", [x for x in a if x.model in m1], [x for x in b if x not in by_m1], by_m1
        yield "passages", a, b, b


SCENARIOS = {
    "length": "chosen on A's short answers, measured on B's long ones (control: B's short ones)",
    "doubled": "chosen on A's answers, measured on B's answers joined two at a time (control: B's answers)",
    "tripled": "chosen on A's answers, measured on B's answers joined three at a time (control: B's answers)",
    "models": "chosen on A's answers by half the models, measured on B's by the others (control: B's by the "
    "first half)",
    "passages": "chosen on A, measured on B (no shape shift)",
}
SHIPPED = "shipped (0.4, 0.5)"


def shift(
    items: list[Answer], longer: dict[int, list[Answer]], repeats: int, seed: int, criterion: str
) -> None:
    median = statistics.median(len(a.claims) for a in items)
    words = " ".join((CRITERIA[criterion].__doc__ or "").split()).split(": ", 1)[-1].rstrip(".")
    print(
        f"\n2. shift splits, choice `{criterion}` ({words}):"
        f" {repeats} repeats (seed {seed}), passages halved at random (A, B), models too; short = claims <= "
        f"{median:g}; pooled over repeats: sensitivity / specificity (balanced accuracy); specificity "
        "10th-90th percentile over repeats"
    )
    pooled: dict[tuple[str, str, str], Confusion] = defaultdict(Confusion)
    spread: dict[tuple[str, str], list[float]] = defaultdict(list)
    shipped = Faithfulness()
    fixed = FAMILIES["today"].fit(items)
    for scenario, train, test, control in splits(items, longer, repeats, seed):
        rules = {SHIPPED: lambda a: fixed(a, (shipped.threshold, shipped.min_confidence))}
        rules |= {name: choose(family, train, criterion) for name, family in FAMILIES.items()}
        for name, predict in rules.items():
            for part, at in (("train", train), ("test", test), ("control", control)):
                got, into = confusion(at, predict), pooled[(scenario, name, part)]
                into.tp, into.fn, into.tn, into.fp = (
                    into.tp + got.tp,
                    into.fn + got.fn,
                    into.tn + got.tn,
                    into.fp + got.fp,
                )
                if part == "test":
                    spread[(scenario, name)].append(got.tnr)
    for scenario, words in SCENARIOS.items():
        print(f"   {scenario}: {words}")
        print(
            "     rule                chosen on (train)      shifted (test)         control (no shift)     "
            "spec. drop  test spec. 10-90%"
        )
        for name in (SHIPPED, *FAMILIES):
            row = [pooled[(scenario, name, part)] for part in ("train", "test", "control")]
            cells = "  ".join(f"{c.tpr:.3f} / {c.tnr:.3f} ({c.balanced_accuracy:.3f})" for c in row)
            deciles = statistics.quantiles(spread[(scenario, name)], n=10)
            print(
                f"     {name:<19} {cells}  {row[2].tnr - row[1].tnr:+10.3f}  "
                f"{deciles[0]:.2f}-{deciles[-1]:.2f}"
            )
    print("   gate (shifted parts, every scenario): lowest sensitivity; specificity against today's rule")
    for name in FAMILIES:
        if name == "today":
            continue
        tests = {s: (pooled[(s, name, "test")], pooled[(s, "today", "test")]) for s in SCENARIOS}
        lowest = min(mine.tpr for mine, _ in tests.values())
        gains = ", ".join(f"{s} {mine.tnr - today.tnr:+.3f}" for s, (mine, today) in tests.items())
        passes = lowest >= GATE_SENSITIVITY and all(m.tnr > t.tnr for m, t in tests.values())
        verdict = "PASSES" if passes else "fails"
        print(f"     {name:<10} lowest sensitivity {lowest:.3f}; specificity {gains}: {verdict}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--repeats", type=int, default=200, help="random passage / model halvings")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cap", type=int, default=30, help="joined answers with a hallucinated part, at most, per passage"
    )
    parser.add_argument("--criterion", choices=[*CRITERIA, "both"], default="both")
    args = parser.parse_args(argv)
    if not args.path.exists():
        print(f"no such file: {args.path}", file=sys.stderr)
        return 2
    items, longer = answers(args.path, args.cap)
    hallucinated = sum(a.hallucinated for a in items)
    print(
        f"{args.path.name} (the open part, lockbox left out): {len(items)} scored answers, {hallucinated} "
        f"hallucinated, {len({a.passage for a in items})} passages, {len({a.model for a in items})} models"
    )
    for k, joins in longer.items():
        print(
            f"{JOINED[k]}: {k} answers to one passage joined, {len(joins)} "
            f"({sum(a.hallucinated for a in joins)} "
            f"hallucinated; mean claims {statistics.mean(len(a.claims) for a in joins):.1f}, the answers' "
            f"{statistics.mean(len(a.claims) for a in items):.1f})"
        )
    strata(items)
    for criterion in CRITERIA if args.criterion == "both" else (args.criterion,):
        shift(items, longer, args.repeats, args.seed, criterion)
    return 0


if __name__ == "__main__":
    sys.exit(main())
