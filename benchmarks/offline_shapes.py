"""Does the offline judge stay specific on answers shaped unlike the dev set's one-line QA answers?

    python benchmarks/offline_shapes.py [PATH] [--group 4] [--seed 0] [--rule any_unsupported|threshold]
        [--write DIR]

`--write DIR` writes each shape as labelled JSONL in the dev set's format (DIR/long.jsonl, summary.jsonl,
paraphrase.jsonl, reworded.jsonl: query, contexts, answer, label), e.g. for benchmarks/cascade_sampling.py,
and exits without scoring.

Builds three shapes from a labelled QA file in the dev set's format (query, contexts, answer, label; by
default the HaluEval QA dev set), each from groups of `--group` questions whose contexts are joined into
one long document:

- long: the group's questions asked at once, answered by their answers joined into one multi-sentence
  answer; the hallucinated twin has one of them replaced by that question's hallucinated answer. Yes/no
  questions are left out: a bare "yes." among other answers cannot be told which question it answers.
- summary: "Summarize the documents." answered by sentences taken from the document and compressed the way
  summaries are (parentheticals dropped, a sentence cut to its first clause, one conjunct kept with its
  subject); the hallucinated twin has one word of one sentence changed to one the document lacks (a
  number, a name, or a common noun taken from another group's document).
- paraphrase: the summary with its verbs moved to another tense ("wrote" -> "has written", "is" <-> "was"),
  hallucinated twin as for summary.
- reworded: the summary with 30% of each sentence's lowercase content words replaced by words the document
  lacks, which is what synonyms look like to a lexical judge (a faithful abstractive summary, as far as the
  judge can tell); the hallucinated twin also has a number or a name changed.

Every sentence of an answer is a claim judged against the whole document. Reports, per shape, specificity
(faithful answers not flagged) and recall (hallucinated answers flagged) with the shipped defaults, then
with the decision threshold and min_confidence chosen on half of the questions (the dev set's calibration
split, `calibration_half`; groups are formed within a half) and measured on the other half, both
directions. `--write` records the half of every case (field `half`), which benchmarks/halueval_accuracy.py
honours when it uses the file as a `--guard`. The shapes are synthetic: no synonym-level
paraphrase, so they bound how far specificity can fall on real summaries from below, not from above.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from _lockbox import locked, open_lockbox, reader

from tracescore.model import MetricResult, RagRecord
from tracescore.sample._calibration import calibration_half
from tracescore.score import faithfulness_label
from tracescore.score.judges import OfflineJudge
from tracescore.score.judges._offline_words import IRREGULAR_VERBS, STOPWORDS
from tracescore.score.metrics import Faithfulness

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
SUMMARY_QUESTION = "Summarize the documents."
THRESHOLDS = (0.25, 0.5, 0.75, 0.9)
MIN_CONFIDENCES = (0.3, 0.5, 0.7, 0.95)
# Share of a reworded summary sentence's lowercase content words swapped for words the judge cannot ground.
REWORDED_SHARE = 0.3

_SENTENCE = re.compile(r"(?<=[a-z0-9)\"”][.!?])\s*(?=[A-Z])")
_PAREN = re.compile(r"\s*\([^)]*\)")
_CONJUNCT = re.compile(r",?\s+and\s+(?!(?:the|a|an|his|her|its|their)\b)(?=[a-z])")
_AUX = {"is", "are", "was", "were", "has", "have", "had"}
_NUMBER = re.compile(r"\b\d{2,4}\b")
_COMMON = re.compile(r"(?<= )[a-z]{5,}(?=[ .,])")
_NAME = re.compile(r"(?<=[a-z,] )[A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})*")
# base -> (past, participle) for the paraphrase tense change, from the judge's own table reversed.
_PAST: dict[str, str] = {}
_PARTICIPLE: dict[str, str] = {}


@dataclass(frozen=True)
class Pair:
    """One QA question of the dev set: its context and its faithful and hallucinated answers."""

    query: str
    context: str
    faithful: str
    hallucinated: str


@dataclass(frozen=True)
class Case:
    record: RagRecord
    hallucinated: bool


def load_pairs(path: Path, lockbox: bool = False) -> list[Pair]:
    """The questions with both answers (of a dev set: the open part, or with `lockbox` the lockbox only)."""
    by_query: dict[str, dict[str, object]] = {}
    reads = reader(path, lockbox)
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                raw = json.loads(line)
                if not reads(raw["contexts"]):
                    continue
                entry = by_query.setdefault(raw["query"], {"context": "\n".join(raw["contexts"])})
                entry[raw["label"]] = raw["answer"].strip()
    return [
        Pair(q, str(e["context"]), str(e["faithful"]), str(e["hallucinated"]))
        for q, e in by_query.items()
        if "faithful" in e and "hallucinated" in e
    ]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if len(s.split()) >= 4]


def _as_sentence(answer: str) -> str:
    answer = answer.strip()
    return answer if answer.endswith((".", "!", "?")) else answer + "."


def _compress(sentence: str) -> str:
    """A summary's version of a document sentence: no parentheticals, one conjunct with its subject, or the
    first clause when it is a statement of its own."""
    sentence = _PAREN.sub("", sentence).strip()
    parts = _CONJUNCT.split(sentence, maxsplit=1)
    words = parts[0].split()
    aux = next((i for i, w in enumerate(words) if w.casefold() in _AUX), None)
    if len(parts) == 2 and aux:
        # "X was founded in 1999 and sells anvils" -> "X sells anvils"; "X is a director and writer" ->
        # "X is writer": a verb-looking word after "and" takes the subject alone, anything else its verb too.
        first = parts[1].split()[0]
        verb = first.endswith(("s", "ed")) or first in IRREGULAR_VERBS
        subject = words[:aux] if verb else words[: aux + 1]
        return _as_sentence(" ".join(subject) + " " + parts[1].rstrip("."))
    head = sentence.split(", ", 1)[0]
    return _as_sentence(head) if len(head.split()) >= 6 else _as_sentence(sentence.rstrip("."))


def _retense(sentence: str) -> str:
    """Verbs to another tense: an irregular past to "has" + participle, "is" <-> "was"."""
    out = []
    for word in sentence.split():
        bare = word.rstrip(".,;")
        tail = word[len(bare) :]
        base = IRREGULAR_VERBS.get(bare)
        if base and _PAST.get(base) == bare and _PARTICIPLE.get(base, bare) != bare:
            out.append(f"has {_PARTICIPLE[base]}{tail}")
        elif bare in ("is", "was"):
            out.append(("was" if bare == "is" else "is") + tail)
        else:
            out.append(word)
    return " ".join(out)


def _reword(sentence: str, document: str, foreign: str, rng: random.Random, share: float) -> str:
    """`share` of the sentence's lowercase content words replaced by words the document lacks: to a lexical
    judge, exactly what synonyms it does not know look like (a faithful abstractive rewording)."""
    low = document.casefold()
    pool = sorted({w for w in _COMMON.findall(foreign) if w not in low and w not in STOPWORDS})
    spots = [m for m in _COMMON.finditer(sentence) if m.group() not in STOPWORDS]
    if not pool or not spots:
        return sentence
    chosen = sorted(
        rng.sample(spots, max(1, round(share * len(spots)))), key=lambda m: m.start(), reverse=True
    )
    for m in chosen:
        sentence = sentence[: m.start()] + rng.choice(pool) + sentence[m.end() :]
    return sentence


def _corrupt(
    sentence: str, document: str, foreign: str, rng: random.Random, *, facts_only: bool = False
) -> str:
    """An unfaithful version, one word changed the way generated text goes wrong: a number, a name or a
    common noun (a word of another document that this one lacks; not with `facts_only`); a foreign
    sentence when none applies."""
    options = []
    numbers = [m for m in _NUMBER.finditer(sentence) if str(int(m.group()) + 7) not in document]
    if numbers:
        m = rng.choice(numbers)
        options.append(sentence[: m.start()] + str(int(m.group()) + 7) + sentence[m.end() :])
    names, other_names = (
        list(_NAME.finditer(sentence)),
        [n for n in _NAME.findall(foreign) if n not in document],
    )
    if names and other_names:
        m = rng.choice(names)
        options.append(sentence[: m.start()] + rng.choice(other_names) + sentence[m.end() :])
    low = document.casefold()
    nouns = [m for m in _COMMON.finditer(sentence) if m.group() not in STOPWORDS]
    other_nouns = sorted({w for w in _COMMON.findall(foreign) if w not in low and w not in STOPWORDS})
    if nouns and other_nouns and not facts_only:
        m = rng.choice(nouns)
        options.append(sentence[: m.start()] + rng.choice(other_nouns) + sentence[m.end() :])
    if options:
        return rng.choice(options)
    candidates = _sentences(foreign)
    return _as_sentence(rng.choice(candidates)) if candidates else sentence + " It was founded in 1066."


def build(pairs: list[Pair], group: int, seed: int) -> dict[str, list[Case]]:
    rng = random.Random(seed)
    pairs = [p for p in pairs if p.faithful.casefold().rstrip(".") not in ("yes", "no")]
    groups = [pairs[i : i + group] for i in range(0, len(pairs) - group + 1, group)]
    shapes: dict[str, list[Case]] = {"long": [], "summary": [], "paraphrase": [], "reworded": []}
    for n, members in enumerate(groups):
        document = "\n\n".join(p.context for p in members)
        contexts = tuple(p.context for p in members)
        foreign = groups[(n + 1) % len(groups)][0].context
        question = " ".join(p.query.strip() for p in members)
        faithful = [_as_sentence(p.faithful) for p in members]
        swapped = list(faithful)
        at = n % len(members)
        swapped[at] = _as_sentence(members[at].hallucinated)
        shapes["long"] += [
            Case(RagRecord(query=question, contexts=contexts, answer=" ".join(faithful)), False),
            Case(RagRecord(query=question, contexts=contexts, answer=" ".join(swapped)), True),
        ]
        summary = [_compress(s) for p in members for s in _sentences(p.context)[:2]]
        if not summary:
            continue
        for name, sentences in (("summary", summary), ("paraphrase", [_retense(s) for s in summary])):
            bad = list(sentences)
            at = rng.randrange(len(bad))
            bad[at] = _corrupt(bad[at], document, foreign, rng)
            shapes[name] += [
                Case(RagRecord(query=SUMMARY_QUESTION, contexts=contexts, answer=" ".join(sentences)), False),
                Case(RagRecord(query=SUMMARY_QUESTION, contexts=contexts, answer=" ".join(bad)), True),
            ]
        reworded = [_reword(s, document, foreign, rng, REWORDED_SHARE) for s in summary]
        bad = list(reworded)
        at = rng.randrange(len(bad))
        bad[at] = _corrupt(bad[at], document, foreign, rng, facts_only=True)
        shapes["reworded"] += [
            Case(RagRecord(query=SUMMARY_QUESTION, contexts=contexts, answer=" ".join(reworded)), False),
            Case(RagRecord(query=SUMMARY_QUESTION, contexts=contexts, answer=" ".join(bad)), True),
        ]
    return shapes


async def _score(cases: list[Case]) -> list[MetricResult]:
    metric, judge = Faithfulness(), OfflineJudge()
    return await asyncio.gather(*(metric.score(c.record, judge) for c in cases))


def _flagged(result: MetricResult, threshold: float, min_confidence: float, rule: str) -> bool:
    if result.score is None:
        return True
    claims = result.details.get("claims") or []
    label = faithfulness_label(
        result.score, claims, threshold=threshold, rule=rule, min_confidence=min_confidence
    )  # type: ignore[arg-type]
    return label == "hallucinated"


def _rates(cases: list[Case], results: list[MetricResult], setting: tuple[float, float], rule: str):
    flags = [_flagged(r, *setting, rule) for r in results]
    faithful = [f for f, c in zip(flags, cases, strict=True) if not c.hallucinated]
    bad = [f for f, c in zip(flags, cases, strict=True) if c.hallucinated]
    specificity = 1 - sum(faithful) / max(1, len(faithful))
    recall = sum(bad) / max(1, len(bad))
    return specificity, recall, len(faithful), len(bad)


def write(built: list[dict[str, list[Case]]], directory: Path) -> None:
    """One JSONL file per shape, both halves: twins share their query and documents, so a split by question
    and documents (as benchmarks/cascade_sampling.py makes) keeps them on one side."""
    directory.mkdir(parents=True, exist_ok=True)
    for shape in built[0]:
        cases = [(h, c) for h, half in enumerate(built) for c in half[shape]]
        lines = [
            json.dumps(
                {
                    "query": c.record.query,
                    "contexts": list(c.record.contexts),
                    "answer": c.record.answer,
                    "label": "hallucinated" if c.hallucinated else "faithful",
                    "half": h,  # the half of the questions it was built from
                }
            )
            for h, c in cases
        ]
        (directory / f"{shape}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        bad = sum(c.hallucinated for _, c in cases)
        print(f"{directory / shape}.jsonl: {len(cases)} records ({bad} hallucinated)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--group", type=int, default=4, help="questions per long document")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rule", choices=("any_unsupported", "threshold"), default="any_unsupported")
    parser.add_argument(
        "--write", type=Path, metavar="DIR", help="write each shape as labelled JSONL, then exit"
    )
    parser.add_argument("--show", type=int, default=0, metavar="N", help="print N misjudged cases per shape")
    parser.add_argument(
        "--lockbox",
        action="store_true",
        help="build the shapes from the dev set's lockbox questions only (once per change; recorded)",
    )
    args = parser.parse_args(argv)
    if not args.path.exists():
        print(f"no such file: {args.path}", file=sys.stderr)
        return 2
    if args.lockbox and (args.show or args.write or not locked(args.path)):
        print("--lockbox scores the shapes a dev set's lockbox builds: no --show or --write", file=sys.stderr)
        return 2
    if args.lockbox:
        open_lockbox([args.path])
    for form, base in IRREGULAR_VERBS.items():
        # The table lists past then participle; the first form seen for a base is its past.
        if base not in _PAST:
            _PAST[base] = form
        _PARTICIPLE[base] = form
    pairs = load_pairs(args.path, args.lockbox)
    # The questions' halves are those of the dev set's calibration split (tracescore's calibration_half),
    # so a shape built from half 0 holds only half-0 questions.
    halves = tuple([p for p in pairs if calibration_half(p.query, (p.context,)) == h] for h in (0, 1))
    built = [build(half, args.group, args.seed) for half in halves]
    if args.write:
        write(built, args.write)
        return 0
    shipped = (Faithfulness().threshold, Faithfulness().min_confidence)
    print(f"{len(pairs)} questions, groups of {args.group}, label rule {args.rule}, seed {args.seed}")
    print(f"shipped defaults (decision threshold, min_confidence): {shipped}")
    header = f"{'shape':<11} {'faithful':>8} {'halluc.':>8}  {'specificity':>11} {'recall':>7}"
    print(f"{header}  held out, chosen per shape (A->B | B->A)")
    scored: dict[str, tuple[list[list[Case]], list[list[MetricResult]]]] = {}
    for shape in built[0]:
        cases = [built[0][shape], built[1][shape]]
        results = [asyncio.run(_score(c)) for c in cases]
        scored[shape] = (cases, results)
        all_cases, all_results = cases[0] + cases[1], results[0] + results[1]
        spec, rec, n_ok, n_bad = _rates(all_cases, all_results, shipped, args.rule)
        held = []
        for train, test in ((0, 1), (1, 0)):
            grid = itertools.product(THRESHOLDS, MIN_CONFIDENCES)
            chosen = max(
                grid, key=lambda g, c=cases[train], r=results[train]: sum(_rates(c, r, g, args.rule)[:2])
            )
            s, r, _, _ = _rates(cases[test], results[test], chosen, args.rule)
            held.append(f"spec {s:.3f} recall {r:.3f} at {chosen}")
        print(f"{shape:<11} {n_ok:>8} {n_bad:>8}  {spec:>11.3f} {rec:>7.3f}  {' | '.join(held)}")
        shown = 0
        for case, result in zip(all_cases, all_results, strict=True):
            if shown >= args.show or _flagged(result, *shipped, args.rule) == case.hallucinated:
                continue
            shown += 1
            print(f"  --- {'missed' if case.hallucinated else 'false alarm'} score {result.score}")
            print("  A:", case.record.answer[:400])
            for claim in result.details.get("claims", []):
                if claim["verdict"] != "FULLY_SUPPORTED":
                    verdict = f"{claim['verdict']} {claim.get('confidence')}"
                    print(f"    [{verdict}] {claim['claim'][:90]} | {claim['reason']}")
    # One setting for every shape: what a default has to be.
    for name, train, test in (("A->B", 0, 1), ("B->A", 1, 0)):

        def joint(setting: tuple[float, float], train: int = train) -> float:
            return sum(sum(_rates(c[train], r[train], setting, args.rule)[:2]) for c, r in scored.values())

        chosen = max(itertools.product(THRESHOLDS, MIN_CONFIDENCES), key=joint)
        rates = [_rates(c[test], r[test], chosen, args.rule) for c, r in scored.values()]
        listed = ", ".join(
            f"{shape} {s:.3f}/{r:.3f}" for shape, (s, r, _, _) in zip(scored, rates, strict=True)
        )
        print(f"one setting for all shapes, {name}: chosen {chosen}; specificity/recall {listed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
