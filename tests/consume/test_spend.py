"""JudgeSpend: what the model judges' records cost, per service and selection, as the closing summary, the
status line and `tracescore tail` say it."""

from __future__ import annotations

from datetime import UTC, datetime

from tracescore.consume import JudgeSpend
from tracescore.model import EvaluationRecord, MetricStatus, Usage


def record(service: str, selection: str | None, prompt: int, cost: float = 0.0) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id="0" * 32, span_id="0" * 16, service_name=service, route="/ask", metric="faithfulness",
        score=1.0, label="faithful", status=MetricStatus.OK, judge="openai:m", annotator_kind="LLM",
        selection=selection, timestamp=datetime(2026, 12, 2, tzinfo=UTC),
        usage=Usage(calls=2, prompt_tokens=prompt, completion_tokens=100, cost_usd=cost),
    )  # fmt: skip


def test_services_are_listed_costliest_first_with_their_selections() -> None:
    spend = JudgeSpend()
    for r in (
        record("search", "baseline", 100, 0.001), record("billing", "cascade", 900, 0.003),
        record("billing", "baseline", 400, 0.002), record("billing", "cascade", 900, 0.003),
    ):  # fmt: skip
        spend.add(r)
    spend.add(record("search", None, 0).model_copy(update={"usage": Usage()}))  # the offline judge's
    assert spend.describe() == "8 calls, 2,300 prompt + 400 completion tokens, $0.0090"
    assert spend.by_service() == (
        "billing 2,500 tokens $0.0080 (cascade 2,000, baseline 500); search 200 tokens $0.0010 (baseline 200)"
    )


def test_without_prices_the_cost_says_what_to_set_and_a_judge_no_policy_chose_reads_all() -> None:
    spend = JudgeSpend()
    spend.add(record("search", None, 100))  # --no-cascade: no selection
    assert spend.describe() == (
        "2 calls, 100 prompt + 100 completion tokens, "
        "cost unknown (no price: TRACESCORE_JUDGE_*_PRICE_PER_1M)"
    )
    assert spend.by_service() == "search 200 tokens (all 200)"
