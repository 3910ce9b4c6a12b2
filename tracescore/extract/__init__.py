"""Extract: assembled traces -> RAG interactions, one recogniser per instrumentation convention. Each
interaction says where its documents came from (`Interaction.context_sources`).

A recogniser is the seam (`Recognizer`); each built-in one is its convention's adapter (`_convention`: the
keys and small reading functions, one file per producer) read by the shared reader (`_reader`: the rules
as ordered steps), in the order `_conventions` explains. The spans, traces and interactions are the shared
model's (`tracescore.model`); the names that once lived here still import from here, with a
DeprecationWarning.
"""

from tracescore._lazy import moved_names
from tracescore.extract._extract import DEFAULT_RECOGNIZERS, Extraction, Findings, extract, find
from tracescore.extract._protocol import Recognizer, Skip
from tracescore.extract._reader import Found
from tracescore.extract._recognizers import (
    GenAIRecognizer,
    GenkitRecognizer,
    HaystackRecognizer,
    LangfuseRecognizer,
    LangSmithRecognizer,
    MastraRecognizer,
    MLflowRecognizer,
    OpenInferenceRecognizer,
    OpenLLMetryRecognizer,
    SpringAIRecognizer,
    StrandsRecognizer,
    TracescoreRecognizer,
    VercelAIRecognizer,
)

__all__ = [
    "DEFAULT_RECOGNIZERS",
    "Extraction",
    "Findings",
    "Found",
    "GenAIRecognizer",
    "GenkitRecognizer",
    "HaystackRecognizer",
    "LangSmithRecognizer",
    "LangfuseRecognizer",
    "MLflowRecognizer",
    "MastraRecognizer",
    "OpenInferenceRecognizer",
    "OpenLLMetryRecognizer",
    "Recognizer",
    "Skip",
    "SpringAIRecognizer",
    "StrandsRecognizer",
    "TracescoreRecognizer",
    "VercelAIRecognizer",
    "extract",
    "find",
]

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(("ContextSource", "DecodedSpan", "Interaction", "RagSpan", "Trace"), "tracescore.model"),
)
