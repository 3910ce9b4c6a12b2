"""Metrics: a pydantic task for the judge plus a pure scoring function. Stateless and async."""

from tracescore._lazy import moved_names
from tracescore.score.metrics._answer_relevancy import AnswerRelevancy
from tracescore.score.metrics._context_relevance import ContextRelevance
from tracescore.score.metrics._custom import (
    DistinctN,
    LLMJudgeMetric,
    PythonMetric,
    VerdictMetric,
    VerdictScore,
    python_metric,
)
from tracescore.score.metrics._earlier import Regrounded, ground_claims
from tracescore.score.metrics._faithfulness import Faithfulness
from tracescore.score.metrics._protocol import Metric, UsesContexts, evaluate_record, uses_judge
from tracescore.score.metrics._protocol import evaluate as evaluate  # the former name of evaluate_record
from tracescore.score.metrics._quality import Quality, letter_grade
from tracescore.score.metrics._run_judged import goal_completion, tool_selection
from tracescore.score.metrics._run_signals import (
    RepeatedToolCalls,
    RunBudget,
    ToolErrors,
    UngroundedAnswer,
    UnusedToolResults,
)

__all__ = [
    "AnswerRelevancy",
    "ContextRelevance",
    "DistinctN",
    "Faithfulness",
    "LLMJudgeMetric",
    "Metric",
    "PythonMetric",
    "Quality",
    "Regrounded",
    "RepeatedToolCalls",
    "RunBudget",
    "ToolErrors",
    "UngroundedAnswer",
    "UnusedToolResults",
    "UsesContexts",
    "VerdictMetric",
    "VerdictScore",
    "evaluate_record",
    "goal_completion",
    "ground_claims",
    "letter_grade",
    "python_metric",
    "tool_selection",
    "uses_judge",
]

__getattr__ = moved_names(__name__, {"Verdict": "tracescore.model"})
