"""Outputs fit Kafka's limit by construction: a record too large is cut, and says what was cut."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tracescore.emit._fit import clip, fit_record
from tracescore.model import EvaluationRecord, MetricStatus


def record(**details: object) -> EvaluationRecord:
    return EvaluationRecord(
        trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331", service_name="rag-api",
        route="/ask", metric="faithfulness", score=0.2, label="hallucinated", status=MetricStatus.OK,
        reason="r" * 10_000, judge="offline", timestamp=datetime(2026, 1, 1, tzinfo=UTC), details=details,
    )  # fmt: skip


def test_a_record_that_fits_is_sent_unchanged() -> None:
    small = record(total_claims=1)
    value, cut = fit_record(small, 100_000)
    assert not cut and value == small.model_dump_json().encode()


def test_a_record_of_a_huge_answer_is_cut_to_fit_and_says_so() -> None:
    claims = [{"claim": "x" * 5000, "verdict": "NO_EVIDENCE", "evidence": "y" * 5000} for _ in range(250)]
    huge = record(total_claims=250, claims=claims)
    assert len(huge.model_dump_json()) > 2_000_000
    value, cut = fit_record(huge, 50_000)
    assert cut and len(value) <= 50_000
    parsed = json.loads(value)
    assert parsed["details"]["truncated"]["original_bytes"] > 2_000_000
    assert parsed["details"]["total_claims"] == 250, "counts survive the cut"
    assert parsed["score"] == 0.2 and parsed["span_id"] == "b7ad6b7169203331"


def test_even_a_tiny_limit_keeps_the_score_and_drops_the_details() -> None:
    value, cut = fit_record(record(claims=["c" * 100_000]), 1500)
    parsed = json.loads(value)
    assert cut and set(parsed["details"]) == {"truncated"}
    assert parsed["details"]["truncated"]["details_dropped"] is True
    assert parsed["score"] == 0.2 and len(parsed["reason"]) <= 200


def test_clip_marks_what_it_cut() -> None:
    assert clip("short", 10) == "short"
    clipped = clip("a" * 1000, 100)
    assert len(clipped) == 100 and clipped.endswith("more characters]")
