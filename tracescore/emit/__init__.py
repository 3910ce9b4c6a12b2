"""Emit: attach scores where people look: evaluation spans on the trace, records on Kafka, metrics."""

from tracescore.emit._metrics import EvaluationMetrics
from tracescore.emit._records import SCHEMA_VERSION, EvaluationRecord, evaluation_record
from tracescore.emit._spans import evaluation_span

__all__ = ["SCHEMA_VERSION", "EvaluationMetrics", "EvaluationRecord", "evaluation_record", "evaluation_span"]
