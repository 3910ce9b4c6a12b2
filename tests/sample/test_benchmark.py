"""benchmarks/cascade_sampling.py works on any labelled JSONL in the dev set's format and prints JSON last."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tracescore.sample._calibration import COLD_START

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "cascade_sampling.py"


def load_benchmark(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A benchmark script as a module, its folder on the path as when it runs (its shared helpers)."""
    monkeypatch.syspath_prepend(str(BENCHMARK.parent))
    spec = importlib.util.spec_from_file_location(name, BENCHMARK.parent / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


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


def test_the_shipped_cold_start_is_what_calibrate_fits_on_the_dev_sets_calibration_halves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # BENCHMARKS.md quotes figures for COLD_START as `--calibrate QA,LONG` fits it on half 0 of both dev
    # sets; a change of features, judge or split that is not refitted would make those figures someone
    # else's.
    benchmark = load_benchmark("cascade_sampling", monkeypatch)
    dev_sets = [benchmark.DEFAULT_PATH, benchmark.DEFAULT_PATH.parent / "faithbench_dev.jsonl"]
    if not all(path.exists() for path in dev_sets):
        pytest.skip(f"no labelled dev sets at {benchmark.DEFAULT_PATH.parent}")
    assert benchmark.calibrate(dev_sets) == dict(COLD_START)


def test_the_lockbox_is_whole_groups_of_each_dev_set_and_only_the_flag_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lockbox = load_benchmark("_lockbox", monkeypatch)
    monkeypatch.setattr(lockbox, "LOG", tmp_path / "lockbox.log")
    lines = [
        {"query": f"q{i}", "contexts": [f"passage {i // 3}"], "answer": "a", "label": "faithful"}
        for i in range(300)
    ]  # 100 groups of three answers
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    dev, mine = tmp_path / "faithbench_dev.jsonl", tmp_path / "mine.jsonl"
    dev.write_text(text, encoding="utf-8")
    mine.write_text(text, encoding="utf-8")
    closed, opened = lockbox.reader(dev), lockbox.reader(dev, lockbox=True)
    inside = [line["contexts"] for line in lines if opened(line["contexts"])]
    assert len(inside) == 90, "30 of 100 groups, each with its three answers"
    assert not any(closed(contexts) for contexts in inside), "the open part never holds a lockbox group"
    assert sum(closed(line["contexts"]) for line in lines) == 210
    assert lockbox.reader(dev, lockbox=True)(inside[0]), "the same groups every time"
    # Another file is read whole, and has no lockbox to open.
    assert all(lockbox.reader(mine)(line["contexts"]) for line in lines)
    assert not lockbox.reader(mine, lockbox=True)(lines[0]["contexts"])
    assert lockbox.open_lockbox([dev], ["x.py", "--lockbox"]) == 1
    assert lockbox.open_lockbox([dev], ["x.py", "--lockbox"]) == 2, "every opening is on record"
