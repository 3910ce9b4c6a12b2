"""Would another stemmer let the offline judge align faithful rewordings without losing sensitivity? (issue
34 item 3)

    python benchmarks/offline_stemmer.py [PATH ...] [--guard FILE ...] [--folds K (0: none)]

The judge keys every content word by a stem (tracescore/score/judges/_offline_text.py `_stem`: a
hand-written suffix stripper, `_strip`, after an irregular-verb table), and a claim aligns with the context
sentences that state its keys. A word whose inflections key apart does not align: before `_stem` wrote a
final "ll" as "l", "cancelled" keyed to "cancell" and "cancel" to "cancel" (`_undouble` undoubles "bgmnprt",
not "l"). Variants, each in place of `_stem` (the rest of the judge's normalisation, accents, numbers,
negation and the irregular-verb table, unchanged):

- today's judge (offline_semantic.py's OFF): `_strip`, and every key's final "ll" written "l" ("kill" and
  "killed" both "kil", "cancel" and "cancelled" both "cancel"): no guard needed, since base and inflected
  forms change alike.
- `before`: `_strip` alone, the stemmer before that.
- `undouble_l`: `_strip`, and a doubled "l" before -ed / -ing undoubled when the word before it has two
  vowel groups or more ("cancelled", "travelling", "labelled"; "killed", "called", "spelled" keep theirs;
  "installed" loses its "ll" where "install" keeps it, the cost of such a guard).
- `snowball`: the Snowball English (Porter2) stemmer (PyPI `snowballstemmer`, BSD) after the table.

The choice is halueval_accuracy.py's on the same open part (lockbox left out), through offline_semantic.py's
`report_choice`: the variant one more dimension, today's judge included, the judge's tuning at its shipped
values. Also printed: each variant at the shipped settings and how many claims each changes, by class.
The variants patch the module's `_stem` (and the keys computed from it at import) in this process only.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache

from halueval_accuracy import Shape, load
from offline_semantic import OFF
from offline_wordnet import arguments, changed, report

import tracescore.score.judges._offline_claim as claim_module
import tracescore.score.judges._offline_text as text_module
from tracescore.model import MetricResult, RagRecord
from tracescore.score.judges import OfflineJudge
from tracescore.score.judges._offline_words import FRAMING_WORDS, IRREGULAR_VERBS, SOURCE_WORDS
from tracescore.score.metrics import Faithfulness

VARIANTS = ("before", "undouble_l", "snowball")
_VOWELS = set("aeiouy")
before = text_module._strip


def _vowel_groups(word: str) -> int:
    return sum(1 for i, c in enumerate(word) if c in _VOWELS and (i == 0 or word[i - 1] not in _VOWELS))


def undouble_l(word: str) -> str:
    key = before(word)
    if word.endswith(("lled", "lling")) and key.endswith("ll") and _vowel_groups(key[:-2]) >= 2:
        return key[:-1]
    return key


def snowball() -> Callable[[str], str]:
    import snowballstemmer

    english = snowballstemmer.stemmer("english")
    return lambda word: english.stemWord(IRREGULAR_VERBS.get(word, word))


def stemmers() -> dict[str, Callable[[str], str]]:
    return {"before": before, "undouble_l": undouble_l, "snowball": snowball()}


@contextmanager
def stemming(stem: Callable[[str], str]) -> Iterator[None]:
    """The judge with `stem` in place of `_stem`: the cached passages dropped, the import-time keys redone."""

    def apply(function: Callable[[str], str]) -> None:
        text_module._stem = function  # type: ignore[assignment]
        text_module._index_block.cache_clear()
        claim_module._FRAMING = text_module.keys(" ".join(FRAMING_WORDS))
        claim_module._SOURCE = text_module.keys(" ".join(SOURCE_WORDS))

    today = text_module._stem
    apply(lru_cache(maxsize=65536)(stem))
    try:
        yield
    finally:
        apply(today)


async def score_all(records: list[RagRecord]) -> list[MetricResult]:
    metric, judge = Faithfulness(), OfflineJudge()
    return await asyncio.gather(*(metric.score(r, judge) for r in records))


def main(argv: list[str] | None = None) -> int:
    files, folds = arguments(__doc__, argv)
    found = stemmers()
    every = {"today": text_module._stem, **found}
    for word in ("cancel", "cancelled", "kill", "killed", "travelling", "installed", "install"):
        print(f"  {word}: " + ", ".join(f"{name} {stem(word)}" for name, stem in every.items()))
    print(f"settings: (stemmer variant, decision threshold, min_confidence); {OFF} is today's judge")
    shapes = []
    for path, guard in files:
        rows = load(path)
        base = asyncio.run(score_all([r.record for r in rows]))
        scores: dict[tuple[object, ...], list[MetricResult]] = {OFF: base}
        for variant in VARIANTS:
            with stemming(found[variant]):
                scores[(variant,)] = asyncio.run(score_all([r.record for r in rows]))
            print(f"{path.name} {variant} changed: {changed(rows, base, scores[(variant,)])}")
        shapes.append(Shape(path.name + (" (guard)" if guard else ""), rows, scores, guard))
    return report(shapes, folds)


if __name__ == "__main__":
    sys.exit(main())
