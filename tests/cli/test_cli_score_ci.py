"""`tracescore score`'s output for a CI system besides its exit status: the baseline gate against another
run, a JUnit file and the JSON summary."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from click.testing import CliRunner

from tests.cli.test_cli_score import GOOD
from tracescore.cli import main

MUMBAI = {**GOOD, "answer": "Mumbai"}  # faithfulness 0, hallucinated


def _golden(tmp_path: Path, name: str, hallucinated: int, records: int = 20) -> Path:
    """`records` records, ids r0..: the first `hallucinated` of them answered Mumbai, the rest Delhi."""
    path = tmp_path / name
    rows = [{**(MUMBAI if n < hallucinated else GOOD), "id": f"r{n}"} for n in range(records)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(*args: str) -> tuple[str, int]:
    result = CliRunner().invoke(main, ["score", *args, "--metrics", "faithfulness", "--no-progress"])
    return result.output, result.exit_code


def test_baseline_fails_a_rise_in_flagged_answers_beyond_chance_and_says_the_interval(tmp_path: Path) -> None:
    main_scores = tmp_path / "main.jsonl"
    assert _score(str(_golden(tmp_path, "main_in.jsonl", 1)), "--out", str(main_scores))[1] == 0
    output, code = _score(
        str(_golden(tmp_path, "branch.jsonl", 3)),
        "--out",
        str(tmp_path / "b.jsonl"),
        "--baseline",
        str(main_scores),
        "--junit",
        str(tmp_path / "junit.xml"),
    )
    assert code == 0, output
    passed = (
        f"  faithfulness flagged 1 -> 3 of 20 records paired with {main_scores}: +10.0 points (95% interval "
        "-9.0 to +30.5 points; 2 newly flagged, 0 no longer)"
    )
    assert passed in output.splitlines(), output
    # The CI page shows the passing comparison too (the suite's output), not only its green case.
    assert passed in (ET.parse(tmp_path / "junit.xml").findtext(".//system-out") or "").splitlines()
    output, code = _score(
        str(_golden(tmp_path, "worse.jsonl", 6)),
        "--out",
        str(tmp_path / "w.jsonl"),
        "--baseline",
        str(main_scores),
    )
    assert code == 1
    assert output.splitlines()[-1] == (
        f"FAIL faithfulness flagged 1 -> 6 of 20 records paired with {main_scores}: +25.0 points (95% "
        "interval +2.0 to +46.9 points; 5 newly flagged, 0 no longer): a rise above --baseline-margin 0 even "
        "at the interval's lower end"
    ), output
    worse = [
        str(tmp_path / "worse.jsonl"),
        "--out",
        str(tmp_path / "w.jsonl"),
        "--baseline",
        str(main_scores),
    ]
    assert _score(*worse, "--baseline-margin", "3%")[1] == 0, "a margin above the interval's lower end"
    output, code = _score(str(tmp_path / "worse.jsonl"), "--baseline-margin", "2%")
    assert code == 2 and "--baseline-margin is the rise --baseline allows: add --baseline" in output
    output, code = _score(*worse, "--baseline-margin", "1.5")
    assert code == 2 and "--baseline-margin '1.5': expected a share below 1" in output
    output, code = _score(str(tmp_path / "worse.jsonl"), "--baseline", str(tmp_path / "main_in.jsonl"))
    assert code == 1 and "--baseline: " in output and "is it the scored input?" in output, output
    # --baseline is a gate: a record it could not judge fails it, unless allowed.
    invalid = tmp_path / "invalid.jsonl"
    invalid.write_text((tmp_path / "branch.jsonl").read_text() + "{not json\n", encoding="utf-8")
    against = ["--out", str(tmp_path / "i.jsonl"), "--baseline", str(main_scores)]
    output, code = _score(str(invalid), *against)
    assert code == 1 and output.splitlines()[-1].startswith("FAIL 1 of 21 records not scored (1 invalid)"), (
        output
    )
    assert _score(str(invalid), *against, "--allow-unscored", "1")[1] == 0


def test_junit_has_one_case_per_gate_condition_failed_as_the_fail_lines_say(tmp_path: Path) -> None:

    golden, junit, summary = (
        _golden(tmp_path, "golden.jsonl", 1, records=4),
        tmp_path / "ci" / "junit.xml",
        tmp_path / "s.json",
    )
    gate = ["--fail-under", "faithfulness=0.9", "--max-flagged", "1"]
    ci = ["--junit", str(junit), "--summary-json", str(summary)]
    output, code = _score(str(golden), "--out", str(tmp_path / "o.jsonl"), *gate, *ci)
    assert code == 1
    fails = [line.removeprefix("FAIL ") for line in output.splitlines() if line.startswith("FAIL ")]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("failures")) == ("5", "1")
    cases = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    assert list(cases) == [
        "records scored", "--fail-under faithfulness=0.9", "--max-flagged 1", "--allow-unscored 0",
        "ids read once",
    ]  # fmt: skip
    failed = cases["--fail-under faithfulness=0.9"]
    assert failed is not None and [failed.get("message")] == fails == [
        "faithfulness: mean 0.750 is below 0.9"
    ]
    assert "4 records (0 invalid)" in (suite.findtext("system-out") or "")
    document = json.loads(summary.read_text())
    assert (document["exit_status"], document["passed"], document["records"]) == (1, False, 4)
    interval = document["metrics"]["faithfulness"].pop("flagged_share_interval")
    assert document["metrics"]["faithfulness"] == {
        "scored": 4, "unscored": 0, "mean": 0.75, "below_share": 0.25, "flagged": 1, "flagged_share": 0.25
    }  # fmt: skip
    assert [round(end, 3) for end in interval] == [0.046, 0.699]  # Wilson's, 1 of 4
    assert [c["failure"] for c in document["checks"] if not c["passed"]] == fails

    output, code = _score(str(golden), "--out", str(tmp_path / "o.jsonl"), *ci)
    assert code == 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and [c.get("name") for c in suite.iter("testcase")] == ["records scored"]
    assert suite.get("failures") == "0" and json.loads(summary.read_text())["exit_status"] == 0

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    output, code = _score(str(empty), "--out", str(tmp_path / "o.jsonl"), *gate, *ci)
    assert code == 1
    [case] = ET.parse(junit).getroot().iter("testcase")
    failure = case.find("failure")
    assert failure is not None and output.splitlines()[-1] == f"Error: {failure.get('message')}"


def test_a_share_given_as_a_percentage_is_echoed_as_one_in_the_log_the_junit_cases_and_the_json(
    tmp_path: Path,
) -> None:
    """`--max-flagged 60%` was echoed `--max-flagged 0.6` (the fraction it is read as) in the JUnit case and
    the JSON's checks, and `--baseline-margin 2%` as 0.02 in its FAIL line: each is said as it was given."""
    main_scores = tmp_path / "main.jsonl"
    assert _score(str(_golden(tmp_path, "main_in.jsonl", 0)), "--out", str(main_scores))[1] == 0
    junit, summary = tmp_path / "junit.xml", tmp_path / "s.json"
    ci = ["--junit", str(junit), "--summary-json", str(summary)]
    worse = [str(_golden(tmp_path, "worse.jsonl", 14)), "--out", str(tmp_path / "w.jsonl")]
    output, code = _score(
        *worse, "--max-flagged", "60%", "--baseline", str(main_scores), "--baseline-margin", "2%", *ci
    )
    assert code == 1, output
    fails = [line.removeprefix("FAIL ") for line in output.splitlines() if line.startswith("FAIL ")]
    assert fails[0] == "faithfulness: 14 records flagged (70.0% of scored), more than 60% of scored", output
    assert fails[1].endswith("a rise above --baseline-margin 2% even at the interval's lower end"), output
    names = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    assert "--max-flagged 60%" in names, names
    checks = {c["name"]: c["failure"] for c in json.loads(summary.read_text())["checks"]}
    assert checks["--max-flagged 60%"] == fails[0], checks
    # As written: a fraction stays one.
    output, code = _score(*worse, "--max-flagged", "0.6", *ci)
    assert code == 1 and "--max-flagged 0.6" in [
        c.get("name") for c in ET.parse(junit).getroot().iter("testcase")
    ]


