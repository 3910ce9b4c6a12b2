"""What a CI system reads of a `tracescore score` run besides its exit status: a JUnit XML file (`--junit`)
and a JSON summary (`--summary-json`).

The JUnit file has one test case per condition of the gate (each `--fail-under`, `--max-flagged`, the
baseline, the records not scored, the ids read twice, and "records scored", which every run checks), not
one per record: CI pages (GitLab's test report, Jenkins, GitHub's test reporters) count failed cases and
show each one's message, so the red cases are the exit status's reasons, word for word the `FAIL` lines. A
case per record would show a flagged answer as a failed test in a batch that passed (`--max-flagged 3`
allows it), and every case green in a batch whose mean failed; the flagged records are in the report and
in `--out`.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tracescore.score._baseline import CONFIDENCE, Comparison
from tracescore.score._summary import BatchSummary

__all__ = ["Check", "junit_xml", "summary_json"]

# The check every run makes, a gate or not: a batch of which nothing could be scored fails.
ANYTHING_SCORED = "records scored"
_SUITE = "tracescore score"


@dataclass(frozen=True)
class Check:
    """One condition the run checked: its name as the command line gives it (`--fail-under
    faithfulness=0.8`), and the words of its failure (the `FAIL` line's), None when it passed."""

    name: str
    failure: str | None = None


def junit_xml(source: str, checks: Sequence[Check], summary_lines: Sequence[str]) -> bytes:
    """A JUnit XML document: one test suite (the run on `source`), one test case per check, the closing
    summary as the suite's output."""
    failed = sum(check.failure is not None for check in checks)
    counts = {"tests": str(len(checks)), "failures": str(failed), "errors": "0", "skipped": "0"}
    root = ET.Element("testsuites", {"name": _SUITE, **counts})
    suite = ET.SubElement(root, "testsuite", {"name": f"{_SUITE} {source}", **counts})
    for check in checks:
        case = ET.SubElement(suite, "testcase", {"classname": _SUITE, "name": check.name})
        if check.failure is not None:
            ET.SubElement(case, "failure", {"message": check.failure, "type": "gate"}).text = check.failure
    ET.SubElement(suite, "system-out").text = "\n".join(summary_lines) + "\n"
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def summary_json(
    source: str,
    summary: BatchSummary,
    checks: Sequence[Check],
    *,
    exit_status: int,
    comparison: Comparison | None = None,
) -> dict[str, Any]:
    """The run as data: its counts, each metric's figures, its notes, the checks and the exit status."""
    metrics = {
        name: {
            "scored": len(summary.scores[name]),
            "unscored": summary.unscored.get(name, 0),
            "mean": summary.mean(name),
            "below_share": summary.below_share(name),
            "flagged": summary.flagged.get(name, 0),
            "flagged_share": summary.flagged_share(name),
            "flagged_share_interval": _listed(summary.flagged_interval(name)),
        }
        for name in summary.scores
    }
    document: dict[str, Any] = {
        "input": source,
        "records": summary.records,
        "invalid": summary.invalid,
        "threshold": summary.shown_threshold,
        "metrics": metrics,
        "repeated_ids": summary.repeated_ids,
        "usage": summary.usage.model_dump(mode="json"),
        # The printed summary's `note:` lines, word for word: a CI job that reads this file, not the log,
        # sees why a golden set of faithful long answers fails its gate.
        "notes": summary.notes,
        "checks": [{"name": c.name, "passed": c.failure is None, "failure": c.failure} for c in checks],
        "passed": all(c.failure is None for c in checks),
        "exit_status": exit_status,
    }
    if comparison is not None:
        interval = comparison.interval(CONFIDENCE)
        document["baseline"] = {
            "file": comparison.baseline,
            "paired": comparison.paired,
            "flagged_in_both": comparison.both,
            "newly_flagged": comparison.newly,
            "no_longer_flagged": comparison.fixed,
            "not_paired": comparison.unpaired,
            "rise": comparison.rise,
            "confidence": CONFIDENCE,
            "interval": _listed(interval),
        }
    return document


def _listed(interval: tuple[float, float] | None) -> list[float] | None:
    return list(interval) if interval else None
