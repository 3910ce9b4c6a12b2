"""`assert_scores`: per-record assertions for pytest, with the failed claims and evidence in the message."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tracescore.score import ScoreAssertionError, assert_scores

RECORD = {
    "id": "office",
    "query": "Where is the Oberoi Group's head office, and when was it founded?",
    "contexts": [
        "The Oberoi Group is a hotel company with its head office in Delhi. It was founded in 1934."
    ],
    "answer": "The head office is in Delhi. The group was founded in 1950.",
}


def test_a_passing_record_returns_its_results() -> None:
    results = assert_scores({**RECORD, "answer": "The head office is in Delhi."}, {"faithfulness": 0.9})
    assert [r.metric for r in results] == ["faithfulness"] and results[0].score == 1.0


def test_a_failing_record_names_the_claim_that_failed_with_its_evidence() -> None:
    with pytest.raises(ScoreAssertionError) as caught:
        assert_scores(RECORD, {"faithfulness": 0.8})
    message = str(caught.value)
    assert message.startswith("record 'office' scored too low:")
    assert "faithfulness: 0.50 < 0.8" in message
    assert "[NO_EVIDENCE] The group was founded in 1950." in message and "'1950'" in message
    assert 'evidence: "The Oberoi Group is a hotel company' in message, "the context sentence quoted"
    assert "The head office is in Delhi." not in message.split("0.8", 1)[1], "supported claims are not listed"
    assert [r.metric for r in caught.value.results] == ["faithfulness"]


def test_an_unscored_metric_fails_with_its_reason() -> None:
    with pytest.raises(
        AssertionError, match=r"faithfulness: not scored \(not_applicable\): the answer is empty"
    ):
        assert_scores({**RECORD, "answer": ""})


def test_minimums_for_a_metric_not_scored_are_a_mistake() -> None:
    with pytest.raises(ValueError, match="not scored: quality"):
        assert_scores(RECORD, {"quality": 0.5}, metrics=["faithfulness"])


def test_pytest_reports_the_failure_at_the_tests_call_with_the_claims(tmp_path: Path) -> None:
    """The traceback ended inside tracescore (`raise ScoreAssertionError(...)`), far from the golden record's
    test; it ends at the test's own line, with the message."""
    test_file = tmp_path / "test_golden.py"
    test_file.write_text(
        f"from tracescore.score import assert_scores\n\n\ndef test_office():\n"
        f"    assert_scores({RECORD!r}, {{'faithfulness': 0.8}})\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", str(test_file)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "_assertions.py" not in done.stdout, done.stdout
    assert ">       assert_scores(" in done.stdout and "faithfulness: 0.50 < 0.8" in done.stdout, done.stdout
