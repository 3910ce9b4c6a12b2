"""How `tracescore tail` prints a record (no broker needed): a claim whose evidence is an earlier turn's
says how many turns back."""

from __future__ import annotations

from datetime import UTC, datetime

from tracescore._cli_tail import format_record
from tracescore.model import EvaluationRecord, MetricStatus


def test_evidence_from_an_earlier_turn_says_how_many_turns_back() -> None:
    source = {"span_id": "00000000000000aa", "kind": "earlier_turn", "turns_back": 1}
    claim = {
        "claim": "The Aurora X2 weighs 3 kg.",
        "verdict": "NO_EVIDENCE",
        "reason": "The context does not contain '3'.",
        "evidence": "The Aurora X2 weighs 1.2 kg.",
        "context_index": 0,
        "evidence_source": source,
    }
    record = EvaluationRecord(
        trace_id="0" * 32,
        span_id="0" * 16,
        service_name="shop",
        route="/chat",
        metric="faithfulness",
        score=0.0,
        label="hallucinated",
        status=MetricStatus.OK,
        judge="offline",
        timestamp=datetime(2026, 3, 4, tzinfo=UTC),
        details={"claims": [claim], "context_sources": [source]},
    )
    lines = format_record(record, flagged=True).splitlines()
    assert "      evidence: The Aurora X2 weighs 1.2 kg.  (1 turn back)" in lines
    this_turn = {**claim, "evidence_source": {**source, "kind": "tool", "turns_back": 0}}
    plain = record.model_copy(update={"details": {"claims": [this_turn]}})
    assert "      evidence: The Aurora X2 weighs 1.2 kg." in format_record(plain, flagged=True).splitlines()
