"""Instrument: decorators that put a RAG call's query, contexts and answer on an OpenTelemetry span."""

from tracescore.instrument._decorators import rag, record_contexts
from tracescore.instrument._setup import Instrumentation, InstrumentSettings, init, shutdown

__all__ = ["InstrumentSettings", "Instrumentation", "init", "rag", "record_contexts", "shutdown"]
