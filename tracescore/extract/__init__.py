"""Extract: assembled traces -> RAG interactions, one recogniser per instrumentation convention. Each
interaction says where its documents came from (`Interaction.context_sources`).

The spans, traces and interactions are the shared model's (`tracescore.model`); the names that once lived
here still import from here, with a DeprecationWarning.
"""

from tracescore._lazy import moved_names
from tracescore.extract._extract import DEFAULT_RECOGNIZERS, Extraction, extract
from tracescore.extract._genai import GenAIRecognizer
from tracescore.extract._langfuse import LangfuseRecognizer
from tracescore.extract._mlflow import MLflowRecognizer
from tracescore.extract._openinference import OpenInferenceRecognizer
from tracescore.extract._openllmetry import OpenLLMetryRecognizer
from tracescore.extract._protocol import Recognizer, Skip
from tracescore.extract._tracescore import TracescoreRecognizer
from tracescore.extract._vercel import VercelAIRecognizer

__all__ = [
    "DEFAULT_RECOGNIZERS",
    "Extraction",
    "GenAIRecognizer",
    "LangfuseRecognizer",
    "MLflowRecognizer",
    "OpenInferenceRecognizer",
    "OpenLLMetryRecognizer",
    "Recognizer",
    "Skip",
    "TracescoreRecognizer",
    "VercelAIRecognizer",
    "extract",
]

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(("ContextSource", "DecodedSpan", "Interaction", "RagSpan", "Trace"), "tracescore.model"),
)
