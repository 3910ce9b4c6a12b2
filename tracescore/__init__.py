"""tracescore: catch hallucinations in production RAG.

Decorate RAG calls (`@tracescore.rag`, `@tracescore.retriever`, `@tracescore.generation`), export their spans
to Kafka (`tracescore.init`), and run `tracescore consume` (`pip install '.[consumer]'` in a checkout) to
score them and emit evaluation spans, metrics and records.

The SDK's names are imported on first use: `import tracescore.score` (a notebook, a CI gate) or any other
stage must not load the SDK and its Kafka producer just because this package is their parent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracescore._lazy import lazy_exports

if TYPE_CHECKING:  # the names below, typed for checkers and IDEs
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
_SDK = {name: "tracescore.instrument" for name in __all__ if name != "__version__"}
__getattr__, __dir__ = lazy_exports(__name__, _SDK, __all__)
