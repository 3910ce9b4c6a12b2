"""The agent-run signals: read from the record's run, no judge call, a status, a label and a reason each."""

from __future__ import annotations

import pytest

from tracescore.model import MetricStatus, RagRecord, Run, RunToolCall
from tracescore.score import make_metrics
from tracescore.score.judges import OfflineJudge
from tracescore.score.metrics import (
    RepeatedToolCalls,
    RunBudget,
    ToolErrors,
    UngroundedAnswer,
    UnusedToolResults,
    evaluate_record,
)

QUESTION = "How long does the Aurora X2 battery last, and what does it weigh?"
BATTERY = "The Aurora X2 battery lasts 14 hours on a single charge."
WEIGHT = "The Aurora X2 weighs 1.2 kg."
SUPPORT = "Aurora support is available Monday to Friday."
ANSWER = "The battery lasts 14 hours and it weighs 1.2 kg."
SIGNALS = ["tool_errors", "ungrounded_answer", "unused_tool_results", "repeated_tool_calls", "run_budget"]


def search(
    result: str | None, *, topic: str = "battery", ok: bool = True, name: str = "search"
) -> RunToolCall:
    return RunToolCall(
        name=name,
        arguments=f'{{"topic": "{topic}"}}',
        result=result,
        ok=ok,
        error=None if ok else "timed out",
    )


def record(*calls: RunToolCall, answer: str = ANSWER, **run: object) -> RagRecord:
    facts: dict[str, object] = {"steps": 2, "tool_calls_total": len(calls), **run}
    facts.setdefault("failed_tool_calls", sum(not c.ok for c in calls))
    return RagRecord(query=QUESTION, contexts=(BATTERY,), answer=answer, run=Run(tool_calls=calls, **facts))


async def test_every_signal_is_not_applicable_without_a_run_and_calls_no_judge() -> None:
    plain = RagRecord(query=QUESTION, contexts=(BATTERY,), answer=ANSWER)
    results = await evaluate_record(plain, make_metrics(SIGNALS), OfflineJudge())
    assert [r.status for r in results] == [MetricStatus.NOT_APPLICABLE] * len(SIGNALS)
    assert all("no agent run" in (r.reason or "") for r in results)
    assert all(r.usage.calls == 0 for r in results)


@pytest.mark.parametrize(
    ("calls", "answer", "score", "label"),
    [
        ((search(BATTERY), search(WEIGHT, topic="weight")), ANSWER, 1.0, "no_failures"),
        ((search(None, ok=False), search(BATTERY)), ANSWER, 1.0, "recovered"),
        ((search(None, ok=False),), "Sorry, the search failed; I cannot tell.", 0.5, "acknowledged"),
        ((search(None, ok=False), search(WEIGHT, topic="weight", name="facts")), ANSWER, 0.0, "ignored"),
    ],
)
async def test_tool_errors(calls: tuple[RunToolCall, ...], answer: str, score: float, label: str) -> None:
    result = await ToolErrors().score(record(*calls, answer=answer), OfflineJudge())
    assert (result.score, result.label) == (score, label), result.reason
    if label != "no_failures":
        assert result.details["failed"][0]["error"] == "timed out"


async def test_tool_errors_needs_a_tool_call() -> None:
    result = await ToolErrors().score(record(), OfflineJudge())
    assert result.status is MetricStatus.NOT_APPLICABLE and result.reason == "the run called no tool"


async def test_an_answer_with_nothing_looked_up_is_ungrounded() -> None:
    judge = OfflineJudge()
    grounded = await UngroundedAnswer().score(record(search(BATTERY)), judge)
    retrieved = await UngroundedAnswer().score(record(retrievals=1), judge)
    follow_up = await UngroundedAnswer().score(record(earlier_turn_documents=2), judge)
    failed = await UngroundedAnswer().score(record(search(None, ok=False)), judge)
    refusal = await UngroundedAnswer().score(record(answer="I don't know."), judge)
    assert (grounded.label, retrieved.label, follow_up.label) == ("grounded", "grounded", "earlier_turns")
    assert (failed.score, failed.label) == (0.0, "ungrounded") and "1 failed tool call" in (
        failed.reason or ""
    )
    assert refusal.status is MetricStatus.NOT_APPLICABLE


async def test_tool_results_the_answer_used_none_of() -> None:
    judge = OfflineJudge()
    used = await UnusedToolResults().score(record(search(BATTERY), search(WEIGHT, topic="weight")), judge)
    assert (used.score, used.label) == (1.0, "all_used")
    calls = (search(BATTERY), search(WEIGHT, topic="weight"), search(SUPPORT, topic="support", name="hours"))
    result = await UnusedToolResults().score(record(*calls), judge)
    assert result.label == "unused" and result.score == pytest.approx(2 / 3)
    assert [c["name"] for c in result.details["unused"]] == ["hours"]
    # A final-answer tool's result is the answer: nothing the answer could have used.
    final = RunToolCall(name="final_answer", arguments="{}", result=ANSWER)
    assert (await UnusedToolResults().score(record(search(BATTERY), final), judge)).details["results"] == 1


async def test_the_same_call_after_it_answered_is_a_repeat_a_retry_is_not() -> None:
    judge = OfflineJudge()
    again = search(BATTERY).model_copy(update={"arguments": '{ "topic":"battery" }'})  # same JSON, spaced
    repeated = await RepeatedToolCalls().score(
        record(search(BATTERY), again, search(WEIGHT, topic="w")), judge
    )
    assert repeated.label == "repeated" and repeated.score == pytest.approx(2 / 3)
    assert repeated.details["repeats"] == [
        {"name": "search", "arguments": '{"topic": "battery"}', "repeated": 1}
    ]
    retried = await RepeatedToolCalls().score(record(search(None, ok=False), search(BATTERY)), judge)
    assert (retried.score, retried.label) == (1.0, "no_repeats")


async def test_run_budget() -> None:
    judge = OfflineJudge()
    within = await RunBudget().score(record(search(BATTERY), prompt_tokens=84, completion_tokens=18), judge)
    assert (within.score, within.label) == (1.0, "within_budget")
    assert "2 steps, 1 tool call, 84 prompt + 18 completion tokens" in (within.reason or "")
    over = await RunBudget(max_steps=4).score(record(steps=8), judge)
    assert (over.score, over.label) == (0.5, "over_budget") and over.details["steps"] == 8


async def test_a_run_past_the_views_limit_is_examined_in_part_and_says_so() -> None:
    calls = tuple(search(BATTERY, topic=str(i)) for i in range(64))
    result = await RepeatedToolCalls().score(record(*calls, tool_calls_total=1000), OfflineJudge())
    assert result.details["omitted_tool_calls"] == 936
    assert result.warnings == ["the run made 1000 tool calls; the first 64 were examined"]
