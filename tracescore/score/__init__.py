"""Score: metrics ask a judge typed questions and turn the answers into scores.

The public API, for notebooks, pipelines and CI::

    from tracescore.score import evaluate_dataset, Faithfulness, OfflineJudge
    result = evaluate_dataset(records_or_dataframe, [Faithfulness()], OfflineJudge())

The value objects (`RagRecord`, `MetricResult`, ...) and the label rule (`is_flagged`) are imported from
`tracescore.model` (from here they still import, with a DeprecationWarning). Everything here is imported on
first use: importing `tracescore.score` must not pay for the judges' HTTP clients.
"""

from __future__ import annotations

from tracescore._lazy import lazy_exports

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