def test_the_junit_case_of_the_baseline_is_named_by_what_it_checks(tmp_path: Path) -> None:
    """A CI page lists each case as a test: the baseline's was named after its flag ("--baseline-margin 0"),
    read there as a test of the margin. Its name says what it checks, as "records scored" does; its failure
    is still the FAIL line, word for word."""
    main_scores = tmp_path / "main.jsonl"
    assert _score(str(_golden(tmp_path, "main_in.jsonl", 1)), "--out", str(main_scores))[1] == 0
    junit, summary = tmp_path / "junit.xml", tmp_path / "s.json"
    worse = [str(_golden(tmp_path, "worse.jsonl", 6)), "--out", str(tmp_path / "w.jsonl")]
    against = ["--baseline", str(main_scores), "--junit", str(junit), "--summary-json", str(summary)]
    output, code = _score(*worse, *against)
    assert code == 1, output
    [fail] = [line.removeprefix("FAIL ") for line in output.splitlines() if line.startswith("FAIL ")]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {case.get("name"): case.find("failure") for case in suite.iter("testcase")}
    baseline_case = "faithfulness flagged share not above the baseline's by more than 0"
    assert list(cases) == ["records scored", baseline_case, "--allow-unscored 0", "ids read once"], cases
    failure = cases[baseline_case]
    assert failure is not None and failure.get("message") == fail
    checks = {c["name"]: c["failure"] for c in json.loads(summary.read_text())["checks"]}
    assert checks[baseline_case] == fail, checks
    # Given as a percentage, said as one; passing, green under the same name.
    output, code = _score(*worse, *against, "--baseline-margin", "3%")
    assert code == 0, output
    names = [case.get("name") for case in ET.parse(junit).getroot().iter("testcase")]
    assert "faithfulness flagged share not above the baseline's by more than 3%" in names, names


def test_the_json_summary_carries_the_printed_summary_s_notes(tmp_path: Path) -> None:
    """A golden set of faithful summaries fails its gate on the offline judge's false flags: the printed
    summary says why (its `note:` line), and the JSON summary, which a CI job reads instead of the log, said
    nothing of it. Its `notes` are the printed ones, word for word; a batch of short answers has none."""
    summaries = Path(__file__).parents[2] / "docs" / "examples" / "golden_summaries.jsonl"
    summary = tmp_path / "s.json"
    output, code = _score(str(summaries), "--out", str(tmp_path / "o.jsonl"), "--summary-json", str(summary))
    assert code == 0, output
    printed = [line.removeprefix("  note: ") for line in output.splitlines() if line.startswith("  note: ")]
    assert len(printed) == 1 and printed[0].startswith("8 of 8 faithfulness scores are the offline judge's")
    document = json.loads(summary.read_text())
    assert document["notes"] == printed
    assert document["exit_status"] == 0 and document["records"] == 8  # the other keys stay
    output, code = _score(
        str(_golden(tmp_path, "short.jsonl", 1)), "--out", str(tmp_path / "s.jsonl"), "--summary-json",
        str(summary),
    )  # fmt: skip
    assert code == 0 and json.loads(summary.read_text())["notes"] == [], output
