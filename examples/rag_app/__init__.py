"""Northwind Cloud assistant: a tiny RAG app whose answers are sometimes deliberately unfaithful.

Run from the repo root:  python examples/rag_app --bootstrap localhost:9092 --expected-out out/expected.json
(`python -m examples.rag_app` needs an examples/__init__.py: pysbd installs a top-level `examples`
package that otherwise shadows this directory.)
Only `app` and `__main__` import tracescore; the rest is standard library.
"""

from .answerer import ALTERATIONS, alter, extract, respond
from .pipeline import Result, expectation_key, run
from .questions import PHASES, QUESTIONS, Question, schedule
from .retriever import Retriever, load_corpus, split_sentences

__all__ = [
    "ALTERATIONS",
    "PHASES",
    "QUESTIONS",
    "Question",
    "Result",
    "Retriever",
    "alter",
    "expectation_key",
    "extract",
    "load_corpus",
    "respond",
    "run",
    "schedule",
    "split_sentences",
]
