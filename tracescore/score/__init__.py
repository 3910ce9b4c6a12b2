"""Score: metrics ask a judge typed questions and turn the answers into scores.

The public API, for notebooks, pipelines and CI::

    from tracescore.score import evaluate_dataset, Faithfulness, OfflineJudge
    result = evaluate_dataset(records_or_dataframe, [Faithfulness()], OfflineJudge())

The value objects (`RagRecord`, `MetricResult`, ...) live in `tracescore.model` and are re-exported here.
Everything else is imported on first use: importing `tracescore.score` for a value object must not pay for
the judges' HTTP clients.
"""

from __future__ import annotations

import importlib
from typing import Any

from tracescore.model import MetricResult, MetricStatus, RagRecord, Usage

# Public name -> the private module that defines it.
_LAZY = {
    # scoring
    "evaluate": "tracescore.score._evaluate",
    "aevaluate": "tracescore.score._evaluate",
    "evaluate_dataset": "tracescore.score._evaluate",
    "aevaluate_dataset": "tracescore.score._evaluate",
    "evaluate_many": "tracescore.score._evaluate",
    "EvaluationResult": "tracescore.score._evaluate",
    "IncompatibleJudge": "tracescore.score._evaluate",
    "BatchSummary": "tracescore.score._summary",
    "assert_scores": "tracescore.score._assertions",
    "ScoreAssertionError": "tracescore.score._assertions",
    "is_flagged": "tracescore.score._labels",
    # metrics
    "Metric": "tracescore.score.metrics._protocol",
    "Faithfulness": "tracescore.score.metrics._faithfulness",
    "Verdict": "tracescore.score.metrics._faithfulness",
    "faithfulness_label": "tracescore.score.metrics._faithfulness",
    "AnswerRelevancy": "tracescore.score.metrics._answer_relevancy",
    "ContextRelevance": "tracescore.score.metrics._context_relevance",
    "Quality": "tracescore.score.metrics._quality",
    "DistinctN": "tracescore.score.metrics._custom",
    "LLMJudgeMetric": "tracescore.score.metrics._custom",
    "PythonMetric": "tracescore.score.metrics._custom",
    "python_metric": "tracescore.score.metrics._custom",
    "rubric": "tracescore.score.metrics._custom",
    # judges and embeddings
    "Judge": "tracescore.score.judges._protocol",
    "JudgeError": "tracescore.score.judges._protocol",
    "OfflineJudge": "tracescore.score.judges._offline",
    "OpenAIJudge": "tracescore.score.judges._openai",
    "OpenAIJudgeSettings": "tracescore.score.judges._openai",
    "OpenAIEmbedder": "tracescore.score.judges._embeddings",
    "OpenAIEmbedderSettings": "tracescore.score.judges._embeddings",
}

__all__ = ["MetricResult", "MetricStatus", "RagRecord", "Usage", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracescore.score' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
