"""The baseline gate's interval and pairing: a run's flagged share against another run's, same records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tracescore.score import Baseline, evaluate_dataset
from tracescore.score._baseline import paired_difference_interval

BASE = {
    "query": "Where is the Oberoi Group's head office?",
    "contexts": ["The Oberoi Group is a hotel company with its head office in Delhi."],
}
GOOD, BAD = "Its head office is in Delhi.", "Its head office is in Mumbai."


def test_the_interval_is_newcombe_s_for_paired_proportions_as_published() -> None:
    """Reference values from Fagerland, Lydersen and Laake, Statistical Analysis of Contingency Tables
    (2017), chapter 8, as their R package contingencytables checks them: Cavo et al. 2012 (59, 6, 16, 80)
    and Bentur et al. 2009 (1, 1, 7, 12), Newcombe's square-and-add (hybrid score) interval."""
    low, high = paired_difference_interval(59, 6, 16, 80)  # type: ignore[misc]
    assert (round(low, 4), round(high, 4)) == (-0.1186, -0.0046)
    low, high = paired_difference_interval(1, 1, 7, 12)  # type: ignore[misc]
    assert (round(low, 4), round(high, 4)) == (-0.5069, -0.0256)
    assert paired_difference_interval(0, 0, 0, 0) is None
    low, high = paired_difference_interval(3, 0, 0, 17)  # type: ignore[misc]
    assert low < 0 < high, "no disagreement: no rise shown"


def _scores(tmp_path: Path, name: str, answers: list[str]) -> Path:
    """A `tracescore score --out`-shaped file of these answers, ids r0, r1, ..."""
    records = [{**BASE, "id": f"r{n}", "answer": a} for n, a in enumerate(answers)]
    rows = evaluate_dataset(records, ["faithfulness"]).rows
    path = tmp_path / name
    path.write_text("".join(json.dumps({**row, "line": n + 1}) + "\n" for n, row in enumerate(rows)))
    return path


@pytest.mark.parametrize(("newly", "fails"), [(2, False), (5, True)])
def test_the_library_gate_fails_a_rise_beyond_chance_and_not_a_small_set_s_noise(
    tmp_path: Path, newly: int, fails: bool
) -> None:
    """20 records, one flagged in the baseline: 2 more flagged (+10 points) is within what 20 questions
    show by chance (95% interval -9.0 to +30.5 points); 5 more (+25 points) is not (lower end +2.0)."""
    main = [BAD] + [GOOD] * 19
    branch = [BAD] * (1 + newly) + [GOOD] * (19 - newly)
    baseline = Baseline.read(_scores(tmp_path, "main.jsonl", main))
    records = [{**BASE, "id": f"r{n}", "answer": a} for n, a in enumerate(branch)]
    summary = evaluate_dataset(records, ["faithfulness"]).summary
    failures = summary.gate({}, baseline=baseline)
    comparison = baseline.compare(summary.flags)
    assert (comparison.paired, comparison.newly, comparison.fixed, comparison.both) == (20, newly, 0, 1)
    if not fails:
        assert failures == []
        assert comparison.words() == (
            f"faithfulness flagged 1 -> 3 of 20 records paired with {baseline.name}: +10.0 points (95% "
            "interval -9.0 to +30.5 points; 2 newly flagged, 0 no longer)"
        )
        return
    assert failures == [
        f"faithfulness flagged 1 -> 6 of 20 records paired with {baseline.name}: +25.0 points (95% interval "
        "+2.0 to +46.9 points; 5 newly flagged, 0 no longer): a rise above baseline_margin=0 even at the "
        "interval's lower end"
    ]
    assert summary.gate({}, baseline=baseline, baseline_margin=0.05) == [], "a margin above the lower end"


def test_records_are_paired_by_id_and_the_unpaired_are_counted_apart(tmp_path: Path) -> None:
    baseline = Baseline.read(_scores(tmp_path, "main.jsonl", [GOOD, GOOD, BAD]))
    records = [{**BASE, "id": "r2", "answer": GOOD}, {**BASE, "id": "new", "answer": BAD}]
    comparison = baseline.compare(evaluate_dataset(records, ["faithfulness"]).summary.flags)
    assert (comparison.paired, comparison.fixed, comparison.unpaired) == (1, 1, 1)
    nothing = baseline.compare(
        evaluate_dataset([{**BASE, "id": "x", "answer": BAD}], ["faithfulness"]).summary.flags
    )
    assert nothing.words() == f"faithfulness: no record scored in both this run and {baseline.name}"


def test_a_baseline_that_is_no_scores_file_or_reads_a_record_twice_is_refused(tmp_path: Path) -> None:
    records = tmp_path / "golden.jsonl"
    records.write_text(json.dumps({**BASE, "id": "a", "answer": GOOD}) + "\n")
    with pytest.raises(ValueError, match="no `results`"):
        Baseline.read(records)
    twice = _scores(tmp_path, "twice.jsonl", [GOOD])
    twice.write_text(twice.read_text() * 2)
    with pytest.raises(ValueError, match="id 'r0' on two rows"):
        Baseline.read(twice)
