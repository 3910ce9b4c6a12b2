"""Instrument: put RAG calls (query, retrieved documents, answer), retrievals and LLM generations on
OpenTelemetry spans, OpenInference and OTel GenAI conventions side by side, under the content controls."""

from tracescore.instrument._content import BUILTIN_REDACTORS, ContentSettings
from tracescore.instrument._decorators import (
    attributes,
    generation,
    generation_span,
    rag,
    rag_span,
    record_contexts,
    retriever,
    retriever_span,
)
from tracescore.instrument._setup import (
    Instrumentation,
    InstrumentSettings,
    force_flush,
    init,
    shutdown,
)

__all__ = [
    "BUILTIN_REDACTORS",
    "ContentSettings",
    "InstrumentSettings",
    "Instrumentation",
    "attributes",
    "force_flush",
    "generation",
    "generation_span",
    "init",
    "rag",
    "rag_span",
    "record_contexts",
    "retriever",
    "retriever_span",
    "shutdown",
]
