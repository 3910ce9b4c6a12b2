"""Would an entailment (NLI) model lift the offline judge's specificity on long answers? (issue 34 item 3)

    python benchmarks/offline_nli.py --model DIR [PATH ...] [--guard FILE ...] [--folds K] [--lockbox]

Not part of any install: it needs `onnxruntime` and `tokenizers` (no torch) and an NLI model exported to
ONNX: DIR holds one `*.onnx` file (inputs input_ids and attention_mask, output logits) and `tokenizer.json`,
a model the user brings, kept outside the repository. Nothing is downloaded.

The model read: a premise (a context sentence, or two neighbouring ones) and a hypothesis (a claim of the
answer) give `--class` probability p (softmax over the logits). Three zones of p, each a `--zones` cut:
contradiction (p < the first cut), entailment (between), neither (p >= the second cut). The cuts are read
from sentence pairs written by hand for the model (`--probe` prints them), never from a labelled record.
A claim is entailed when one of its premises entails it, contradicted when one contradicts it and none
entails it. Each claim is paired with the `--premises` context windows that share the most content words
with it (every window past that is far from the claim in wording, and each pair costs a model call).

The tier acts on long answers only (at least two answer sentences with a claim): a one-line QA answer is
a fragment ("Delhi") that no premise entails. Candidates, each a way the judge's verdicts change before
the answer is scored and labelled as today:
- `rescue`, `rescue-gap`, `rescue-all` (benchmarks/offline_semantic.py's `unsure`, `gap`, `both` scopes):
  an unsupported claim the model finds entailed becomes PARTIALLY_SUPPORTED; names and figures the
  context lacks stay invented.
- `conflict`: a claim the judge finds supported that the model finds contradicted becomes CONTRADICTORY
  (sure): FaithBench's errors keep the passage's words and change a relation.
- `both`: `rescue` and `conflict`.
- `nli`: every claim's verdict from the model alone (entailed: supported; contradicted: contradictory,
  sure; neither: no evidence at confidence 0.5), the lexical judge's verdicts ignored.
The choice is halueval_accuracy.py's (offline_semantic.py's): on the open part, the candidate and the
contradiction cut as one more dimension beside the decision threshold and min_confidence, today's judge
included; K-fold over groups and the halves. `--lockbox` scores the lockbox once with one candidate
(`--variant`, with the settings chosen on the open part) and records the opening.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _lockbox import open_lockbox
from halueval_accuracy import DEFAULT_PATHS, Row, Shape, load, score_all
from offline_semantic import OFF, rejudged, report_choice, report_shipped

from tracescore.model import FaithfulnessClaim, MetricResult, Usage, Verdict
from tracescore.score.judges._offline_claim import IndexedContext
from tracescore.score.judges._offline_words import STOPWORDS
from tracescore.score.metrics import Faithfulness

RESCUES = {"rescue": "unsure", "rescue-gap": "gap", "rescue-all": "both"}
VARIANTS = (*RESCUES, "conflict", "both", "nli")
CONTRADICTION_CUTS = (0.02, 0.05, 0.15)
_WORD = re.compile(r"\w+")
ENTAILED, CONTRADICTED, NEITHER = "entailed", "contradicted", "neither"


class Nli:
    """An ONNX sequence-pair classifier read as NLI: probability of `label` per (premise, hypothesis)."""

    def __init__(self, folder: Path, label: int, batch: int = 16) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        (model,) = sorted(folder.glob("*.onnx"))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1  # the offline judge runs on one core too
        self.session = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        shape = self.session.get_inputs()[0].shape
        length = shape[1] if isinstance(shape[1], int) else 512
        self.tokenizer.enable_truncation(length)
        self.tokenizer.enable_padding(length=length if isinstance(shape[1], int) else None)
        self.label, self.batch, self.pairs = label, batch, 0
        self.identity = f"{model.resolve()}|{model.stat().st_size}|{label}"

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        out: list[float] = []
        for start in range(0, len(pairs), self.batch):
            encoded = self.tokenizer.encode_batch(list(pairs[start : start + self.batch]))
            feed = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            }
            logits = self.session.run(None, feed)[0]
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            out.extend((shifted[:, self.label] / shifted.sum(axis=1)).tolist())
        self.pairs += len(pairs)
        return out


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS}


def premises(sentences: list[str], claim: str, keep: int) -> list[str]:
    """The `keep` windows (a sentence, or two neighbours) sharing the most content words with the claim."""
    windows = [*sentences, *(f"{a} {b}" for a, b in itertools.pairwise(sentences))]
    words = _words(claim)
    ranked = sorted(range(len(windows)), key=lambda i: (-len(words & _words(windows[i])), i))
    return [windows[i] for i in ranked[:keep]]


def long_answer(result: MetricResult) -> bool:
    claims = result.details.get("claims", [])
    return len({c.get("sentence") or c["claim"] for c in claims}) >= 2


def claim_probabilities(
    rows: list[Row], results: list[MetricResult], model: Nli, keep: int
) -> tuple[list[list[list[float]]], float]:
    """Per record, per claim, the model's probability for each premise (long answers only; [] otherwise);
    and the seconds the model took."""
    started = time.perf_counter()
    out = []
    for row, result in zip(rows, results, strict=True):
        claims = [c["claim"] for c in result.details.get("claims", [])]
        if result.score is None or not long_answer(result):
            out.append([[] for _ in claims])
            continue
        context = "\n\n".join(c for c in row.record.contexts if c.strip())
        sentences = [s.text for s in IndexedContext.of(context, row.record.query).sentences]
        pairs = [(p, c) for c in claims for p in premises(sentences, c, keep)]
        probabilities = model(pairs) if pairs else []
        per = len(pairs) // max(1, len(claims))
        out.append([probabilities[i * per : (i + 1) * per] for i in range(len(claims))])
    return out, time.perf_counter() - started


def reading(probabilities: list[float], contradiction: float, neither: float) -> str | None:
    if not probabilities:
        return None
    zones = [
        CONTRADICTED if p < contradiction else NEITHER if p >= neither else ENTAILED for p in probabilities
    ]
    return ENTAILED if ENTAILED in zones else CONTRADICTED if CONTRADICTED in zones else NEITHER


def with_nli(result: MetricResult, readings: list[str | None], variant: str) -> MetricResult:
    """The result once `variant` has changed the claims' verdicts by the model's readings."""
    if result.score is None or not any(readings):
        return result
    if variant in RESCUES:
        entailed = [1.0 if r == ENTAILED else 0.0 for r in readings]
        return rejudged(result, entailed, RESCUES[variant], 0.5)
    claims = [FaithfulnessClaim.model_validate(c) for c in result.details.get("claims", [])]
    if variant == "both":
        return with_nli(with_nli(result, readings, "rescue"), readings, "conflict")
    changed = []
    for claim, read in zip(claims, readings, strict=True):
        if variant == "nli" and read is not None:
            verdict, sure = {
                ENTAILED: (Verdict.FULLY_SUPPORTED, None),
                CONTRADICTED: (Verdict.CONTRADICTORY, None),
                NEITHER: (Verdict.NO_EVIDENCE, 0.5),
            }[read]
            claim = claim.model_copy(update={"verdict": verdict, "confidence": sure})
        elif variant == "conflict" and read == CONTRADICTED and not claim.unsupported:
            claim = claim.model_copy(update={"verdict": Verdict.CONTRADICTORY, "confidence": None})
        changed.append(claim)
    return Faithfulness().result_of(changed, result.judge or "offline", Usage())


@dataclass
class Scored:
    name: str
    rows: list[Row]
    results: list[MetricResult]
    probabilities: list[list[list[float]]]
    judged_s: float
    model_s: float


def variants(scored: Scored, neither: float) -> dict[tuple[object, ...], list[MetricResult]]:
    scores: dict[tuple[object, ...], list[MetricResult]] = {OFF: scored.results}
    for variant in VARIANTS:
        for cut in CONTRADICTION_CUTS:
            scores[(variant, cut)] = [
                with_nli(r, [reading(p, cut, neither) for p in per_claim], variant)
                for r, per_claim in zip(scored.results, scored.probabilities, strict=True)
            ]
    return scores


def separation(scored: Scored, contradiction: float, neither: float) -> None:
    """How the readings fall on the long answers' claims, by the answer's label and the judge's verdict."""
    counts: dict[tuple[bool, bool, str], int] = {}
    for row, result, per_claim in zip(scored.rows, scored.results, scored.probabilities, strict=True):
        for raw, p in zip(result.details.get("claims", []), per_claim, strict=True):
            read = reading(p, contradiction, neither)
            if read is not None:
                key = (row.hallucinated, FaithfulnessClaim.model_validate(raw).unsupported, read)
                counts[key] = counts.get(key, 0) + 1
    for hallucinated in (False, True):
        for unsupported in (False, True):
            line = ", ".join(
                f"{r} {counts.get((hallucinated, unsupported, r), 0)}"
                for r in (ENTAILED, CONTRADICTED, NEITHER)
            )
            print(
                f"  {scored.name}: {'hallucinated' if hallucinated else 'faithful'} answers' claims the "
                f"judge {'leaves unsupported' if unsupported else 'supports'}: {line}"
            )


