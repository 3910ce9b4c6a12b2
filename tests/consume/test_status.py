"""The consumer's status line: per route, the estimate from both judges with its interval, and agreement."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

import pytest

from tracescore.consume import ConsumerStats
from tracescore.consume._status import StatusLine
from tracescore.model import EvaluationRecord, MetricStatus


def offline(score: float) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id=uuid.uuid4().hex, span_id=uuid.uuid4().hex[:16], service_name="rag-api", route="/ask",
        metric="faithfulness", score=score, label=None, status=MetricStatus.OK, judge="offline",
        timestamp=datetime.now(UTC),
    )  # fmt: skip


def llm(of: EvaluationRecord, score: float, selection: str, inclusion: float) -> EvaluationRecord:
    return of.model_copy(
        update={"score": score, "judge": "openai:judge", "annotator_kind": "LLM", "selection": selection,
                "inclusion_probability": inclusion, "offline_score": of.score}
    )  # fmt: skip


def test_the_line_shows_the_estimate_its_interval_the_counts_and_judge_agreement(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    line = StatusLine(ConsumerStats(), interval_s=1.0)
    for i in range(20):
        record = offline(0.2 if i < 4 else 0.9)
        line.recorded(record)
        if i < 4:  # suspicious: the cascade sent it; the LLM judge says 2 of them were faithful after all
            line.recorded(llm(record, float(i % 2), "cascade", 1.0))
        elif i % 4 == 0:  # baseline: the LLM judge agrees with the offline one
            line.recorded(llm(record, 1.0, "baseline", 0.25))
    line.log({}, 0, 0, 0)
    text = caplog.records[-1].getMessage()
    # 16 offline 0.9 corrected by +0.1 on the baseline, plus 2 of 4 suspicious: (16 + 2) / 20.
    assert "rag-api /ask faithfulness 0.90 (n=20) 95% [" in text
    assert "16 offline + 8 LLM" in text and "uncalibrated" not in text
    assert "judges agree 1.00 on 4 baseline pairs, mean LLM-offline +0.10" in text


def test_two_services_with_a_route_of_the_same_name_get_an_estimate_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two LangChain apps both name their route `RunnableSequence`: one estimate of both would be neither's.
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    line = StatusLine(ConsumerStats(), interval_s=1.0)
    for score in (1.0, 1.0):
        line.recorded(offline(score))
    line.recorded(offline(0.0).model_copy(update={"service_name": "billing-api"}))
    line.log({}, 0, 0, 0)
    text = caplog.records[-1].getMessage()
    assert "billing-api /ask faithfulness 0.00 (n=1)" in text
    assert "rag-api /ask faithfulness 1.00 (n=2)" in text


def test_offline_scores_alone_are_marked_uncalibrated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    line = StatusLine(ConsumerStats(), interval_s=1.0)
    for score in (1.0, 1.0, 1.0):
        line.recorded(offline(score))
    line.log({}, 0, 0, 0)
    assert (
        "rag-api /ask faithfulness 1.00 (n=3) 95% [1.00, 1.00], passing 1.00 95% [1.00, 1.00] (label rule, "
        "as alerts), 3 offline + 0 LLM, uncalibrated" in caplog.records[-1].getMessage()
    )


def test_the_line_shows_the_share_the_label_rule_passes_next_to_the_mean_score(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Alerts default to the label rule's share: a mean score of 0.62 can hide that 3 answers in 10 fail it.
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    line = StatusLine(ConsumerStats(), interval_s=1.0)
    for score in (0.1, 0.2, 0.2, 0.5, 0.6, 0.9, 0.9, 1.0, 1.0, 0.8):
        line.recorded(offline(score))
    line.log({}, 0, 0, 0)
    text = caplog.records[-1].getMessage()
    assert "rag-api /ask faithfulness 0.62 (n=10) 95% [" in text
    assert "passing 0.70 95% [" in text and "(label rule, as alerts)" in text


def test_the_policy_skips_are_counted_as_not_admitted_and_the_old_name_reads_the_same() -> None:
    stats = ConsumerStats()
    stats.not_admitted["rate"] += 2
    stats.sampling["budget"] += 1  # the former name, kept for code written against it
    assert stats.not_admitted == {"rate": 2, "budget": 1}
    assert stats.sampling is stats.not_admitted


def test_interactions_judged_without_a_recorded_question_are_counted_only_when_there_are_some(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="tracescore.consume")
    stats = ConsumerStats(scored=3)
    line = StatusLine(stats, interval_s=1.0)
    line.log({}, 0, 0, 0)
    assert "| scored 3, unscored 0, skipped none" in caplog.records[-1].getMessage()
    stats.without_question = 2
    line.log({}, 0, 0, 0)
    said = caplog.records[-1].getMessage()
    assert "| scored 3 (2 without a recorded question), unscored 0, skipped none" in said
