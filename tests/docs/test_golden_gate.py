"""The GitHub Actions job of docs/offline/library.md (docs/examples/golden_gate.yml): its score step, run as
the job runs it, scores without a baseline on the first run, passes a pull request no worse than main's
scores and fails one whose answers are flagged more often beyond chance, its summary in the job's log and
kept for the run's page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from pages import DOCS

WORKFLOW = DOCS / "examples" / "golden_gate.yml"
DELHI = {"query": "Where is the head office?", "contexts": ["The head office is in Delhi."]}


def _step(name: str) -> str:
    [job] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"].values()
    [step] = [s for s in job["steps"] if s.get("name") == name]
    return step["run"]


def _golden(folder: Path, wrong: int) -> None:
    rows = [{"id": f"q{n}", **DELHI, "answer": "Mumbai." if n < wrong else "Delhi."} for n in range(20)]
    (folder / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _run_score_step(folder: Path) -> int:
    """The step's exit status; the job's log (its stderr) holds the summary, a failing run's too."""
    shim = folder / "bin" / "tracescore"  # the command the job installs, this checkout's
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m tracescore.cli "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    env["PATH"] = f"{shim.parent}{os.pathsep}{env['PATH']}"
    # GitHub runs a step's script with `bash -e {0}`.
    script = folder / "step.sh"
    script.write_text(_step("score"), encoding="utf-8")
    done = subprocess.run(
        ["bash", "-e", str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.stderr == (folder / "score.log").read_text(encoding="utf-8")
    assert done.stderr.startswith("20 records (0 invalid)\n"), done.stderr
    return done.returncode


def test_the_job_scores_main_then_gates_a_pull_request_against_it(tmp_path: Path) -> None:
    _golden(tmp_path, wrong=1)
    assert _run_score_step(tmp_path) == 0  # main's first run: nothing to compare with
    assert "baseline" not in json.loads((tmp_path / "summary.json").read_text())
    (tmp_path / "main").mkdir()
    (tmp_path / "scores.jsonl").rename(tmp_path / "main" / "scores.jsonl")  # `gh run download` puts it here

    _golden(tmp_path, wrong=2)  # one more wrong answer: within chance
    assert _run_score_step(tmp_path) == 0
    assert "faithfulness flagged 1 -> 2 of 20 records paired" in (tmp_path / "score.log").read_text()

    _golden(tmp_path, wrong=6)  # five more: beyond chance
    assert _run_score_step(tmp_path) == 1
    log = (tmp_path / "score.log").read_text()
    assert log.splitlines()[-1].startswith("FAIL faithfulness flagged 1 -> 6 of 20 records paired"), log
    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    assert [c.get("name") for c in cases if c.find("failure") is not None] == [
        "faithfulness flagged share not above the baseline's by more than 0"
    ]
    assert (tmp_path / "report.html").exists()
