"""LLM-judged run metrics: `tool_selection` (were fitting tools chosen for the question) and `goal_completion`
(did the run answer what was asked), each a typed verdict.

Both are `VerdictMetric`s (the custom-metric machinery) over one task, `run.assessment`, that returns both
verdicts: asked with the same input, the two metrics cost one judge call per record. The judge sees the
question, the answer, the tools the model was offered and its tool calls (name, arguments, result, whether
it failed), never the run's spans. Without a question both are `not_applicable` (the question was not
recorded); without a tool call, `tool_selection` is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from tracescore.model import MetricResult, RagRecord
from tracescore.score.judges._protocol import Judge, JudgeTask
from tracescore.score.metrics._custom import NO_RUN, VerdictMetric, VerdictScore, tool_call_rows
from tracescore.score.metrics._protocol import question_missing

__all__ = [
    "RUN_ASSESSMENT_TASK",
    "GoalCompletionVerdict",
    "RunAssessment",
    "RunInput",
    "ToolSelectionVerdict",
    "goal_completion",
    "tool_selection",
]


class RunToolCallInput(BaseModel):
    name: str
    arguments: str | None = Field(default=None, description="As the model wrote them (JSON text).")
    result: str | None = Field(default=None, description="What the tool returned; null when not recorded.")
    ok: bool = Field(default=True, description="False when the call failed.")


class RunInput(BaseModel):
    question: str = Field(description="What the user asked.")
    answer: str = Field(description="The run's final answer.")
    tools_offered: list[str] = Field(default_factory=list, description="The tools the model could call.")
    tool_calls: list[RunToolCallInput] = Field(description="The run's tool calls, in order.")
    tool_calls_not_shown: int = Field(default=0, description="Further calls past the first ones shown.")


class ToolSelectionVerdict(BaseModel):
    reason: str = Field(description="One or two sentences on why, citing the calls.")
    verdict: Literal["fitting", "partly_fitting", "unfitting"] = Field(
        description="fitting: the tools called suit the question (and none offered would suit it better); "
        "partly_fitting: some calls were needless or a better tool was offered; unfitting: the tools called "
        "cannot answer it."
    )
    unfitting_calls: list[int] = Field(default_factory=list, description="Indexes of calls that did not fit.")


class GoalCompletionVerdict(BaseModel):
    reason: str = Field(description="One or two sentences on why, citing the question and the answer.")
    verdict: Literal["complete", "partial", "incomplete"] = Field(
        description="complete: the answer gives everything asked; partial: some of it; incomplete: none "
        "of it (a refusal, an error passed on, another question answered)."
    )
    missing: list[str] = Field(default_factory=list, description="What was asked and not answered.")


class RunAssessment(BaseModel):
    tool_selection: ToolSelectionVerdict
    goal_completion: GoalCompletionVerdict


_EXAMPLE_QUESTION = "What is the battery life of the Aurora X2, and its price?"
RUN_ASSESSMENT_TASK: JudgeTask[RunInput, RunAssessment] = JudgeTask(
    name="run.assessment",
    instruction=(
        "Assess an agent's run. (1) tool_selection: did the agent call tools that fit the question, given "
        "the tools it was offered? Judge the choice of tool and arguments, not whether the tool then "
        "worked. With no tool calls, say so and answer fitting. (2) goal_completion: does the final answer "
        "give what the question asks, every part of it? Judge coverage, not correctness against the tool "
        "results."
    ),
    input_model=RunInput,
    output_model=RunAssessment,
    examples=(
        (
            RunInput(
                question=_EXAMPLE_QUESTION,
                answer="The Aurora X2 battery lasts 14 hours.",
                tools_offered=["product_facts: Look up product facts.", "weather: Today's weather."],
                tool_calls=[RunToolCallInput(name="weather", arguments='{"city": "Oslo"}', result="Sunny")],
            ),
            RunAssessment(
                tool_selection=ToolSelectionVerdict(
                    reason="A weather lookup cannot give product facts; product_facts was offered.",
                    verdict="unfitting",
                    unfitting_calls=[0],
                ),
                goal_completion=GoalCompletionVerdict(
                    reason="The answer gives the battery life but not the price.",
                    verdict="partial",
                    missing=["the price of the Aurora X2"],
                ),
            ),
        ),
    ),
)
_SCORES = {"fitting": 1.0, "partly_fitting": 0.5, "unfitting": 0.0, "complete": 1.0, "partial": 0.5}


def _run_input(record: RagRecord, judge: Judge, metric: str) -> RunInput | MetricResult:
    """The input both metrics send (identical, so the call is shared), or why `metric` does not apply."""
    run = record.run
    if run is None:
        return MetricResult.not_applicable(metric, NO_RUN, judge=judge.name)
    unasked = question_missing(metric, record, judge, "the run is judged against what was asked")
    if unasked is not None:
        return unasked
    if metric == "tool_selection" and not run.tool_calls_total:
        return MetricResult.not_applicable(metric, "the run called no tool", judge=judge.name)
    return RunInput(
        question=record.query or "",
        answer=record.answer,
        tools_offered=list(run.tools_offered),
        tool_calls=[RunToolCallInput(**row) for row in tool_call_rows(run)],
        tool_calls_not_shown=run.omitted_tool_calls,
    )


def _run_metric(
    name: str, read: Callable[[RunAssessment], BaseModel]
) -> VerdictMetric[RunInput, RunAssessment]:
    """A metric reading its verdict (`read`) out of the shared assessment."""

    def scored(output: RunAssessment) -> VerdictScore:
        verdict = read(output)
        details = verdict.model_dump(exclude={"reason"})
        return VerdictScore(_SCORES.get(verdict.verdict, 0.0), verdict.verdict, verdict.reason, details)

    return VerdictMetric(
        name, RUN_ASSESSMENT_TASK, lambda record, judge: _run_input(record, judge, name), scored
    )


def tool_selection() -> VerdictMetric[RunInput, RunAssessment]:
    """Were fitting tools chosen for the question: 1.0 fitting, 0.5 partly_fitting, 0.0 unfitting."""
    return _run_metric("tool_selection", lambda output: output.tool_selection)


def goal_completion() -> VerdictMetric[RunInput, RunAssessment]:
    """Did the run answer what was asked: 1.0 complete, 0.5 partial, 0.0 incomplete."""
    return _run_metric("goal_completion", lambda output: output.goal_completion)
