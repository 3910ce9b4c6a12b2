"""Metrics: a pydantic task for the judge plus a pure scoring function. Stateless and async."""

from tracescore.score.metrics._faithfulness import Faithfulness, Verdict
from tracescore.score.metrics._protocol import Metric, evaluate

__all__ = ["Faithfulness", "Metric", "Verdict", "evaluate"]
