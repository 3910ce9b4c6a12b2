"""The data model every stage shares: what flows from consume through extract, sample and score to emit.

Spans and traces (`DecodedSpan`, `Trace`), the RAG interactions recognised in them (`RagSpan`, its
`RagRecord` and `ContextSource`), and what a judge returns (`MetricResult`, `MetricStatus`, `Usage`,
`Verdict`). Stages import these from here, never from one another's private modules. Light on purpose
(pydantic only): the instrumentation SDK's install can import it.
"""

from tracescore.model._results import MetricResult, MetricStatus, RagRecord, Usage, Verdict
from tracescore.model._trace import ContextSource, DecodedSpan, RagSpan, Trace

__all__ = [
    "ContextSource",
    "DecodedSpan",
    "MetricResult",
    "MetricStatus",
    "RagRecord",
    "RagSpan",
    "Trace",
    "Usage",
    "Verdict",
]
