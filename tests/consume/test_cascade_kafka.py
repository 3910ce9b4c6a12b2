"""The suspicion-first cascade in the running service, through the real broker and the real `openai` client
against the local judge server: every admitted interaction is scored offline, the LLM judge sees the ones
the offline judge finds suspicious (and a baseline), and a spent budget is counted, never silent."""

from __future__ import annotations

import json
import logging
from pathlib import Path

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
from tracescore.testing.judge_server import JudgeServer

pytestmark = pytest.mark.kafka

APP = """
@tracescore.rag(route="/support")
def answer(query, contexts, reply):
    return reply

DOC = ["The Aurora X2 battery lasts 14 hours on a single charge."]
for i in range(4):
    answer(f"How long does the battery last? ({i})", DOC, "The Aurora X2 battery lasts 14 hours.")
for i in range(2):
    answer(f"How long does the battery last?! ({i})", DOC, "The Aurora X2 battery lasts 40 hours.")
"""


def escalations(reader: InMemoryMetricReader) -> dict[str, int]:
    """The `tracescore.llm_judge.escalations` counter by outcome, as an operator's backend receives it."""
    return {
        point.attributes["outcome"]: point.value
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "tracescore.llm_judge.escalations"
        for point in metric.data.data_points
    }


def gauge(reader: InMemoryMetricReader, name: str, **attributes: str) -> list[float]:
    """The values of a gauge's points whose attributes include `attributes` (dots written as _)."""
    wanted = {k.replace("_", "."): v for k, v in attributes.items()}
    return [
        point.value
        for rm in reader.get_metrics_data().resource_metrics
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == name
        for point in metric.data.data_points
        if wanted.items() <= {k.replace("_", "."): v for k, v in point.attributes.items()}.items()
    ]


def run(
    bootstrap: str, prefix: str, server: JudgeServer, status_interval_s: float = 30.0, **sampling: object
) -> tuple[list[EvaluationRecord], EvaluationConsumer, InMemoryMetricReader]:
    seen: list[EvaluationRecord] = []
    reader = InMemoryMetricReader()
    settings = consumer_settings(bootstrap, prefix, status_interval_s=status_interval_s)
    llm = judge_client(server.base_url)
    policy = CascadePolicy(load_sampling_config(None, **sampling), metrics=["faithfulness"])
    consumer = EvaluationConsumer(
        settings, judge=OfflineJudge(), llm_judge=llm, policy=policy, metrics=[Faithfulness()],
        on_evaluation=seen.append,
        metrics_out=EvaluationMetrics(MeterProvider(metric_readers=[reader]).get_meter("test")),
    )  # fmt: skip
    consumer.run()
    return seen, consumer, reader


def test_only_suspicious_answers_reach_the_llm_judge(bootstrap: str, topic_prefix: str) -> None:
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    with JudgeServer() as server:
        # Always targeting (lift off): what the cascade sends once it has shown lift.
        seen, consumer, reader = run(
            bootstrap, topic_prefix, server, cascade={"baseline_rate": 0.0, "lift": {"enabled": False}}
        )
        llm_requests = server.stats.chat_requests

    offline = [r for r in seen if r.judge == "offline"]
    llm = [r for r in seen if r.judge == "openai:judge-test"]
    assert len(offline) == 6, "the offline judge scores every admitted interaction"
    assert {r.label for r in offline} == {"faithful", "hallucinated"}
    suspicious = {r.span_id for r in offline if r.label == "hallucinated"}
    assert len(suspicious) == 2 and {r.span_id for r in llm} == suspicious, "the LLM judge sees those alone"
    assert {r.selection for r in llm} == {"cascade"} and all(r.annotator_kind == "LLM" for r in llm)
    assert all(r.selection is None for r in offline)
    # Each LLM record carries its weight and the offline score and label it corrects (rolling estimates).
    offline_scores = {r.span_id: r.score for r in offline}
    assert all(r.inclusion_probability == 1.0 and r.offline_score == offline_scores[r.span_id] for r in llm)
    assert all(r.inclusion_probability is None and r.offline_score is None for r in offline)
    assert all(r.offline_label == "hallucinated" for r in llm)
    assert all(r.offline_label is None for r in offline)
    assert consumer.stats.escalated == {"cascade": 2}
    assert escalations(reader) == {"cascade": 2, "offline_only": 4}
    assert llm_requests == 2 * 2, "two calls per escalated interaction (claims, verdicts), none for the rest"


