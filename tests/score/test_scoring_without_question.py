"""Faithfulness needs an answer and evidence, not a question: a record whose question was not recorded is
scored for faithfulness, and every metric that needs the question says `not_applicable` with the reason:
answer relevancy, context relevance, a custom metric whose template names the question. The library, the
batch scorer and an LLM judge over HTTP all read it the same way."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.model import MetricStatus, RagRecord
from tracescore.score import evaluate, evaluate_dataset
from tracescore.score.judges import OfflineJudge, OpenAIJudge
from tracescore.score.metrics import Faithfulness, LLMJudgeMetric, Quality, evaluate_record
from tracescore.testing.judge_server import JudgeServer, fenced_data, task_of

CONTEXTS = ["The Aurora X2 battery lasts 14 hours on a single charge.", "The Aurora X2 weighs 1.2 kg."]
FAITHFUL = "The Aurora X2 battery lasts 14 hours."
HALLUCINATED = "The Aurora X2 battery lasts 40 hours and it weighs 3 kg."

MakeJudge = Callable[..., OpenAIJudge]


@pytest.mark.parametrize("query", [None, "", "  "])
def test_faithfulness_is_scored_and_the_question_metrics_say_why_not(query: str | None) -> None:
    good, bad = (
        evaluate({"query": query, "contexts": CONTEXTS, "answer": answer})
        for answer in (FAITHFUL, HALLUCINATED)
    )
    by_metric = {r.metric: r for r in good}
    assert (
        by_metric["faithfulness"].status is MetricStatus.OK and by_metric["faithfulness"].label == "faithful"
    )
    assert {r.metric: r.label for r in bad}["faithfulness"] == "hallucinated"
    for name in ("answer_relevancy", "context_relevance"):
        result = by_metric[name]
        assert result.status is MetricStatus.NOT_APPLICABLE and result.score is None
        assert result.reason is not None and "question was not recorded" in result.reason
        assert result.details["question_recorded"] is False


async def test_quality_is_the_faithfulness_it_could_score() -> None:
    record = RagRecord(query=None, contexts=tuple(CONTEXTS), answer=FAITHFUL)
    [quality] = await evaluate_record(record, [Quality()], OfflineJudge())
    assert quality.score == quality.details["components"]["faithfulness"] == 1.0
    assert set(quality.details["unscored"]) == {"answer_relevancy", "context_relevance"}


async def test_an_llm_judge_gets_a_null_question_and_custom_metrics_naming_it_are_not_applicable(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    judge = make_judge()
    record = RagRecord(query=None, contexts=tuple(CONTEXTS), answer=FAITHFUL)
    on_topic = LLMJudgeMetric("on_topic", "Does the answer address {{ query }}?")
    polite = LLMJudgeMetric("polite", "Rate how polite the answer is.")  # names no field: gets the record
    server.script({"reason": "Polite.", "score": 4})
    results = {r.metric: r for r in await evaluate_record(record, [on_topic, polite], judge)}
    assert results["on_topic"].status is MetricStatus.NOT_APPLICABLE
    assert "template uses it" in (results["on_topic"].reason or "")
    assert results["polite"].status is MetricStatus.OK
    [sent] = [fenced_data(body) for body in server.chat_requests if task_of(body) == "custom_polite"]
    assert sent["query"] is None and sent["answer"] == FAITHFUL

    server.reset()
    [faithfulness] = await evaluate_record(record, [Faithfulness()], judge)
    assert faithfulness.status is MetricStatus.OK
    analysis = next(fenced_data(b) for b in server.chat_requests if (task_of(b) or "").endswith("analysis"))
    assert analysis["question"] is None


def test_a_dataset_row_with_an_empty_question_is_read_and_a_missing_column_still_says_how_to_map_it() -> None:
    rows = evaluate_dataset(
        [
            {"question": None, "contexts": CONTEXTS, "answer": FAITHFUL},
            {"contexts": CONTEXTS, "answer": FAITHFUL},
        ]
    ).rows
    assert rows[0]["faithfulness"] == 1.0 and rows[0]["answer_relevancy"] is None
    assert "question was not recorded" in rows[0]["reason"]
    assert rows[1]["faithfulness"] is None and "column_map=" in rows[1]["reason"]


def test_tracescore_score_scores_a_line_whose_query_is_null(tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    lines = [
        {"id": i, "query": None, "contexts": CONTEXTS, "answer": a}
        for i, a in ((1, FAITHFUL), (2, HALLUCINATED))
    ]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = CliRunner().invoke(
        main, ["score", str(source), "--judge", "offline", "--out", str(out), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["results"]["faithfulness"]["label"] for r in rows] == ["faithful", "hallucinated"]
    assert all(r["answer_relevancy"] is None and r["context_relevance"] is None for r in rows)
    assert all("question was not recorded" in r["reason"] for r in rows)
