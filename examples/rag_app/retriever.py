"""A tiny BM25 retriever over sentence windows of the bundled corpus (standard library only)."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CORPUS_DIR = Path(__file__).with_name("corpus")

# The corpus avoids abbreviations, so a punctuation + capital/digit boundary is a safe splitter.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9$])")
_TOKEN = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
# Question words and glue words carry no topic, so they only add noise to BM25.
# fmt: off
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has", "have",
    "how", "i", "in", "is", "it", "its", "many", "much", "my", "of", "on", "or", "our", "per", "the",
    "their", "there", "this", "to", "was", "we", "what", "when", "where", "which", "who", "why", "will",
    "with", "you", "your",
))
# fmt: on


def split_sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(" ".join(text.split())) if s]


def tokenize(text: str) -> list[str]:
    # Crude plural stripping so "invoices" matches "invoice"; numbers are kept as-is.
    return [
        t[:-1] if len(t) > 3 and t.endswith("s") and t.isalpha() and not t.endswith("ss") else t
        for t in _TOKEN.findall(text.lower())
        if t not in _STOPWORDS
    ]


def load_corpus(directory: Path = CORPUS_DIR) -> dict[str, str]:
    """doc id (file stem) -> text; the first line of each file is its title."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(directory.glob("*.txt"))}


@dataclass(frozen=True)
class Passage:
    doc_id: str
    text: str


def passages(docs: Mapping[str, str], window: int = 3, stride: int = 2) -> list[Passage]:
    """Overlapping sentence windows, so a fact is never cut off from its neighbour."""
    out: list[Passage] = []
    for doc_id, raw in docs.items():
        _title, _, body = raw.partition("\n")
        sents = split_sentences(body)
        starts = list(range(0, max(len(sents) - window, 0) + 1, stride))
        if starts[-1] + window < len(sents):
            starts.append(len(sents) - window)
        out.extend(Passage(doc_id, " ".join(sents[s : s + window])) for s in starts)
    return out


class Retriever:
    """Okapi BM25; each passage is also indexed with its document title to help short queries."""

    def __init__(self, docs: Mapping[str, str] | None = None, k1: float = 1.2, b: float = 0.75) -> None:
        docs = load_corpus() if docs is None else docs
        titles = {doc_id: raw.partition("\n")[0] for doc_id, raw in docs.items()}
        self.passages = passages(docs)
        self._tfs = [Counter(tokenize(f"{titles[p.doc_id]} {p.text}")) for p in self.passages]
        self._lens = [sum(tf.values()) for tf in self._tfs]
        self._avg = sum(self._lens) / len(self._lens)
        df = Counter(term for tf in self._tfs for term in tf)
        n = len(self._tfs)
        self._idf = {t: math.log(1 + (n - d + 0.5) / (d + 0.5)) for t, d in df.items()}
        self.k1, self.b = k1, b

    def score(self, query: str, i: int) -> float:
        tf, norm = self._tfs[i], self.k1 * (1 - self.b + self.b * self._lens[i] / self._avg)
        return sum(
            self._idf[t] * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in set(tokenize(query)) if t in tf
        )

    def search_passages(self, query: str, k: int = 3) -> list[Passage]:
        # Ties break on corpus order, which keeps runs deterministic.
        ranked = sorted(range(len(self.passages)), key=lambda i: (-self.score(query, i), i))
        return [self.passages[i] for i in ranked[:k]]

    def search(self, query: str, k: int = 3) -> list[str]:
        return [p.text for p in self.search_passages(query, k)]
