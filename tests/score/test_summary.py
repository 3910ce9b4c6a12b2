"""What a batch's flagged share estimates, with its interval: a small golden set's share is said with the
95% interval the sample allows, on the summary line, in the summary JSON and on the HTML report."""

from __future__ import annotations

from tracescore.model import FAITHFULNESS, MetricResult
from tracescore.score import BatchSummary, render_report
from tracescore.score._ci import summary_json


def _summary(flagged: int, scored: int) -> BatchSummary:
    summary = BatchSummary()
    for n in range(scored):
        bad = n < flagged
        result = MetricResult(
            metric=FAITHFULNESS,
            judge="offline",
            score=0.0 if bad else 1.0,
            label="hallucinated" if bad else "faithful",
        )
        summary.add([result], metric_names=[FAITHFULNESS], record_id=f"r{n}")
    return summary


def test_the_summary_line_gives_the_flagged_share_and_its_interval() -> None:
    [_, line, _] = _summary(2, 20).lines()
    # Wilson's interval: 2 of 20 may well be 30% of the answers, and 0 of 20 up to 16%.
    assert line == (
        "  faithfulness: 20 scored, 0 unscored; mean 0.900, 10% below 0.5, "
        "2 flagged (10%, 95% interval 3% to 30%)"
    )
    assert _summary(0, 20).lines()[1].endswith("0 flagged (0%, 95% interval 0% to 16%)")


def test_the_summary_json_and_the_report_carry_the_interval() -> None:
    summary = _summary(2, 20)
    [low, high] = summary_json("golden.jsonl", summary, [], exit_status=0)["metrics"][FAITHFULNESS][
        "flagged_share_interval"
    ]
    assert (round(low, 3), round(high, 3)) == (0.028, 0.301)
    rows = [
        {"line": n + 1, FAITHFULNESS: score, "results": {FAITHFULNESS: {"score": score, "label": label}}}
        for n, (score, label) in enumerate([(0.0, "hallucinated")] * 2 + [(1.0, "faithful")] * 18)
    ]
    assert ">3% to 30%<" in render_report(rows)


def test_a_printed_summary_reads_as_the_command_prints_it() -> None:
    summary = _summary(2, 20)
    assert str(summary) == "\n".join(summary.lines())
    assert f"{summary}".startswith("20 records (0 invalid)\n  faithfulness: 20 scored")


def _offline_faithful(claims: int, judge: str = "offline") -> MetricResult:
    # A faithful answer of `claims` claims, half of them partly supported: how the offline judge reads a
    # faithful summary that paraphrases its document.
    return MetricResult(
        metric=FAITHFULNESS,
        judge=judge,
        score=0.75,
        label="faithful",
        details={"total_claims": claims, "verdict_counts": {"FULLY_SUPPORTED": claims - claims // 2}},
    )


def test_a_batch_of_long_answers_judged_offline_says_the_flags_read_the_judge() -> None:
    # A golden set of faithful summaries fails --max-flagged 5% on the offline judge's false flags alone
    # (a third to a half of them): the summary says why, and what to gate on instead.
    summary = BatchSummary()
    for n in range(4):
        summary.add([_offline_faithful(claims=3 + n)], metric_names=[FAITHFULNESS])
    summary.add([_offline_faithful(claims=1)], metric_names=[FAITHFULNESS])
    note = summary.lines()[2]
    assert note.startswith("  note: 4 of 5 faithfulness scores are the offline judge's on long answers (3 or")
    assert "(--baseline)" in note and "(--judge openai)" in note
    assert "judge calls 0" in summary.lines()[3]


def test_short_answers_or_an_llm_judge_add_no_note() -> None:
    for results in (
        [_offline_faithful(claims=2)] * 4,  # short answers, which the offline judge reads well
        [_offline_faithful(claims=5, judge="openai:gpt-4o-mini")] * 4,  # an LLM judge's level is the answers'
        [_offline_faithful(claims=5)] + [_offline_faithful(claims=1)] * 2,  # long answers a minority
    ):
        summary = BatchSummary()
        for result in results:
            summary.add([result], metric_names=[FAITHFULNESS])
        assert not any("note:" in line for line in summary.lines()), results
