"""The call budget: the three built-in metrics (and quality) cost at most 3 judge calls per record.

End to end through the real `openai` client against the local JudgeServer, plus SharedCallsJudge on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
from pydantic import BaseModel

from tracescore.model import MetricResult, MetricStatus, RagRecord, Usage, Verdict
from tracescore.score.judges import JudgeError, Judgement, JudgeTask, OpenAIJudge
from tracescore.score.judges._memo import SharedCallsJudge
from tracescore.score.metrics import (
    AnswerRelevancy,
    ContextRelevance,
    Faithfulness,
    Metric,
    Quality,
    evaluate,
)
from tracescore.score.metrics._analysis import ANALYSIS_TASK, AnalysisInput, AnswerAnalysis, SentenceClaims
from tracescore.score.metrics._context_relevance import (
    CONTEXT_RELEVANCE_TASK,
    ContextRatings,
    ContextRelevanceInput,
)
from tracescore.score.metrics._faithfulness import VERDICTS_TASK, ClaimVerdict, VerdictsOutput
from tracescore.testing.judge_server import Fault, JudgeServer, estimate_tokens

RECORD = RagRecord(
    id="oberoi",
    query="Where is the Oberoi Group's head office?",
    contexts=(
        "The Oberoi Group is a hotel company with its head office in Delhi.",
        "Delhi has a humid subtropical climate.",
    ),
    answer="The head office is in Delhi. The group runs hotels.",
)
OTHER = RagRecord(
    id="hamlet",
    query="Who wrote Hamlet?",
    contexts=("Hamlet is a tragedy written by William Shakespeare around 1600.",),
    answer="William Shakespeare wrote Hamlet.",
)
EXPECTED_TASKS = ["answer_analysis", "context_relevance", "faithfulness_verdicts"]

MakeJudge = Callable[..., OpenAIJudge]  # the make_judge fixture (tests/score/conftest.py)


def three() -> list[Metric]:
    return [Faithfulness(), AnswerRelevancy(), ContextRelevance()]


def calls(results: Sequence[MetricResult]) -> int:
    return sum(r.usage.calls for r in results)


def _prompt_tokens_sent(server: JudgeServer) -> int:
    """The server's token estimate over the recorded requests. (server.stats adds a reply's tokens only
    after the reply is sent, so reading it right after the client got the reply races the handler.)"""
    return sum(
        estimate_tokens("\n".join(m["content"] for m in body["messages"])) for body in server.chat_requests
    )


def _tasks(server: JudgeServer) -> list[str]:
    return sorted(body["response_format"]["json_schema"]["name"] for body in server.chat_requests)


# -- end to end over HTTP --------------------------------------------------------------------------------


async def test_three_metrics_cost_three_chat_requests(server: JudgeServer, make_judge: MakeJudge) -> None:
    results = await evaluate(RECORD, three(), make_judge())

    assert [r.metric for r in results] == ["faithfulness", "answer_relevancy", "context_relevance"]
    assert all(r.status is MetricStatus.OK for r in results), [r.reason for r in results]
    assert server.stats.chat_requests == 3
    assert _tasks(server) == EXPECTED_TASKS, "one analysis shared by faithfulness and answer relevancy"
    assert calls(results) == 3
    assert sum(r.usage.prompt_tokens for r in results) == _prompt_tokens_sent(server) > 0


async def test_adding_quality_costs_no_extra_call(server: JudgeServer, make_judge: MakeJudge) -> None:
    server.latency_s = 0.02  # the metrics' requests overlap, as they do against a real model
    results = await evaluate(RECORD, [*three(), Quality()], make_judge())

    assert all(r.status is MetricStatus.OK for r in results), [r.reason for r in results]
    assert server.stats.chat_requests == 3
    assert _tasks(server) == EXPECTED_TASKS
    assert calls(results) == 3, "usage is charged once, never double counted"
    assert sum(r.usage.prompt_tokens for r in results) == _prompt_tokens_sent(server)
    by_name = {r.metric: r for r in results}
    quality = by_name["quality"]
    assert quality.details["components"] == {
        name: by_name[name].score for name in ("faithfulness", "answer_relevancy", "context_relevance")
    }


async def test_quality_alone_costs_three_calls(server: JudgeServer, make_judge: MakeJudge) -> None:
    [result] = await evaluate(RECORD, [Quality()], make_judge())
    assert result.status is MetricStatus.OK
    assert server.stats.chat_requests == 3 and result.usage.calls == 3


async def test_usage_matches_the_server_when_quality_comes_first(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    results = await evaluate(RECORD, [Quality(), *three(), Quality()], make_judge())
    assert server.stats.chat_requests == 3 and calls(results) == 3


async def test_two_records_evaluated_concurrently_cost_six(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    server.latency_s = 0.02
    judge = make_judge()
    metrics = [*three(), Quality()]
    first, second = await asyncio.gather(evaluate(RECORD, metrics, judge), evaluate(OTHER, metrics, judge))
    assert server.stats.chat_requests == 6
    assert calls(first) == 3 and calls(second) == 3
    questions = sorted(
        body["messages"][-1]["content"].count(RECORD.query) > 0 for body in server.chat_requests
    )
    assert questions == [False] * 3 + [True] * 3, "each record's own three calls"


async def test_the_same_record_evaluated_twice_pays_twice(server: JudgeServer, make_judge: MakeJudge) -> None:
    judge = make_judge()
    await asyncio.gather(evaluate(RECORD, three(), judge), evaluate(RECORD, three(), judge))
    await evaluate(RECORD, three(), judge)
    assert server.stats.chat_requests == 9, "no result is cached across evaluate() calls"


async def test_a_failed_shared_analysis_is_one_request_reported_by_both_metrics(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    server.inject(Fault.SERVER_ERROR)
    results = await evaluate(RECORD, [Faithfulness(), AnswerRelevancy()], make_judge(max_retries=0))
    assert server.stats.chat_requests == 1, "the second metric does not retry the failed call"
    assert [r.status for r in results] == [MetricStatus.ERROR, MetricStatus.ERROR]
    assert results[0].reason == results[1].reason
    assert results[0].reason.startswith("HTTP 500")


async def test_a_failed_shared_call_is_charged_once(server: JudgeServer, make_judge: MakeJudge) -> None:
    server.inject(Fault.SERVER_ERROR)
    results = await evaluate(RECORD, [Faithfulness(), AnswerRelevancy()], make_judge(max_retries=0))
    assert calls(results) == server.stats.chat_requests == 1


# -- SharedCallsJudge ------------------------------------------------------------------------------------


def _analysis_input(question: str = "Where is the head office?") -> AnalysisInput:
    return AnalysisInput(question=question, answer_sentences=["Delhi."])


class GatedJudge:
    """Holds every call at a gate so concurrent callers really overlap; counts calls per input."""

    name = "gated"

    def __init__(self, *, error: JudgeError | None = None) -> None:
        self.gate = asyncio.Event()
        self.error = error
        self.calls: list[tuple[str, BaseModel]] = []

    async def run(self, task: JudgeTask, data: BaseModel) -> Judgement:
        self.calls.append((task.name, data))
        await self.gate.wait()
        if self.error is not None:
            raise self.error
        if task is CONTEXT_RELEVANCE_TASK:
            return Judgement(ContextRatings(ratings=[]), Usage(calls=1))
        if task is VERDICTS_TASK:
            verdicts = [
                ClaimVerdict(claim_index=i, verdict=Verdict.FULLY_SUPPORTED, reason="stated")
                for i, _ in enumerate(data.claims)  # type: ignore[attr-defined]
            ]
            return Judgement(VerdictsOutput(verdicts=verdicts), Usage(calls=1))
        question = data.question  # type: ignore[attr-defined]
        analysis = AnswerAnalysis(sentences=[SentenceClaims(sentence_index=0, claims=[question])])
        return Judgement(analysis, Usage(calls=1, prompt_tokens=5), warnings=("trimmed",))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_identical_asks_are_answered_once() -> None:
    inner = GatedJudge()
    shared = SharedCallsJudge(inner)
    asks = [asyncio.create_task(shared.run(ANALYSIS_TASK, _analysis_input())) for _ in range(4)]
    await _settle()
    assert len(inner.calls) == 1, "the later asks wait for the first"
    inner.gate.set()
    results = await asyncio.gather(*asks)

    assert len(inner.calls) == 1
    assert len({r.output.model_dump_json() for r in results}) == 1
    assert [r.usage.calls for r in results] == [1, 0, 0, 0], "the first caller is charged, once"
    assert all(r.warnings == ("trimmed",) for r in results), "warnings reach every caller"
    assert shared.name == "gated" and shared.inner is inner


async def test_a_later_identical_ask_reuses_the_result_for_free() -> None:
    inner = GatedJudge()
    inner.gate.set()
    shared = SharedCallsJudge(inner)
    first = await shared.run(ANALYSIS_TASK, _analysis_input())
    again = await shared.run(ANALYSIS_TASK, _analysis_input())
    assert len(inner.calls) == 1
    assert again.output == first.output and again.usage == Usage()


async def test_different_inputs_and_tasks_are_separate_calls() -> None:
    inner = GatedJudge()
    inner.gate.set()
    shared = SharedCallsJudge(inner)
    head, founder, _ = await asyncio.gather(
        shared.run(ANALYSIS_TASK, _analysis_input("Where is the head office?")),
        shared.run(ANALYSIS_TASK, _analysis_input("Who founded the group?")),
        shared.run(
            CONTEXT_RELEVANCE_TASK, ContextRelevanceInput(question="Who founded the group?", chunks=["c"])
        ),
    )
    assert len(inner.calls) == 3
    assert head.output.sentences[0].claims == ["Where is the head office?"]
    assert founder.output.sentences[0].claims == ["Who founded the group?"], "no answer crosses inputs"
    assert head.usage.calls == founder.usage.calls == 1


async def test_an_error_is_shared_by_the_waiting_callers_and_raised_to_each() -> None:
    inner = GatedJudge(error=JudgeError("HTTP 500 after 3 attempts", usage=Usage(calls=3)))
    shared = SharedCallsJudge(inner)
    asks = [asyncio.create_task(shared.run(ANALYSIS_TASK, _analysis_input())) for _ in range(3)]
    await _settle()
    inner.gate.set()
    outcomes = await asyncio.gather(*asks, return_exceptions=True)

    assert len(inner.calls) == 1
    assert all(isinstance(o, JudgeError) for o in outcomes), outcomes
    assert {o.cause for o in outcomes} == {"HTTP 500 after 3 attempts"}  # type: ignore[union-attr]
    # A later ask of the same failed call gets the same error without calling again.
    with pytest.raises(JudgeError, match="HTTP 500"):
        await shared.run(ANALYSIS_TASK, _analysis_input())
    assert len(inner.calls) == 1


async def test_waiters_on_a_failed_call_are_not_charged_its_usage() -> None:
    inner = GatedJudge(error=JudgeError("HTTP 500 after 3 attempts", usage=Usage(calls=3)))
    shared = SharedCallsJudge(inner)
    asks = [asyncio.create_task(shared.run(ANALYSIS_TASK, _analysis_input())) for _ in range(3)]
    await _settle()
    inner.gate.set()
    outcomes = await asyncio.gather(*asks, return_exceptions=True)
    assert sum(o.usage.calls for o in outcomes) == 3  # type: ignore[union-attr]


async def test_each_evaluate_gets_its_own_shared_judge() -> None:
    inner = GatedJudge()
    inner.gate.set()
    metrics = [Faithfulness(), AnswerRelevancy()]
    first, second = await asyncio.gather(evaluate(RECORD, metrics, inner), evaluate(OTHER, metrics, inner))
    again = await evaluate(RECORD, metrics, inner)

    assert sorted(name for name, _ in inner.calls) == ["answer.analysis"] * 3 + ["faithfulness.verdicts"] * 3
    assert calls(first) == calls(second) == calls(again) == 2, "each record pays for its own calls"
    # The gated judge echoes the question as the only claim: each record sees its own analysis.
    assert [c["claim"] for c in first[0].details["claims"]] == [RECORD.query]
    assert [c["claim"] for c in second[0].details["claims"]] == [OTHER.query]
    assert [c["claim"] for c in again[0].details["claims"]] == [RECORD.query]


async def test_a_cancelled_first_caller_does_not_cancel_the_waiters() -> None:
    inner = GatedJudge()
    shared = SharedCallsJudge(inner)
    first = asyncio.create_task(shared.run(ANALYSIS_TASK, _analysis_input()))
    await _settle()
    waiter = asyncio.create_task(shared.run(ANALYSIS_TASK, _analysis_input()))
    await _settle()
    first.cancel()
    await _settle()
    inner.gate.set()
    judgement = await waiter
    assert judgement.output.sentences, "the waiter made the call itself"
    assert len(inner.calls) == 2
    # A later ask in the same record is answered from the waiter's call, not with a CancelledError.
    assert (await shared.run(ANALYSIS_TASK, _analysis_input())).usage == Usage()
