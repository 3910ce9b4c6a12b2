"""The public recognisers, one per convention: each is its adapter read by the shared reader. Their order,
and what each reads, are in `_conventions` and the adapters' modules."""

from __future__ import annotations

from tracescore.extract._genai import GenAI
from tracescore.extract._genkit import Genkit
from tracescore.extract._haystack import Haystack
from tracescore.extract._langfuse import Langfuse
from tracescore.extract._langsmith import LangSmith
from tracescore.extract._mastra import Mastra
from tracescore.extract._mlflow import MLflow
from tracescore.extract._openinference import OpenInference
from tracescore.extract._openllmetry import OpenLLMetry
from tracescore.extract._reader import ConventionReader
from tracescore.extract._spring_ai import SpringAI
from tracescore.extract._strands import Strands
from tracescore.extract._tracescore import Tracescore
from tracescore.extract._vercel import VercelAI

__all__ = [
    "GenAIRecognizer",
    "GenkitRecognizer",
    "HaystackRecognizer",
    "LangSmithRecognizer",
    "LangfuseRecognizer",
    "MLflowRecognizer",
    "MastraRecognizer",
    "OpenInferenceRecognizer",
    "OpenLLMetryRecognizer",
    "SpringAIRecognizer",
    "StrandsRecognizer",
    "TracescoreRecognizer",
    "VercelAIRecognizer",
]


class TracescoreRecognizer(ConventionReader, convention=Tracescore()):
    """tracescore's own spans (`@tracescore.rag`)."""


class LangfuseRecognizer(ConventionReader, convention=Langfuse()):
    """Langfuse SDK v3+ observations."""


class HaystackRecognizer(ConventionReader, convention=Haystack()):
    """Haystack's own tracer (`haystack.pipeline.run` / `haystack.component.run` spans)."""


class OpenInferenceRecognizer(ConventionReader, convention=OpenInference()):
    """OpenInference spans (Phoenix, Arize and the frameworks they instrument)."""


class OpenLLMetryRecognizer(ConventionReader, convention=OpenLLMetry()):
    """OpenLLMetry (traceloop-sdk) workflows."""


class MLflowRecognizer(ConventionReader, convention=MLflow()):
    """MLflow Tracing exported over OTLP."""


class SpringAIRecognizer(ConventionReader, convention=SpringAI()):
    """Spring AI's observations (Micrometer Tracing's OpenTelemetry bridge)."""


class StrandsRecognizer(ConventionReader, convention=Strands()):
    """Strands Agents' own tracing (OTel GenAI conventions, content as span attributes)."""


class MastraRecognizer(ConventionReader, convention=Mastra()):
    """Mastra's tracing exported by its OtelExporter (OTel GenAI conventions)."""


class GenkitRecognizer(ConventionReader, convention=Genkit()):
    """Genkit's own tracing (`genkit:*` span attributes)."""


class LangSmithRecognizer(ConventionReader, convention=LangSmith()):
    """LangSmith's OpenTelemetry export of LangChain/LangGraph runs (`langsmith.*`)."""


class VercelAIRecognizer(ConventionReader, convention=VercelAI()):
    """The Vercel AI SDK's telemetry."""


class GenAIRecognizer(ConventionReader, convention=GenAI()):
    """The OpenTelemetry GenAI semantic conventions."""
