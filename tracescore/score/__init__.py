"""Score: metrics ask a judge typed questions and turn the answers into scores."""

from tracescore.score._types import MetricResult, MetricStatus, RagRecord, Usage

__all__ = ["MetricResult", "MetricStatus", "RagRecord", "Usage"]
