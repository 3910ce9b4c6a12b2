"""The library API: what a notebook or a pipeline imports from `tracescore.score`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import tracescore.score as score_api
from tracescore.model import FAITHFULNESS, MetricResult, RagRecord
from tracescore.score import (
    EvaluationResult,
    Faithfulness,
    GateCondition,
    GateFailure,
    IncompatibleJudge,
    InputError,
    OfflineJudge,
    Quality,
    UsesContexts,
    aevaluate_dataset,
    evaluate,
    evaluate_dataset,
    evaluate_many,
    python_metric,
    rubric,
)

GROUNDED = {
    "id": "grounded",
    "query": "Where is the Oberoi Group's head office?",
    "contexts": ["The Oberoi Group is a hotel company with its head office in Delhi."],
    "answer": "The head office is in Delhi.",
}
HALLUCINATED = {**GROUNDED, "id": "hallucinated", "answer": "The head office is in Mumbai."}


def test_everything_documented_is_importable_from_one_place() -> None:
    for name in score_api.__all__:
        assert getattr(score_api, name) is not None, name
    for name in ("OfflineJudge", "OpenAIJudge", "OpenAIEmbedder", "Faithfulness", "evaluate_dataset"):
        assert name in score_api.__all__
    with pytest.raises(AttributeError):
        score_api.no_such_name  # noqa: B018


def test_evaluate_one_dict_with_the_default_metrics_and_judge() -> None:
    results = evaluate(HALLUCINATED)
    assert [r.metric for r in results] == ["faithfulness", "answer_relevancy", "context_relevance"]
    assert results[0].score == 0.0 and results[0].judge == "offline"


@pytest.mark.parametrize(
    "row",
    [
        {  # RAGAS
            "user_input": GROUNDED["query"],
            "retrieved_contexts": GROUNDED["contexts"],
            "response": HALLUCINATED["answer"],
        },
        {  # DeepEval
            "input": GROUNDED["query"],
            "retrieval_context": GROUNDED["contexts"],
            "actual_output": HALLUCINATED["answer"],
        },
    ],
)
def test_ragas_and_deepeval_names_are_recognised(row: dict[str, Any]) -> None:
    (result,) = evaluate(row, [Faithfulness()])
    assert result.score == 0.0


def test_a_record_with_an_agents_run_is_scored_by_the_run_signals() -> None:
    """A dataset exported with the agent's tool calls (a dict, or JSON in a CSV cell) scores like a trace."""
    run = {
        "tool_calls": [{"name": "search", "result": "Error: timed out", "ok": False, "error": "timed out"}],
        "tool_calls_total": 1,
        "failed_tool_calls": 1,
        "steps": 2,
    }
    for given in (run, json.dumps(run)):
        errors, grounded = evaluate({**HALLUCINATED, "run": given}, ["tool_errors", "ungrounded_answer"])
        assert (errors.label, grounded.label) == ("ignored", "ungrounded")
    with pytest.raises(ValueError, match="run: not JSON"):
        evaluate({**HALLUCINATED, "run": "{not json"}, ["tool_errors"])


def test_a_column_map_reads_other_names_and_a_missing_column_says_how_to_map_it() -> None:
    row = {"prompt": GROUNDED["query"], "docs_text": GROUNDED["contexts"], "output": GROUNDED["answer"]}
    result = evaluate_dataset(
        [row, {"prompt": "q"}],
        ["faithfulness"],
        column_map={"query": "prompt", "contexts": "docs_text", "answer": "output"},
    )
    assert result.rows[0]["faithfulness"] == 1.0
    assert result.rows[1]["faithfulness"] is None
    assert "no such column" in result.rows[1]["reason"]
    assert (
        "'docs_text' for contexts" in result.rows[1]["reason"]
        and "'output' for answer" in result.rows[1]["reason"]
    )

    unmapped = evaluate_dataset([row], ["faithfulness"])
    reason = unmapped.rows[0]["reason"]
    assert "no query" in reason and "user_input" in reason and "column_map=" in reason
    assert unmapped.summary.invalid == 1


def test_a_column_map_naming_no_field_is_an_error_with_the_field_meant() -> None:
    """A misspelt key was ignored: the column went unread and every row scored without it."""
    row = {"question": GROUNDED["query"], "docs": GROUNDED["contexts"], "answer": GROUNDED["answer"]}
    with pytest.raises(ValueError, match=r"column_map: unknown field 'contxts' \(did you mean 'contexts'\?"):
        evaluate_dataset([row], ["faithfulness"], column_map={"contxts": "docs"})


