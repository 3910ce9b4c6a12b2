"""tool_selection and goal_completion: typed verdicts from one shared judge call, over real HTTP (the `openai`
client against JudgeServer); not applicable without a question, and tool_selection without a tool call."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tracescore.model import MetricStatus, RagRecord, Run, RunToolCall
from tracescore.score import make_metrics
from tracescore.score.judges import OfflineJudge, OpenAIJudge
from tracescore.score.metrics import evaluate_record, goal_completion, tool_selection
from tracescore.testing.judge_server import Fault, JudgeServer, fenced_data, task_of

MakeJudge = Callable[..., OpenAIJudge]  # the make_judge fixture (tests/score/conftest.py)
QUESTION = "How long does the Aurora X2 battery last, and what does it cost?"
SEARCH = RunToolCall(
    name="search_docs", arguments='{"query": "Aurora X2 battery"}', result="It lasts 14 hours."
)
RUN = Run(
    tool_calls=(SEARCH,),
    tool_calls_total=1,
    steps=2,
    tools_offered=("search_docs: Search the product docs.", "weather: Today's weather."),
)
RECORD = RagRecord(query=QUESTION, contexts=("It lasts 14 hours.",), answer="It lasts 14 hours.", run=RUN)
VERDICTS = {
    "tool_selection": {"reason": "search_docs fits a product question.", "verdict": "fitting"},
    "goal_completion": {
        "reason": "The battery life is given, the price is not.",
        "verdict": "partial",
        "missing": ["the price"],
    },
}


@pytest.fixture
def judge(make_judge: MakeJudge) -> OpenAIJudge:
    return make_judge(max_retries=1)


async def test_both_verdicts_come_from_one_shared_judge_call(server: JudgeServer, judge: OpenAIJudge) -> None:
    server.script(VERDICTS)
    selection, completion = await evaluate_record(
        RECORD, make_metrics(["tool_selection", "goal_completion"]), judge
    )
    assert server.stats.chat_requests == 1 and {task_of(b) for b in server.chat_requests} == {
        "run_assessment"
    }
    assert (selection.score, selection.label, selection.reason) == (
        1.0,
        "fitting",
        "search_docs fits a product question.",
    )
    assert (completion.score, completion.label) == (0.5, "partial")
    assert completion.details == {"verdict": "partial", "missing": ["the price"]}
    assert selection.usage.calls + completion.usage.calls == 1  # charged once
    # What the judge saw: the question, the answer, the tools offered and the calls, as data.
    [body] = server.chat_requests
    assert fenced_data(body) == {
        "question": QUESTION,
        "answer": "It lasts 14 hours.",
        "tools_offered": list(RUN.tools_offered),
        "tool_calls": [
            {"name": "search_docs", "arguments": SEARCH.arguments, "result": SEARCH.result, "ok": True}
        ],
        "tool_calls_not_shown": 0,
    }


async def test_an_unfitting_choice_names_the_calls(server: JudgeServer, judge: OpenAIJudge) -> None:
    server.script(
        {
            "tool_selection": {
                "reason": "weather cannot answer.",
                "verdict": "unfitting",
                "unfitting_calls": [0],
            },
            "goal_completion": {"reason": "Nothing asked is answered.", "verdict": "incomplete"},
        }
    )
    selection, completion = await evaluate_record(RECORD, [tool_selection(), goal_completion()], judge)
    assert (selection.score, selection.label, selection.details["unfitting_calls"]) == (0.0, "unfitting", [0])
    assert (completion.score, completion.label) == (0.0, "incomplete")


async def test_a_verdict_outside_the_vocabulary_is_repaired_or_an_error(
    server: JudgeServer, judge: OpenAIJudge
) -> None:
    bad = {**VERDICTS, "goal_completion": {"reason": "?", "verdict": "mostly"}}
    server.script(bad, VERDICTS)  # the repair round gets a valid reply
    (completion,) = await evaluate_record(RECORD, [goal_completion()], judge)
    assert completion.status is MetricStatus.OK and completion.label == "partial"
    server.inject(Fault.SERVER_ERROR)
    server.inject(Fault.SERVER_ERROR)
    (failed,) = await evaluate_record(RECORD, [goal_completion()], judge)
    assert failed.status is MetricStatus.ERROR and failed.reason


async def test_without_a_question_or_a_tool_call_they_do_not_apply(
    server: JudgeServer, judge: OpenAIJudge
) -> None:
    unasked = RECORD.model_copy(update={"query": None})
    results = await evaluate_record(unasked, [tool_selection(), goal_completion()], judge)
    assert [r.status for r in results] == [MetricStatus.NOT_APPLICABLE] * 2
    assert all("question was not recorded" in (r.reason or "") for r in results)

    no_tools = RECORD.model_copy(update={"run": Run(steps=1)})
    server.script(VERDICTS)
    selection, completion = await evaluate_record(no_tools, [tool_selection(), goal_completion()], judge)
    assert selection.status is MetricStatus.NOT_APPLICABLE and selection.reason == "the run called no tool"
    assert completion.label == "partial"

    no_run = RECORD.model_copy(update={"run": None})
    results = await evaluate_record(no_run, [tool_selection(), goal_completion()], judge)
    assert all(
        r.status is MetricStatus.NOT_APPLICABLE and "no agent run" in (r.reason or "") for r in results
    )
    assert server.stats.chat_requests == 1  # only the goal of the run without tools was asked


def test_the_offline_judge_refuses_them_before_scoring() -> None:
    from tracescore.score import IncompatibleJudge, evaluate

    with pytest.raises(IncompatibleJudge, match="goal_completion, tool_selection"):
        evaluate(RECORD, ["tool_selection", "goal_completion"], OfflineJudge())


async def test_a_template_metric_can_read_the_runs_tool_calls(
    server: JudgeServer, judge: OpenAIJudge
) -> None:
    """The custom-metric machinery: `{{ tool_calls }}` in a template hands the judge the run's calls."""
    from tracescore.score.metrics import LLMJudgeMetric

    metric = LLMJudgeMetric("searched_first", "Did the agent search before answering? See {{ tool_calls }}.")
    server.script({"reason": "It searched.", "score": 5})
    result = await metric.score(RECORD, judge)
    assert result.score == 1.0
    assert fenced_data(server.chat_requests[-1])["tool_calls"][0]["name"] == "search_docs"
    no_run = await metric.score(RECORD.model_copy(update={"run": None}), judge)
    assert no_run.status is MetricStatus.NOT_APPLICABLE and server.stats.chat_requests == 1
