"""Score: metrics ask a judge typed questions and turn the answers into scores.

The public API, for notebooks, pipelines and CI::

    from tracescore.score import evaluate_dataset, Faithfulness, OfflineJudge
    result = evaluate_dataset(records_or_dataframe, [Faithfulness()], OfflineJudge())

The value objects (`RagRecord`, `MetricResult`, ...) and the label rule (`is_flagged`) are imported from
`tracescore.model` (from here they still import, with a DeprecationWarning). Everything here is imported on
first use: importing `tracescore.score` must not pay for the judges' HTTP clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracescore._lazy import lazy_exports

# The lazy names, typed for checkers and IDEs (Jupyter completes with jedi): `X as X` re-exports them.
if TYPE_CHECKING:
    from tracescore.score._assertions import ScoreAssertionError as ScoreAssertionError
    from tracescore.score._assertions import assert_scores as assert_scores
    from tracescore.score._baseline import Baseline as Baseline
    from tracescore.score._evaluate import EvaluationResult as EvaluationResult
    from tracescore.score._evaluate import IncompatibleJudge as IncompatibleJudge
    from tracescore.score._evaluate import aevaluate as aevaluate
    from tracescore.score._evaluate import aevaluate_dataset as aevaluate_dataset
    from tracescore.score._evaluate import check_judge as check_judge
    from tracescore.score._evaluate import evaluate as evaluate
    from tracescore.score._evaluate import evaluate_dataset as evaluate_dataset
    from tracescore.score._evaluate import evaluate_many as evaluate_many
    from tracescore.score._factory import DEFAULT_METRICS as DEFAULT_METRICS
    from tracescore.score._factory import make_judge as make_judge
    from tracescore.score._factory import make_metrics as make_metrics
    from tracescore.score._inputs import InputError as InputError
    from tracescore.score._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
    from tracescore.score._registry import MetricLoadError as MetricLoadError
    from tracescore.score._registry import builtin_metrics as builtin_metrics
    from tracescore.score._registry import load_metric_config as load_metric_config
    from tracescore.score._registry import metric_names as metric_names
    from tracescore.score._registry import resolve_metrics as resolve_metrics
    from tracescore.score._report import render_report as render_report
    from tracescore.score._summary import BatchSummary as BatchSummary
    from tracescore.score._summary import GateCondition as GateCondition
    from tracescore.score._summary import GateFailure as GateFailure
    from tracescore.score.judges import Judge as Judge
    from tracescore.score.judges import JudgeError as JudgeError
    from tracescore.score.judges import OfflineJudge as OfflineJudge
    from tracescore.score.judges import OfflineTuning as OfflineTuning
    from tracescore.score.judges import OpenAIEmbedder as OpenAIEmbedder
    from tracescore.score.judges import OpenAIEmbedderSettings as OpenAIEmbedderSettings
    from tracescore.score.judges import OpenAIJudge as OpenAIJudge
    from tracescore.score.judges import OpenAIJudgeSettings as OpenAIJudgeSettings
    from tracescore.score.metrics._answer_relevancy import AnswerRelevancy as AnswerRelevancy
    from tracescore.score.metrics._context_relevance import ContextRelevance as ContextRelevance
    from tracescore.score.metrics._custom import DistinctN as DistinctN
    from tracescore.score.metrics._custom import LLMJudgeMetric as LLMJudgeMetric
    from tracescore.score.metrics._custom import PythonMetric as PythonMetric
    from tracescore.score.metrics._custom import VerdictMetric as VerdictMetric
    from tracescore.score.metrics._custom import VerdictScore as VerdictScore
    from tracescore.score.metrics._custom import python_metric as python_metric
    from tracescore.score.metrics._custom import rubric as rubric
    from tracescore.score.metrics._faithfulness import Faithfulness as Faithfulness
    from tracescore.score.metrics._faithfulness import faithfulness_label as faithfulness_label
    from tracescore.score.metrics._protocol import Metric as Metric
    from tracescore.score.metrics._protocol import UsesContexts as UsesContexts
    from tracescore.score.metrics._quality import Quality as Quality
    from tracescore.score.metrics._run_judged import goal_completion as goal_completion
    from tracescore.score.metrics._run_judged import tool_selection as tool_selection
    from tracescore.score.metrics._run_signals import RepeatedToolCalls as RepeatedToolCalls
    from tracescore.score.metrics._run_signals import RunBudget as RunBudget
    from tracescore.score.metrics._run_signals import ToolErrors as ToolErrors
    from tracescore.score.metrics._run_signals import UngroundedAnswer as UngroundedAnswer
    from tracescore.score.metrics._run_signals import UnusedToolResults as UnusedToolResults


# Public name -> the module that defines it (or the subpackage that publishes it).
_LAZY = {
    # scoring
    "evaluate": "tracescore.score._evaluate",
    "aevaluate": "tracescore.score._evaluate",
    "evaluate_dataset": "tracescore.score._evaluate",
    "aevaluate_dataset": "tracescore.score._evaluate",
    "evaluate_many": "tracescore.score._evaluate",
    "EvaluationResult": "tracescore.score._evaluate",
    "IncompatibleJudge": "tracescore.score._evaluate",
    "InputError": "tracescore.score._inputs",
    "BatchSummary": "tracescore.score._summary",
    "GateCondition": "tracescore.score._summary",
    "GateFailure": "tracescore.score._summary",
    "Baseline": "tracescore.score._baseline",
    "assert_scores": "tracescore.score._assertions",
    "ScoreAssertionError": "tracescore.score._assertions",
    # building metrics and judges from names (the command line, config files, plugins)
    "DEFAULT_METRICS": "tracescore.score._factory",
    "make_judge": "tracescore.score._factory",
    "make_metrics": "tracescore.score._factory",
    "check_judge": "tracescore.score._evaluate",
    "ENTRY_POINT_GROUP": "tracescore.score._registry",
    "MetricLoadError": "tracescore.score._registry",
    "builtin_metrics": "tracescore.score._registry",
    "load_metric_config": "tracescore.score._registry",
    "metric_names": "tracescore.score._registry",
    "resolve_metrics": "tracescore.score._registry",
    # the HTML report of a scored file (`tracescore score --report`, `tracescore report`)
    "render_report": "tracescore.score._report",
    # metrics
    "Metric": "tracescore.score.metrics._protocol",
    "UsesContexts": "tracescore.score.metrics._protocol",
    "Faithfulness": "tracescore.score.metrics._faithfulness",
    "faithfulness_label": "tracescore.score.metrics._faithfulness",
    "AnswerRelevancy": "tracescore.score.metrics._answer_relevancy",
    "ContextRelevance": "tracescore.score.metrics._context_relevance",
    "Quality": "tracescore.score.metrics._quality",
    "DistinctN": "tracescore.score.metrics._custom",
    "LLMJudgeMetric": "tracescore.score.metrics._custom",
    "PythonMetric": "tracescore.score.metrics._custom",
    "python_metric": "tracescore.score.metrics._custom",
    "rubric": "tracescore.score.metrics._custom",
    "ToolErrors": "tracescore.score.metrics._run_signals",
    "UngroundedAnswer": "tracescore.score.metrics._run_signals",
    "UnusedToolResults": "tracescore.score.metrics._run_signals",
    "RepeatedToolCalls": "tracescore.score.metrics._run_signals",
    "RunBudget": "tracescore.score.metrics._run_signals",
    "VerdictMetric": "tracescore.score.metrics._custom",
    "VerdictScore": "tracescore.score.metrics._custom",
    "tool_selection": "tracescore.score.metrics._run_judged",
    "goal_completion": "tracescore.score.metrics._run_judged",
    # judges and embeddings: from the judges package, which says where each lives (and imports it on use)
    **dict.fromkeys(
        (
            "Judge",
            "JudgeError",
            "OfflineJudge",
            "OfflineTuning",
            "OpenAIJudge",
            "OpenAIJudgeSettings",
            "OpenAIEmbedder",
            "OpenAIEmbedderSettings",
        ),
        "tracescore.score.judges",
    ),
}

# Names whose home is the shared model; importable from here with a DeprecationWarning.
_MOVED = dict.fromkeys(
    ("MetricResult", "MetricStatus", "RagRecord", "Usage", "Verdict", "is_flagged"), "tracescore.model"
)

__all__ = [*_LAZY]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, _MOVED, extra="consumer")