def test_dataset_rows_come_back_in_input_order_with_labels_and_a_summary() -> None:
    again = {**GROUNDED, "id": "grounded-again"}
    records = [RagRecord.model_validate(HALLUCINATED), {**GROUNDED, "label": "faithful"}, again]
    result = evaluate_dataset(records, [Faithfulness()], OfflineJudge(), concurrency=2)
    assert isinstance(result, EvaluationResult)
    assert [r["id"] for r in result.rows] == ["hallucinated", "grounded", "grounded-again"]
    assert [r["faithfulness"] for r in result.rows] == [0.0, 1.0, 1.0]
    assert result.rows[1]["label"] == "faithful" and "label" not in result.rows[0]
    assert result.means() == {"faithfulness": pytest.approx(2 / 3)}
    assert result.summary.below_share("faithfulness") == pytest.approx(1 / 3)
    assert result.summary.gate({"faithfulness": 0.8}) == ["faithfulness: mean 0.667 is below 0.8"]


def test_the_library_gate_fails_on_records_not_scored_for_its_metrics_as_the_command_does() -> None:
    """`summary.gate` is `tracescore score`'s gate: an invalid record or a failed result of a gated metric
    fails it unless allowed; a failure of a metric the gate does not look at is not its concern."""

    @python_metric
    def strict(record: RagRecord) -> float:
        return float("nan") if "Mumbai" in record.answer else 1.0  # an ERROR result: outside 0..1

    data = [GROUNDED, {"id": "no-answer", "query": "Where?"}, HALLUCINATED]
    result = evaluate_dataset(data, [Faithfulness(), strict], OfflineJudge())
    assert result.summary.gate({"faithfulness": 0.0}) == [
        "1 of 3 records not scored (1 invalid), more than allow_unscored=0; the first: rows[1]: "
        + result.rows[1]["reason"].removeprefix("invalid input: ")
    ]
    [failure] = result.summary.gate({"strict": 0.0}, allow_unscored=1)
    assert failure.startswith("2 of 3 records not scored (1 invalid, 1 judge error), more than")
    assert failure.endswith("the first: rows[1]: " + result.rows[1]["reason"].removeprefix("invalid input: "))
    assert result.summary.gate({"faithfulness": 0.0}, allow_unscored=1) == []
    assert result.summary.gate({}) == [], "no condition, no gate"
    with pytest.raises(ValueError, match="allow_unscored"):
        result.summary.gate({"faithfulness": 0.0}, allow_unscored=-1)


def test_the_library_gate_names_its_conditions_as_its_parameters_not_as_the_commands_flags() -> None:
    """A notebook has no `--allow-unscored`: each line names what the caller passed to `gate`; the same
    failures come as data from `gate_failures`."""
    data = [GROUNDED, HALLUCINATED, {"id": "no-answer", "query": "Where?"}]
    result = evaluate_dataset(data, [Faithfulness()], OfflineJudge())
    assert result.summary.gate({"faithfulness": 0.9}, max_flagged=0) == [
        "faithfulness: 1 record flagged (50.0% of scored), more than 0",
        "faithfulness: mean 0.500 is below 0.9",
        "1 of 3 records not scored (1 invalid), more than allow_unscored=0; the first: rows[2]: "
        + result.rows[2]["reason"].removeprefix("invalid input: "),
    ]
    nothing = evaluate_dataset([{**GROUNDED, "contexts": []}], [Faithfulness()], OfflineJudge()).summary
    assert nothing.gate({"faithfulness": 0.9}, max_flagged=0.05) == [
        "faithfulness: no record could be scored (max_flagged=0.05)",
        "faithfulness: no record could be scored (fail_under={'faithfulness': 0.9})",
    ]
    flagged, below, unscored = result.summary.gate_failures({"faithfulness": 0.9}, max_flagged=0)
    assert flagged == GateFailure(GateCondition.MAX_FLAGGED, 0, FAITHFULNESS, found=1, share=0.5)
    assert below == GateFailure(GateCondition.FAIL_UNDER, 0.9, FAITHFULNESS, found=0.5)
    assert (unscored.condition, unscored.limit, unscored.found, unscored.invalid) == (
        "allow_unscored",
        0,
        1,
        1,
    )
    assert [str(f) for f in (flagged, below, unscored)] == result.summary.gate({"faithfulness": 0.9}, 0)


