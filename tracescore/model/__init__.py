"""The data model every stage shares: what flows from consume through extract, sample and score to emit
and alert.

Spans and traces (`DecodedSpan`, `Trace`), the RAG interactions recognised in them (`Interaction`,
formerly `RagSpan`, its `RagRecord` and `ContextSource`), what a judge returns (`MetricResult`,
`MetricStatus`, `Usage`, `Verdict`), the label rule that reads a result as flagged or not (`is_flagged`,
`label_is_bad`), and the evaluation record emit writes and alert reads (`EvaluationRecord`). Stages import
these from here (or from a stage's public `__init__`), never from one another's private modules. Light on
purpose (pydantic only): the instrumentation SDK's install can import it.
"""

from tracescore.model._labels import BAD_LABELS, GOOD_LABELS, UNLABELLED_THRESHOLD, is_flagged, label_is_bad
from tracescore.model._record import SCHEMA_VERSION, AnnotatorKind, EvaluationRecord, annotator_kind
from tracescore.model._results import MetricResult, MetricStatus, RagRecord, Usage, Verdict
from tracescore.model._trace import ContextSource, DecodedSpan, Interaction, RagSpan, Trace

__all__ = [
    "BAD_LABELS",
    "GOOD_LABELS",
    "SCHEMA_VERSION",
    "UNLABELLED_THRESHOLD",
    "AnnotatorKind",
    "ContextSource",
    "DecodedSpan",
    "EvaluationRecord",
    "Interaction",
    "MetricResult",
    "MetricStatus",
    "RagRecord",
    "RagSpan",
    "Trace",
    "Usage",
    "Verdict",
    "annotator_kind",
    "is_flagged",
    "label_is_bad",
]