PROBE = (  # written for the model, not taken from any labelled record: (premise, hypothesis, expected)
    ("A man is playing a guitar on stage.", "A man is playing an instrument.", ENTAILED),
    ("A man is playing a guitar on stage.", "A woman is playing a guitar.", CONTRADICTED),
    ("A man is playing a guitar on stage.", "The man is famous.", NEITHER),
    ("The storm killed 12 people and left thousands without power.", "Thousands lost electricity.", ENTAILED),
    (
        "The storm killed 12 people and left thousands without power.",
        "The storm killed 20 people.",
        CONTRADICTED,
    ),
    ("The storm killed 12 people and left thousands without power.", "The storm hit Florida.", NEITHER),
    ("The court ruled that the law was unconstitutional.", "The court struck the law down.", ENTAILED),
    ("The court ruled that the law was unconstitutional.", "The court upheld the law.", CONTRADICTED),
    (
        "The court ruled that the law was unconstitutional.",
        "The judges were appointed by the president.",
        NEITHER,
    ),
    ("John bought a car from Mary in 2010.", "John purchased a vehicle from Mary.", ENTAILED),
    ("John bought a car from Mary in 2010.", "Mary bought a car from John in 2010.", CONTRADICTED),
    ("John bought a car from Mary in 2010.", "John paid cash.", NEITHER),
)