def test_an_id_on_two_records_fails_a_gate_and_is_named_on_the_summary_with_both_scored() -> None:
    """A golden case pasted twice weighed twice in the gate's mean and share, without a word."""
    data = [GROUNDED, HALLUCINATED, GROUNDED]
    result = evaluate_dataset(data, [Faithfulness()], OfflineJudge())
    assert [r["faithfulness"] for r in result.rows] == [1.0, 0.0, 1.0], "each record scored"
    assert result.summary.repeated_ids == {"grounded": ["rows[0]", "rows[2]"]}
    assert (
        "  1 id on more than one record, each record scored: id 'grounded' on 2 records (rows[0], rows[2])"
        in result.summary.lines()
    )
    assert result.summary.gate({"faithfulness": 0.5}) == [
        "id 'grounded' on 2 records (rows[0], rows[2]): a gate counts each record by its id (a copy weighs "
        "twice, and runs are compared by id): give each record its own id"
    ]
    [failure] = result.summary.gate_failures({}, max_flagged=1)
    assert (failure.condition, failure.found, failure.records) == (GateCondition.UNIQUE_IDS, 1, 2)
    assert result.summary.gate({}) == [], "no condition, no gate"
    unique = evaluate_dataset([GROUNDED, HALLUCINATED], [Faithfulness()], OfflineJudge()).summary
    assert unique.gate({"faithfulness": 0.5}) == [] and not unique.repeated_ids


PASSAGES = {
    "id": "passages",
    "query": GROUNDED["query"],
    "passages": GROUNDED["contexts"],  # a name tracescore does not read
    "answer": GROUNDED["answer"],
}
REFUSAL = {**GROUNDED, "id": "refusal", "contexts": [], "answer": "I don't know."}
# What the gate says of PASSAGES: the column, the names looked for, and how to map it.
NO_CONTEXTS = (
    "no contexts (looked for contexts, retrieved_contexts, retrieval_context, context, documents); the "
    "record's columns: id, query, passages, answer; map them with column_map={'contexts': '<column>'}"
)


def test_a_record_without_a_contexts_column_fails_a_gate_on_a_metric_that_reads_them() -> None:
    """A golden set whose documents sit under a name tracescore does not read (`passages`) scored those
    records not_applicable, and the gate passed on the rest. An empty list is a record retrieving nothing (a
    refusal): its own outcome, not counted."""
    result = evaluate_dataset([GROUNDED, PASSAGES, REFUSAL], [Faithfulness()], OfflineJudge())
    assert result.rows[1]["results"]["faithfulness"]["status"] == "not_applicable"
    [failure] = result.summary.gate({"faithfulness": 0.8})
    assert failure.startswith(
        "1 of 3 records not scored (1 without a contexts column), more than allow_unscored=0"
    )
    assert failure.endswith("the first: rows[1]: faithfulness: " + NO_CONTEXTS), failure
    assert result.summary.gate({"faithfulness": 0.8}, allow_unscored=1) == []
    assert evaluate_dataset([GROUNDED, REFUSAL], [Faithfulness()]).summary.gate({"faithfulness": 0.8}) == []
    mapped = evaluate_dataset([PASSAGES], [Faithfulness()], column_map={"contexts": "passages"})
    assert mapped.summary.gate({"faithfulness": 0.8}) == []


def test_a_contexts_column_is_needed_only_by_the_gated_metrics_that_need_it() -> None:
    """Answer relevancy reads no document and quality scores from its other parts without them (it reads
    them if present): gated, both pass on a record without a contexts column; faithfulness needs them. A
    rubric whose template names them needs them, one in plain prose (given the whole record) reads them if
    there are any, one naming other fields reads none."""
    result = evaluate_dataset([GROUNDED, PASSAGES], ["answer_relevancy", "quality", "faithfulness"])
    assert result.summary.gate({"answer_relevancy": 0.5}) == []
    assert result.rows[1]["quality"] is not None
    assert result.summary.gate({"quality": 0.0}) == []
    [failure] = result.summary.gate({"faithfulness": 0.0, "quality": 0.0})
    assert failure.startswith("1 of 2 records not scored (1 without a contexts column)"), failure
    assert rubric("cited", "The answer quotes {{ context }}.").uses_contexts is UsesContexts.NEEDED
    assert rubric("concise", "The answer is at most two sentences.").uses_contexts is UsesContexts.IF_PRESENT
    assert rubric("short", "The answer {{ answer }} is one sentence.").uses_contexts is UsesContexts.NO
    assert Quality().uses_contexts is UsesContexts.IF_PRESENT
    assert Quality([Faithfulness()]).uses_contexts is UsesContexts.NEEDED, "scores nothing without them"


