"""What an alert's summary says, in words a person reads: counts of one in the singular."""

from __future__ import annotations

from datetime import timedelta

from alert_records import T0

from tracescore.alert import AlertKey
from tracescore.alert._notes import judge_note

KEY = AlertKey("rag-api", "/billing", "faithfulness")


def test_a_judge_alert_on_one_evaluation_says_evaluation_and_timeout() -> None:
    note = judge_note(KEY, [(T0, True, True)], 0.2, "firing", T0, T0 + timedelta(seconds=1))
    assert "1 of 1 evaluation failed (1 timeout); scores are missing, not low" in note.summary
    two = judge_note(KEY, [(T0, True, False)] * 2, 0.2, "firing", T0, T0 + timedelta(seconds=1))
    assert "2 of 2 evaluations failed (0 timeouts)" in two.summary
