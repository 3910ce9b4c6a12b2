"""Would WordNet synonyms and derived forms lift the offline judge's specificity on long answers? (issue 34
item 3)

    NLTK_DATA=DIR python benchmarks/offline_wordnet.py [PATH ...] [--guard FILE ...] [--folds K (0: none)]

Not part of any install: it needs `nltk` and WordNet 3.0's dict files as an NLTK data folder
(DIR/corpora/wordnet: Debian's wordnet-base and wordnet-sense-index files, plus the `lexnames` file NLTK's
reader opens; nothing is downloaded at run time). WordNet 3.0's licence is Princeton's permissive one.

The candidate: a lowercase word of a claim that the context lacks counts as stated when the context
states a word of the same meaning (IndexedContext's lexicon hook), so a faithful answer that rewords its
source aligns with it. Names and figures are never matched. Variants, each including the ones before:
`derived` (the word's base form and its derivationally related forms and pertainyms: "destruction" /
"destroy", "economic" / "economy"), `syn1` (plus the synonyms of each part of speech's first, most
frequent sense), `syn` (plus the synonyms of every sense), `hypo` (plus the words one level more specific:
the answer generalises, "doctor" for the context's "surgeon").

The choice is halueval_accuracy.py's on the same open part (lockbox left out), through
offline_semantic.py's `report_choice`: the variant one more dimension, today's judge ("off") included, the
judge's tuning at its shipped values. Also printed: each variant at the shipped settings, how many claims
each variant changes, by class, the word pairs it links, and each variant's time against the judge
alone (a rough figure: the first pass, the judge alone, also fills the passage cache).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

from halueval_accuracy import DEFAULT_PATHS, Row, Shape, load
from offline_semantic import OFF, report_choice, report_shipped

from tracescore.model import MetricResult, RagRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import Faithfulness

VARIANTS = ("derived", "syn1", "syn", "hypo")
_WORD = re.compile(r"[a-z]+", re.I)
Lexicon = Callable[[str], Iterable[str]]  # the judge's hook: OfflineJudge(lexicon=...)


def lexicons() -> dict[str, Lexicon]:
    from nltk.corpus import wordnet as wn

    def single(name: str) -> str | None:
        return name if "_" not in name and "-" not in name and name.islower() else None

    def lemma_names(synsets: Iterable) -> list[str]:  # type: ignore[type-arg]
        return [n for s in synsets for n in (single(lemma.name()) for lemma in s.lemmas()) if n]

    @cache
    def related(word: str, variant: str) -> tuple[str, ...]:
        synsets = wn.synsets(word)
        own = [lemma for s in synsets for lemma in s.lemmas() if lemma.name().casefold() == word]
        bases = dict.fromkeys(b for pos in "nvar" if (b := wn.morphy(word, pos)))
        out = [*bases]
        # NLTK keeps a lemma's pointers in sets: sorted, so that every run links the same words
        out += sorted(
            n
            for lemma in own
            for r in (*lemma.derivationally_related_forms(), *lemma.pertainyms())
            if (n := single(r.name()))
        )
        if variant in ("syn1", "syn", "hypo"):
            firsts = {}
            for s in synsets:
                firsts.setdefault(s.pos(), s)
            out += lemma_names(firsts.values() if variant == "syn1" else synsets)
        if variant == "hypo":
            out += sorted(lemma_names(h for s in synsets for h in s.hyponyms()))
        return tuple(dict.fromkeys(w for w in out if w != word))

    return {v: (lambda word, v=v: related(word, v)) for v in VARIANTS}


async def score_all(records: list[RagRecord], lexicon: Lexicon | None) -> list[MetricResult]:
    metric, judge = Faithfulness(), OfflineJudge(lexicon=lexicon)
    return await asyncio.gather(*(metric.score(r, judge) for r in records))


def links(rows: list[Row], lexicon: Lexicon) -> str:
    """The lookups that found a word of the record's context, by class: how many a summary, the commonest
    pairs (a claim's word, the lexicon's word)."""
    found: dict[bool, Counter[tuple[str, str]]] = {False: Counter(), True: Counter()}
    for row in rows:
        stated = {w.casefold() for c in row.record.contexts for w in _WORD.findall(c)}
        hits: set[tuple[str, str]] = set()

        def recording(
            word: str, stated: set[str] = stated, hits: set[tuple[str, str]] = hits
        ) -> Iterable[str]:
            related = tuple(lexicon(word))
            hit = next((w for w in related if w in stated), None)  # the context's words as written
            if hit is not None:
                hits.add((word, hit))
            return related

        asyncio.run(score_all([row.record], recording))
        found[row.hallucinated].update(hits)
    out = []
    for hallucinated, pairs in found.items():
        answers = sum(r.hallucinated == hallucinated for r in rows) or 1
        common = ", ".join(f"{a}/{b} {n}" for (a, b), n in pairs.most_common(6))
        name = "hallucinated" if hallucinated else "faithful"
        out.append(f"{name} {pairs.total()} ({pairs.total() / answers:.2f} an answer): {common}")
    return "; ".join(out)


def changed(rows: list[Row], base: list[MetricResult], other: list[MetricResult]) -> str:
    """How many claims the variant judges differently, and how many answers' labels flip, by class."""
    out = []
    for hallucinated in (False, True):
        claims = answers = flips = 0
        for row, a, b in zip(rows, base, other, strict=True):
            if row.hallucinated != hallucinated:
                continue
            ca, cb = a.details.get("claims") or [], b.details.get("claims") or []
            n = sum(x["verdict"] != y["verdict"] for x, y in zip(ca, cb, strict=False))
            claims, answers = claims + n, answers + (n > 0)
            flips += a.label != b.label
        name = "hallucinated" if hallucinated else "faithful"
        out.append(f"{name}: {claims} claims in {answers} answers, {flips} labels")
    return "; ".join(out)