def test_without_a_gate_a_row_without_a_contexts_column_says_which_column_is_missing() -> None:
    """The row's reason named the column only in the gate's line; the row itself said "no retrieved
    context", like a record that retrieved nothing (an empty list, which still says so). A metric reading
    them if present is scored, warned that they were missing."""
    result = evaluate_dataset([PASSAGES, REFUSAL], ["faithfulness", "context_relevance", "quality"])
    lacking, refusal = result.rows
    assert lacking["reason"] == f"faithfulness: {NO_CONTEXTS}; context_relevance: {NO_CONTEXTS}"
    assert lacking["results"]["quality"]["warnings"] == [f"scored without the contexts: {NO_CONTEXTS}"]
    assert "no retrieved context" in refusal["results"]["faithfulness"]["reason"]
    assert not refusal["results"]["quality"]["warnings"]
    [faithfulness] = evaluate(PASSAGES, ["faithfulness"])
    assert (faithfulness.status, faithfulness.reason) == ("not_applicable", NO_CONTEXTS)
    [mapped] = evaluate(PASSAGES, ["faithfulness"], column_map={"contexts": "passages"})
    assert mapped.score == 1.0


def test_the_summary_counts_one_record_in_the_singular() -> None:
    """ "1 records (0 invalid)", "1 of 1 records not scored": the counts read as written."""
    summary = evaluate_dataset([PASSAGES], ["faithfulness"]).summary
    assert summary.lines()[0] == "1 record (0 invalid)"
    *_, failure = summary.gate({"faithfulness": 0.0})
    assert failure.startswith("1 of 1 record not scored (1 without a contexts column)"), failure
    assert (
        evaluate_dataset([GROUNDED, REFUSAL], ["faithfulness"]).summary.lines()[0] == "2 records (0 invalid)"
    )


def test_a_dataframe_without_a_contexts_column_fails_a_faithfulness_gate_on_every_row() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame([PASSAGES, {**PASSAGES, "id": "other"}])
    summary = evaluate_dataset(frame, [Faithfulness()]).summary
    assert summary.gate({"faithfulness": 0.5}, allow_unscored=1) == [
        "faithfulness: no record could be scored (fail_under={'faithfulness': 0.5})",
        "2 of 2 records not scored (2 without a contexts column), more than allow_unscored=1; the first: "
        "rows[0]: faithfulness: " + NO_CONTEXTS,
    ]


async def test_the_sync_api_works_inside_a_running_event_loop() -> None:
    # As in a Jupyter cell: a loop is running in this thread.
    asyncio.get_running_loop()
    result = evaluate_dataset([GROUNDED, HALLUCINATED], ["faithfulness"])
    assert [r["faithfulness"] for r in result.rows] == [1.0, 0.0]
    (one,) = evaluate(GROUNDED, ["faithfulness"])
    assert one.score == 1.0
    awaited = await aevaluate_dataset([GROUNDED], ["faithfulness"])
    assert awaited.rows[0]["faithfulness"] == 1.0


def test_dataframe_in_and_out() -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "user_input": [GROUNDED["query"], GROUNDED["query"]],
            "retrieved_contexts": [GROUNDED["contexts"], GROUNDED["contexts"]],
            "response": [GROUNDED["answer"], HALLUCINATED["answer"]],
            "label": ["faithful", "hallucinated"],
        }
    )
    out = evaluate_dataset(frame, ["faithfulness"]).to_pandas()
    assert list(out["faithfulness"]) == [1.0, 0.0]
    assert list(out["label"]) == ["faithful", "hallucinated"]
    assert "results" not in out.columns
    # A label column under another name is mapped as the fields are.
    relabelled = frame.rename(columns={"label": "verdict"})
    mapped = evaluate_dataset(relabelled, ["faithfulness"], column_map={"label": "verdict"}).to_pandas()
    assert list(mapped["label"]) == ["faithful", "hallucinated"]


def test_a_metric_the_judge_cannot_answer_is_refused_before_any_record_is_scored() -> None:
    calls: list[str] = []

    @python_metric
    def counted(record: RagRecord) -> float:
        calls.append(record.answer)
        return 1.0

    concise = rubric("concise", "The answer is at most two sentences.")
    with pytest.raises(IncompatibleJudge, match=r"concise need an LLM judge.*--judge openai"):
        evaluate_dataset([GROUNDED] * 3, [counted, concise], OfflineJudge())
    assert calls == []


