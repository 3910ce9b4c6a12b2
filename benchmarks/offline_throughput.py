"""Offline judge throughput on records with ~2 KB of context, one core, cold caches.

    python benchmarks/offline_throughput.py [--records N] [--repeat R]

Records are the HaluEval QA dev set's questions and answers, each context padded with other records'
passages to about 2,000 characters. Every record is scored with the passage cache cleared first (no
passage is ever seen twice), faithfulness + answer relevancy + context relevance on the offline judge.
Two context segmenters are measured in the same run, alternating: pysbd (what the judge used before) and
the regular-expression splitter it uses now; the script also reports how many faithfulness scores differ
between the two. Prints records/second for each and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from tracescore.model import RagRecord
from tracescore.score import AnswerRelevancy, ContextRelevance, Faithfulness, OfflineJudge
from tracescore.score._segment import split_sentences
from tracescore.score.judges import _offline_text
from tracescore.score.metrics import evaluate_record

DEFAULT_PATH = Path(__file__).resolve().parents[1].parent / "shared/data/halueval_qa_dev.jsonl"
CONTEXT_CHARS = 2000


def padded_records(path: Path, limit: int) -> list[RagRecord]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pool = [c for row in rows for c in row["contexts"]]
    records = []
    for i, row in enumerate(rows[:limit]):
        contexts, j = list(row["contexts"]), i
        while sum(map(len, contexts)) < CONTEXT_CHARS:
            j = (j + 7) % len(pool)
            contexts.append(pool[j])
        records.append(
            RagRecord(id=row["id"], query=row["query"], contexts=tuple(contexts), answer=row["answer"])
        )
    return records


def run(records: list[RagRecord], splitter: object) -> tuple[float, list[float | None]]:
    """(records/second, faithfulness scores) with `splitter` as the context segmenter, caches cold."""
    original = _offline_text.split_context_sentences
    _offline_text.split_context_sentences = splitter  # type: ignore[assignment]
    metrics, judge = [Faithfulness(), AnswerRelevancy(), ContextRelevance()], OfflineJudge()

    async def score_all() -> list[float | None]:
        scores = []
        for record in records:
            _offline_text._index_block.cache_clear()
            results = await evaluate_record(record, metrics, judge)
            scores.append(results[0].score)
        return scores

    try:
        started = time.perf_counter()
        scores = asyncio.run(score_all())
        return len(records) / (time.perf_counter() - started), scores
    finally:
        _offline_text.split_context_sentences = original  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_PATH)
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs of each; the best counts")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    records = padded_records(args.path, args.records)
    mean_chars = sum(sum(map(len, r.contexts)) for r in records) / len(records)
    variants = {"pysbd": split_sentences, "regex": _offline_text.split_context_sentences}
    best: dict[str, float] = dict.fromkeys(variants, 0.0)
    scores: dict[str, list[float | None]] = {}
    for _ in range(args.repeat):
        for name, splitter in variants.items():
            speed, scores[name] = run(records, splitter)
            best[name] = max(best[name], speed)
    differ = sum(a != b for a, b in zip(scores["pysbd"], scores["regex"], strict=True))
    print(f"records: {len(records)}, mean context {mean_chars:.0f} chars, one core, cold passage cache")
    for name, speed in best.items():
        print(f"  {name:6} context splitter: {speed:7.1f} records/s")
    print(f"  ratio regex/pysbd: {best['regex'] / best['pysbd']:.2f}x")
    print(f"  faithfulness scores that differ between the two: {differ} of {len(records)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
