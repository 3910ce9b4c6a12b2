"""tracescore: catch hallucinations in production RAG.

Decorate RAG calls (`@tracescore.rag`, `@tracescore.retriever`, `@tracescore.generation`), export their spans
to Kafka (`tracescore.init`), and run `tracescore consume` (`pip install 'tracescore[consumer]'`) to score
them and emit evaluation spans, metrics and records.
"""

from tracescore.instrument import (
    BUILTIN_REDACTORS,
    ContentSettings,
    Instrumentation,
    InstrumentSettings,
    attributes,
    force_flush,
    generation,
    generation_span,
    init,
    rag,
    rag_span,
    record_contexts,
    retriever,
    retriever_span,
    shutdown,
)

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_REDACTORS",
    "ContentSettings",
    "InstrumentSettings",
    "Instrumentation",
    "__version__",
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
