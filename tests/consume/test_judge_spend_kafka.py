"""What the LLM judge costs, in the metrics a budget owner alerts on, and what a rate-limited or timed-out
judge says to do: through the real broker and the real `openai` client against the local judge server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from _helpers import consumer_settings, judge_client
from kafka_helpers import run_instrumented_app
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tracescore.consume import EvaluationConsumer
from tracescore.emit import EvaluationMetrics
from tracescore.model import EvaluationRecord
from tracescore.sample import CascadePolicy, load_sampling_config
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.judge_server import Fault, JudgeServer

pytestmark = pytest.mark.kafka

# Three answers of one route, each to the LLM judge (a baseline of 1): a known spend per service and route.
APP = """
PRICES = ["The Team plan costs 20 euros a month per seat."]
billing = tracescore.rag(route="/support")(lambda query, contexts, text: text)
for n in range(3):
    billing(f"What does the Team plan cost? #{n}", PRICES, "The Team plan costs 20 euros a month per seat.")
"""

BUDGET = {"tokens_per_hour": 1_000_000, "tokens_per_day": 5_000_000}


def points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(point.attributes), point.value)
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]


@contextmanager
def consumed(
    bootstrap: str, prefix: str, server: JudgeServer, **judge: object
) -> Iterator[tuple[list[EvaluationRecord], InMemoryMetricReader]]:
    """Every answer of APP to the LLM judge (a baseline of 1), within BUDGET; the records and the metrics."""
    seen: list[EvaluationRecord] = []
    reader = InMemoryMetricReader()
    sampling = load_sampling_config(None, cascade={"baseline_rate": 1.0}, llm_budget=BUDGET)
    policy = CascadePolicy(sampling, metrics=["faithfulness"])
    metrics_out = EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test"))
    metrics_out.observe_budget(policy.budget_used, {"hour": BUDGET["tokens_per_hour"], "day": None})
    consumer = EvaluationConsumer(
        consumer_settings(bootstrap, prefix), judge=OfflineJudge(), metrics=[Faithfulness()],
        llm_judge=judge_client(server.base_url, **judge), policy=policy, on_evaluation=seen.append,
        metrics_out=metrics_out,
    )  # fmt: skip
    consumer.run()
    yield seen, reader


def test_tokens_and_cost_are_counted_per_service_route_and_selection_with_the_budget_spent(
    bootstrap: str, topic_prefix: str
) -> None:
    """`tracescore_judge_tokens_total` had only `judge` and `type`: "what did the judge cost, per team?"
    had no answer in Prometheus, no cost was exported at all, and no series said how much of the hour's
    budget was gone, so nothing could alert before it ran out."""
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    prices = {"prompt_price_per_1m": 0.15, "completion_price_per_1m": 0.60}
    with JudgeServer() as server, consumed(bootstrap, topic_prefix, server, **prices) as (seen, reader):
        provider = server.stats
    llm = [r for r in seen if r.annotator_kind == "LLM"]
    assert len(llm) == 3 and all(r.status == "ok" for r in llm)
    where = {"service.name": "test-app", "tracescore.route": "/support", "selection": "baseline"}
    tokens = points(reader, "tracescore.judge.tokens")
    assert tokens and all(where.items() <= labels.items() for labels, _ in tokens), tokens
    by_type = {labels["type"]: value for labels, value in tokens}
    assert by_type == {"input": provider.prompt_tokens, "output": provider.completion_tokens}
    [(labels, cost)] = points(reader, "tracescore.judge.cost_usd")
    assert where.items() <= labels.items() and labels["judge"] == "openai:judge-test"
    assert cost == pytest.approx(sum(r.usage.cost_usd for r in llm)) and cost > 0
    # The budget's hour: what the policy charged (every token the judge reported), against its limit; a
    # window without a limit (the day, here) is not reported.
    assert points(reader, "tracescore.llm_judge.budget.used") == [
        ({"window": "hour"}, provider.prompt_tokens + provider.completion_tokens)
    ]
    assert points(reader, "tracescore.llm_judge.budget.limit") == [({"window": "hour"}, 1_000_000)]


def test_a_rate_limited_judge_says_to_lower_its_load_not_to_check_its_address(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Every call 429: the warning told a budget owner to check the judge's address, model and key, which
    were right; what helps is fewer requests in flight, a smaller budget or the provider's limit. The answers
    keep their offline records, and the failed calls spend nothing of the budget."""
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    with (
        JudgeServer() as server,
        caplog.at_level(logging.WARNING, logger="tracescore.consume"),
    ):
        server.inject(Fault.RATE_LIMIT, times=1000)
        with consumed(bootstrap, topic_prefix, server, max_retries=1, retry_base_s=0.0) as (seen, reader):
            pass
    assert [r.status for r in seen if r.annotator_kind == "LLM"] == ["error"] * 3
    assert len([r for r in seen if r.judge == "offline" and r.status == "ok"]) == 3
    [line] = [r.getMessage() for r in caplog.records if "could not score" in r.getMessage()]
    assert "HTTP 429 after 2 attempts" in line, line
    assert "rate-limiting" in line and "TRACESCORE_JUDGE_CONCURRENCY" in line, line
    assert "[sampling.llm_budget]" in line and "keeps its offline record" in line, line
    assert "check the judge's address" not in line, line
    assert points(reader, "tracescore.llm_judge.budget.used") == [({"window": "hour"}, 0)]
    assert not points(reader, "tracescore.judge.tokens")


def test_a_timed_out_judge_says_what_to_raise_and_that_the_provider_may_bill_it(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A call the client gave up on still reached the server, which counted its prompt: a provider may bill
    it, and no record can (no reply, no usage). The warning says so, and what to change."""
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    with (
        JudgeServer(timeout_sleep_s=3.0) as server,
        caplog.at_level(logging.WARNING, logger="tracescore.consume"),
    ):
        server.inject(Fault.TIMEOUT, times=1000)
        with consumed(bootstrap, topic_prefix, server, max_retries=0, timeout_s=0.5) as (seen, _):
            pass
        provider = server.stats
    assert [r.status for r in seen if r.annotator_kind == "LLM"] == ["error"] * 3
    assert provider.prompt_tokens > 0 and sum(r.usage.prompt_tokens for r in seen) == 0
    [line] = [r.getMessage() for r in caplog.records if "could not score" in r.getMessage()]
    assert "timeout after 1 attempt" in line, line
    assert "raise TRACESCORE_JUDGE_TIMEOUT_S" in line and "billed by the provider" in line, line
    assert "check the judge's address" not in line, line
