"""Extract: assembled traces -> RAG interactions, one recogniser per instrumentation convention. Each
interaction says where its documents came from (`Interaction.context_sources`)."""

from tracescore.extract._extract import DEFAULT_RECOGNIZERS, Extraction, extract
from tracescore.extract._genai import GenAIRecognizer
from tracescore.extract._langfuse import LangfuseRecognizer
from tracescore.extract._mlflow import MLflowRecognizer
from tracescore.extract._openinference import OpenInferenceRecognizer
from tracescore.extract._openllmetry import OpenLLMetryRecognizer
from tracescore.extract._protocol import Recognizer, Skip
from tracescore.extract._tracescore import TracescoreRecognizer
from tracescore.extract._vercel import VercelAIRecognizer
from tracescore.model import ContextSource, DecodedSpan, Interaction, RagSpan, Trace

__all__ = [
    "DEFAULT_RECOGNIZERS",
    "ContextSource",
    "DecodedSpan",
    "Extraction",
    "GenAIRecognizer",
    "Interaction",
    "LangfuseRecognizer",
    "MLflowRecognizer",
    "OpenInferenceRecognizer",
    "OpenLLMetryRecognizer",
    "RagSpan",
    "Recognizer",
    "Skip",
    "Trace",
    "TracescoreRecognizer",
    "VercelAIRecognizer",
    "extract",
]