# --- evaluate_many: the routine a service calls -----------------------------------------------------------


class _Gate:
    """A metric that holds each record until released, counting how many are held at once."""

    name = "gate"

    def __init__(self) -> None:
        self.held = 0
        self.most_held = 0
        self.release: dict[str, asyncio.Event] = {}
        self.started: asyncio.Queue[str] = asyncio.Queue()

    async def score(self, record: RagRecord, judge: Any) -> MetricResult:
        self.held += 1
        self.most_held = max(self.most_held, self.held)
        event = self.release.setdefault(record.answer, asyncio.Event())
        await self.started.put(record.answer)
        try:
            await event.wait()
        finally:
            self.held -= 1
        return MetricResult(metric=self.name, score=1.0, judge=judge.name)


def _records(n: int) -> list[RagRecord]:
    return [RagRecord(query="q", contexts=("c",), answer=str(i)) for i in range(n)]


async def test_evaluate_many_bounds_concurrency_and_yields_as_records_complete() -> None:
    gate = _Gate()
    stream = evaluate_many(_records(5), [gate], OfflineJudge(), concurrency=2)
    first = asyncio.ensure_future(anext(stream))
    started = {await gate.started.get(), await gate.started.get()}
    assert started == {"0", "1"} and gate.held == 2
    gate.release.setdefault("1", asyncio.Event()).set()  # the second finishes first...
    record, results = await first
    assert record.answer == "1" and results[0].score == 1.0  # ...and comes out first
    for answer in "02345":
        gate.release.setdefault(answer, asyncio.Event()).set()
    rest = [record.answer async for record, _ in stream]
    assert sorted(rest) == ["0", "2", "3", "4"]
    assert gate.most_held == 2


async def test_evaluate_many_in_input_order_and_unreadable_items_keep_their_place() -> None:
    items = [("a", RagRecord(**{k: v for k, v in GROUNDED.items() if k != "id"})), ("bad", None)]
    items.append(("b", RagRecord(**{k: v for k, v in HALLUCINATED.items() if k != "id"})))
    out = [
        (key, None if results is None else results[0].score)
        async for (key, _), results in evaluate_many(
            items, [Faithfulness()], OfflineJudge(), ordered=True, record_of=lambda item: item[1]
        )
    ]
    assert out == [("a", 1.0), ("bad", None), ("b", 0.0)]


async def test_evaluate_many_refuses_an_item_that_is_no_record_naming_it_and_what_reads_rows() -> None:
    """A dict, or a record_of giving something other than a RagRecord or None, is the caller's mistake: a
    TypeError at that item, not an AttributeError from deep in a metric nor a row scored as nothing."""
    records = _records(1)
    with pytest.raises(TypeError, match=r"the item gave a dict for item 1, expected a RagRecord or None.*"
                       r"evaluate_dataset"):  # fmt: skip
        [pair async for pair in evaluate_many([*records, GROUNDED], [Faithfulness()], OfflineJudge())]
    with pytest.raises(TypeError, match="record_of gave a str for item 0"):
        [pair async for pair in evaluate_many(records, [Faithfulness()], OfflineJudge(), record_of=str)]


@pytest.mark.parametrize(("data", "got"), [("a.jsonl", "a string"), (None, "None"), (42, "int")])
def test_data_that_is_no_dataset_is_an_input_error_saying_what_was_given(data: Any, got: str) -> None:
    """Not `'NoneType' object is not iterable`: what the function takes, and what it was given."""
    with pytest.raises(InputError, match=f"expected records, a list of records or a DataFrame, got {got}$"):
        evaluate_dataset(data, ["faithfulness"])


def test_a_record_that_cannot_be_read_is_an_input_error_the_caller_can_catch_by_type() -> None:
    with pytest.raises(InputError, match=r"no answer \(looked for answer, "):
        evaluate({"query": "q", "contexts": ["c"]}, ["faithfulness"])


async def test_closing_the_stream_cancels_records_in_flight() -> None:
    gate = _Gate()
    stream = evaluate_many(_records(4), [gate], OfflineJudge(), concurrency=2)
    first = asyncio.ensure_future(anext(stream))
    await gate.started.get()
    await gate.started.get()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await stream.aclose()
    assert gate.held == 0, "nothing left running after the caller stopped"
