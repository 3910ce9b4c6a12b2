"""`tracescore tail` shows a revision grounded in an earlier turn: which claim, and that turn's trace."""

from __future__ import annotations

from pathlib import Path

from tracescore.cli._tail import format_record
from tracescore.model import EvaluationRecord

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "grounded_turn.json"


def test_a_grounded_revision_names_the_earlier_turns_trace() -> None:
    record = EvaluationRecord.model_validate_json(EXAMPLE.read_text(encoding="utf-8"))
    first, grounded, replaces, trace = format_record(record, flagged=False).splitlines()
    assert first.endswith("session chat-qa_only_faithful  (offline, revision 1)") and " ok " in first
    assert grounded.startswith("    grounded in an earlier turn: The weekend add-on costs 9 euros")
    assert grounded.endswith("(trace e6d7d22e1d2f608d0a7014362f35a3cc, 2 turns back)")
    assert replaces.startswith("    replaces revision 0 of this answer")
    assert trace.startswith(f"    trace {record.trace_id}")


def test_the_failed_claims_left_out_are_counted_in_the_right_number() -> None:
    """Three failed claims are shown; a fourth is `+1 more failed claim`, a fifth makes it `claims`."""
    claims = [{"claim": f"Claim {n}.", "verdict": "NO_EVIDENCE"} for n in range(5)]
    record = EvaluationRecord.model_validate_json(EXAMPLE.read_text(encoding="utf-8"))
    one_more = record.model_copy(update={"details": {"claims": claims[:4]}})
    two_more = record.model_copy(update={"details": {"claims": claims}})
    assert "    (+1 more failed claim)" in format_record(one_more, flagged=True).splitlines()
    assert "    (+2 more failed claims)" in format_record(two_more, flagged=True).splitlines()


def test_a_score_without_a_label_says_unlabelled_not_ok() -> None:
    """A custom metric's plain score below 0.5 is FLAGGED; its line must not also say `ok` (its status)."""
    record = EvaluationRecord.model_validate_json(EXAMPLE.read_text(encoding="utf-8"))
    scored = record.model_copy(update={"metric": "cites_a_document", "score": 0.0, "label": None})
    first = format_record(scored, flagged=True).splitlines()[0]
    assert "FLAGGED  cites_a_document 0.00  unlabelled  " in first