CACHE = Path.home() / ".cache" / "tracescore" / "nli"


def _score(path: Path, lockbox: bool, guard: bool, model: Nli, keep: int) -> Scored:
    """The file's rows scored by the judge and read by the model. The model's probabilities are kept in
    CACHE (keyed by the file, the part read, the model file and `keep`) so the selection can be rerun; a
    cached run reports no model time."""
    rows = load(path, lockbox)
    started = time.perf_counter()
    results = asyncio.run(score_all([r.record for r in rows]))
    judged = time.perf_counter() - started
    key = hashlib.blake2b(
        f"{path.resolve()}|{path.stat().st_size}|{lockbox}|{model.identity}|{keep}".encode(), digest_size=8
    ).hexdigest()
    cached = CACHE / f"probabilities-{key}.json"
    if cached.exists():
        probabilities, spent = json.loads(cached.read_text()), 0.0
    else:
        probabilities, spent = claim_probabilities(rows, results, model, keep)
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(probabilities))
    return Scored(path.name + (" (guard)" if guard else ""), rows, results, probabilities, judged, spent)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, default=list(DEFAULT_PATHS))
    parser.add_argument("--model", type=Path, required=True, metavar="DIR")
    parser.add_argument("--class", dest="label", type=int, default=0, help="the class index read (p)")
    parser.add_argument("--zones", default="0.05,0.7", help="cuts of p: contradiction below, neither from")
    parser.add_argument("--premises", type=int, default=4, help="context windows per claim")
    parser.add_argument("--guard", type=Path, action="append", default=[], metavar="FILE")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--probe", action="store_true", help="print the model's p on the hand-written pairs")
    parser.add_argument("--lockbox", action="store_true", help="score the lockbox with --variant (recorded)")
    parser.add_argument("--variant", help="with --lockbox: variant,cut,threshold,min_confidence")
    args = parser.parse_args(argv)
    model = Nli(args.model, args.label)
    cut, neither = (float(v) for v in args.zones.split(","))
    if args.probe:
        for premise, hypothesis, expected in PROBE:
            (p,) = model([(premise, hypothesis)])
            print(f"  p {p:.3f} read {reading([p], cut, neither):12} expected {expected:12} | {hypothesis}")
        return 0
    if args.lockbox:
        if not args.variant or args.guard:
            print("--lockbox scores one chosen --variant, no --guard", file=sys.stderr)
            return 2
        name, contradiction, threshold, confidence = args.variant.split(",")
        setting = (name, float(contradiction), float(threshold), float(confidence))
        open_lockbox(args.paths)
        for path in args.paths:
            scored = _score(path, True, False, model, args.premises)
            shape = Shape(scored.name, scored.rows, variants(scored, neither))
            at = list(range(len(scored.rows)))
            hallucinated = sum(r.hallucinated for r in scored.rows)
            print(f"{scored.name} (lockbox): {len(at)} records, {hallucinated} hallucinated")
            print(f"  {setting}: {shape.confusion(setting, at).line()}")
            print(f"  today (shipped): {shape.confusion((*OFF, 0.4, 0.5), at).line()}")
        return 0
    shapes = []
    for path, guard in [*((p, False) for p in args.paths), *((g, True) for g in args.guard)]:
        scored = _score(path, False, guard, model, args.premises)
        calls = sum(len(p) for per_claim in scored.probabilities for p in per_claim)
        ratio = (scored.judged_s + scored.model_s) / scored.judged_s
        print(
            f"{scored.name}: {len(scored.rows)} records, {calls} model calls; offline judge "
            f"{scored.judged_s:.2f} s, model {scored.model_s:.2f} s (0: read from {CACHE}): judge + model = "
            f"{ratio:.1f}x the judge alone"
        )
        separation(scored, cut, neither)
        shapes.append(Shape(scored.name, scored.rows, variants(scored, neither), guard))
    print(f"\nsettings: (variant, contradiction cut, decision threshold, min_confidence); {OFF}: today's")
    report_choice(shapes, args.folds)
    report_shipped(shapes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
