"""`tracescore tail` shows a revision grounded in an earlier turn: which claim, and that turn's trace."""

from __future__ import annotations

from pathlib import Path

from tracescore.cli._tail import format_record
from tracescore.model import EvaluationRecord

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "grounded_turn.json"


def test_a_grounded_revision_names_the_earlier_turns_trace() -> None:
    record = EvaluationRecord.model_validate_json(EXAMPLE.read_text(encoding="utf-8"))
    first, grounded, trace = format_record(record, flagged=False).splitlines()
    assert first.endswith("(offline, revision 1)") and " ok " in first
    assert grounded.startswith("    grounded in an earlier turn: The weekend add-on costs 9 euros")
    assert grounded.endswith("(trace e6d7d22e1d2f608d0a7014362f35a3cc, 2 turns back)")
    assert trace.startswith(f"    trace {record.trace_id}")