def arguments(doc: str, argv: list[str] | None) -> tuple[list[tuple[Path, bool]], int]:
    """A variant benchmark's command line: (each file, whether it is a guard), the folds to choose over."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=list(DEFAULT_PATHS))
    parser.add_argument("--guard", type=Path, action="append", default=[], metavar="FILE")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    return [*((p, False) for p in args.paths), *((g, True) for g in args.guard)], args.folds


def report(shapes: list[Shape], folds: int) -> int:
    if folds > 1:  # 0: too few records to choose on (a check)
        report_choice(shapes, folds)
    report_shipped(shapes)
    return 0


def main(argv: list[str] | None = None) -> int:
    files, folds = arguments(__doc__, argv)
    started = time.perf_counter()
    found = lexicons()
    found["derived"]("loaded")
    print(f"WordNet loaded in {time.perf_counter() - started:.1f} s")
    print(f"settings: (lexicon variant, decision threshold, min_confidence); {OFF} is today's judge")
    shapes = []
    for path, guard in files:
        rows = load(path)
        records = [r.record for r in rows]
        started = time.perf_counter()
        base = asyncio.run(score_all(records, None))
        alone = time.perf_counter() - started
        scores: dict[tuple[object, ...], list[MetricResult]] = {OFF: base}
        for variant in VARIANTS:
            started = time.perf_counter()
            scores[(variant,)] = asyncio.run(score_all(records, found[variant]))
            took = time.perf_counter() - started
            print(
                f"{path.name} {variant}: {took / alone:.2f}x the judge alone (first pass: lookups uncached)"
            )
            print(f"  changed: {changed(rows, base, scores[(variant,)])}")
            print(f"  links: {links(rows, found[variant])}")
        shapes.append(Shape(path.name + (" (guard)" if guard else ""), rows, scores, guard))
    return report(shapes, folds)


if __name__ == "__main__":
    sys.exit(main())
