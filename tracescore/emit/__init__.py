"""Emit: attach scores where people look: evaluation spans on the trace, records on Kafka, metrics (and the
same for conversation records: a Phoenix session annotation, a span under the last turn, metrics).

The evaluation record it writes is the shared model's (`tracescore.model.EvaluationRecord`); the names that
once lived here still import from here, with a DeprecationWarning.
"""

from tracescore._lazy import moved_names
from tracescore.emit._conversations import conversation_span, session_annotation
from tracescore.emit._evidence import EVIDENCE_CHARS, turn_evidence
from tracescore.emit._explain import explanation
from tracescore.emit._kafka import (
    DLQ_TOPIC,
    EVALUATION_SPANS_HEADER,
    KafkaEvaluationSink,
    KafkaOutputSettings,
    Output,
)
from tracescore.emit._metrics import LABEL_THRESHOLD, SERIES_LIMIT, ConversationMetrics, EvaluationMetrics
from tracescore.emit._phoenix import PhoenixAnnotations, PhoenixSettings, span_annotation
from tracescore.emit._records import evaluation_record
from tracescore.emit._sink import RecordSink
from tracescore.emit._spans import evaluation_span, record_span

__all__ = [
    "DLQ_TOPIC",
    "EVALUATION_SPANS_HEADER",
    "EVIDENCE_CHARS",
    "LABEL_THRESHOLD",
    "SERIES_LIMIT",
    "ConversationMetrics",
    "EvaluationMetrics",
    "KafkaEvaluationSink",
    "KafkaOutputSettings",
    "Output",
    "PhoenixAnnotations",
    "PhoenixSettings",
    "RecordSink",
    "conversation_span",
    "evaluation_record",
    "evaluation_span",
    "explanation",
    "record_span",
    "session_annotation",
    "span_annotation",
    "turn_evidence",
]

__getattr__ = moved_names(
    __name__,
    dict.fromkeys(
        ("SCHEMA_VERSION", "AnnotatorKind", "EvaluationRecord", "annotator_kind"), "tracescore.model"
    ),
)