# A 1,000-token hour fits one escalation at most: the other suspicious answer is refused, no room left.
SPENT = {"tokens_per_hour": 1000, "tokens_per_day": 1000, "estimated_tokens_per_evaluation": 1000}


@pytest.mark.parametrize(
    ("held_back", "share", "budget"),
    [
        ("budget", None, SPENT),
        # The walk: no llm_budget set, the summary said `budget=189`, and a budget owner raised a budget that
        # was never the cause. Outside the share the cascade sends (here none) is `unselected`.
        ("unselected", 0.0, {}),
    ],
)
def test_an_answer_kept_from_the_llm_judge_is_counted_by_why_and_the_offline_score_stays(
    bootstrap: str, topic_prefix: str, held_back: str, share: float | None, budget: dict[str, int]
) -> None:
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    cascade = {"baseline_rate": 0.0, "share": share, "lift": {"enabled": False}}
    with JudgeServer() as server:
        seen, consumer, reader = run(bootstrap, topic_prefix, server, cascade=cascade, llm_budget=budget)
    llm = [r for r in seen if r.judge != "offline"]
    assert len([r for r in seen if r.judge == "offline"]) == 6
    assert len(llm) <= (1 if budget else 0), "at most one escalation fits a 1,000-token hour"
    assert consumer.stats.not_admitted == {held_back: 2 - len(llm)}
    # Where an operator sees it: the escalations counter, which the shipped Prometheus rules alert on.
    expected = {held_back: 2 - len(llm), "offline_only": 4} | ({"cascade": len(llm)} if llm else {})
    assert escalations(reader) == expected


def test_llm_verdicts_on_the_baseline_teach_the_cascade_and_survive_a_restart(
    bootstrap: str, topic_prefix: str, tmp_path: Path
) -> None:
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    state = tmp_path / "cascade.json"
    with JudgeServer() as server:
        seen, _, _ = run(
            bootstrap, topic_prefix, server, cascade={"baseline_rate": 1.0, "learning": {"state_path": state}}
        )
    llm = [r for r in seen if r.judge == "openai:judge-test"]
    assert len(llm) == 6 and {r.selection for r in llm} == {"baseline"}
    saved = json.loads(state.read_text(encoding="utf-8"))  # written when the consumer stopped
    assert saved["shared"]["labels"] == 6
    assert saved["shared"]["positives"] == sum(r.label == "hallucinated" for r in llm)
    restarted = CascadePolicy(load_sampling_config(None, cascade={"learning": {"state_path": state}}))
    assert restarted.models.labels == 6


def test_the_cascade_measures_its_lift_and_shows_it_in_records_metrics_and_the_status_line(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    run_instrumented_app(bootstrap, f"{topic_prefix}.spans", APP)
    with JudgeServer() as server:
        # Every answer drawn uniformly (the baseline at 100%): each LLM verdict is evidence of lift.
        seen, _, reader = run(
            bootstrap, topic_prefix, server, status_interval_s=0.5, cascade={"baseline_rate": 1.0}
        )
    llm = [r for r in seen if r.judge == "openai:judge-test"]
    assert len(llm) == 6 and {r.selection for r in llm} == {"baseline"}
    # Two targeted verdicts of the ten it gathers before deciding: the cascade still explores (targets),
    # and each record says so.
    assert {r.targeted_share for r in llm} == {1.0}
    failed = sum(r.label == "hallucinated" for r in llm) / 6
    where = {"tracescore_route": "/support", "answer_shape": "short"}
    assert gauge(reader, "tracescore.cascade.targeted_share_ratio", **where) == [1.0]
    uniform = gauge(reader, "tracescore.cascade.failed_share_ratio", **where, group="uniform", bound="value")
    assert uniform == [pytest.approx(failed)]
    # The two suspicious answers are what the cascade would have picked: evidence for its side too (older
    # labels fade by 1/200 a label).
    targeted = gauge(reader, "tracescore.cascade.lift_labels", **where, group="targeted")
    assert targeted == [pytest.approx(2.0, abs=0.01)]
    assert gauge(reader, "tracescore.cascade.lift_labels", **where, group="uniform") == [
        pytest.approx(6.0, abs=0.1)
    ]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("status:")]
    assert any(
        "cascade lift:" in line
        and "/support short answers: split targeted 1.00 / uniform 0.00 (exploring)" in line
        for line in lines
    ), lines
