"""tracescore: catch hallucinations in production RAG.

Decorate RAG calls (`@tracescore.rag`), export their spans to Kafka (`tracescore.init`), and run
`tracescore consume` to score them and emit evaluation spans, metrics and records.
"""

from tracescore.instrument import Instrumentation, InstrumentSettings, init, rag, record_contexts, shutdown

__version__ = "0.1.0"

__all__ = [
    "InstrumentSettings",
    "Instrumentation",
    "__version__",
    "init",
    "rag",
    "record_contexts",
    "shutdown",
]
