"""benchmarks/cascade_sampling.py works on any labelled JSONL in the dev set's format and prints JSON last."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracescore.sample._calibration import COLD_START

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "cascade_sampling.py"

CONTEXT = "The Oberoi Group is a hotel company with its head office in Delhi. It was founded in 1934."


def test_the_benchmark_runs_on_any_labelled_file_and_prints_json_last(tmp_path: Path) -> None:
    lines = []
    for i in range(40):  # no ids, other field order, labels as words; one unusable line
        question = f"Where is the head office of hotel company number {i}?"
        lines.append({"label": "faithful", "answer": "Delhi", "contexts": [CONTEXT], "query": question})
        lines.append(
            {
                "query": question,
                "contexts": [CONTEXT],
                "answer": f"Mumbai, in {1900 + i}.",
                "label": "hallucinated",
            }
        )
    path = tmp_path / "mine.jsonl"
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"query": "no answer", "label": "faithful"}\n'
    path.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            str(BENCHMARK),
            str(path),
            "--spans",
            "400",
            "--streams",
            "2",
            "--budgets",
            "5,10",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures["budgets"]) == {"5", "10"}
    for budget in figures["budgets"].values():
        assert {"cascade", "uniform", "cascade_learning", "cascade_learning_noisy"} <= set(budget)
        assert budget["cascade"] > budget["uniform"]
    assert figures["false_escalation"] == 0.0
    assert "mine.jsonl:81: skipped" in done.stderr


def test_the_shipped_cold_start_is_what_calibrate_fits_on_the_dev_sets_calibration_halves() -> None:
    # BENCHMARKS.md quotes figures for COLD_START as `--calibrate QA,LONG` fits it on half 0 of both dev
    # sets; a change of features, judge or split that is not refitted would make those figures someone
    # else's.
    spec = importlib.util.spec_from_file_location("cascade_sampling", BENCHMARK)
    assert spec and spec.loader
    benchmark = importlib.util.module_from_spec(spec)
    sys.modules["cascade_sampling"] = benchmark
    spec.loader.exec_module(benchmark)
    dev_sets = [benchmark.DEFAULT_PATH, benchmark.DEFAULT_PATH.parent / "faithbench_dev.jsonl"]
    if not all(path.exists() for path in dev_sets):
        pytest.skip(f"no labelled dev sets at {benchmark.DEFAULT_PATH.parent}")
    assert benchmark.calibrate(dev_sets) == dict(COLD_START)
