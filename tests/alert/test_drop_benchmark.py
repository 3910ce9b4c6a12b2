"""benchmarks/drop_detection.py keeps its contract on any labelled JSONL: the last line is JSON of the agreed
shape; a file with one label gives that shape with nulls; a file with no usable record is one clear error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "drop_detection.py"
CONTEXT = "The Oberoi Group is a hotel company with its head office in Delhi. It was founded in 1934."
VARIANTS = {"threshold_offline", "drop_offline", "threshold_llm_baseline", "drop_llm_baseline"}


def labelled(tmp_path: Path, both_labels: bool = True) -> Path:
    lines = []
    for i in range(30):  # other field order, no ids; one unusable line at the end
        question = f"Where is the head office of hotel company number {i}?"
        lines.append({"label": "faithful", "answer": "Delhi", "contexts": [CONTEXT], "query": question})
        if both_labels:
            wrong = f"Mumbai, in {1900 + i}."
            lines.append({"query": question, "contexts": [CONTEXT], "answer": wrong, "label": "hallucinated"})
    path = tmp_path / "mine.jsonl"
    text = "\n".join(json.dumps(line) for line in lines) + '\n{"query": "no answer", "label": "faithful"}\n'
    path.write_text(text, encoding="utf-8")
    return path


def run(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(BENCHMARK), str(path), "--json", "--streams", "2", "--after", "400"]
    return subprocess.run([*command, "--workers", "1", *flags], capture_output=True, text=True, timeout=900)


def test_the_last_line_is_the_contract_s_json(tmp_path: Path) -> None:
    done = run(labelled(tmp_path), "--measure-half", "all")
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures["variants"]) == VARIANTS
    for variant in figures["variants"].values():
        assert variant["false_alarms_per_10k"] >= 0
        for step in ("step_15", "step_30"):
            assert {"median", "p90", "missed", "limit"} <= set(variant[step])
            assert 0 <= variant[step]["missed"] <= 1
    # The offline judge separates these answers: a 30% step is paged, near its limit, without false alarms.
    drop = figures["variants"]["drop_offline"]
    assert drop["false_alarms_per_10k"] == 0 and drop["step_30"]["missed"] == 0
    assert drop["step_30"]["limit"] <= drop["step_30"]["median"] <= 400
    assert "mine.jsonl:61: skipped" in done.stderr


def test_a_file_with_one_label_gives_the_shape_with_nulls_and_says_why(tmp_path: Path) -> None:
    done = run(labelled(tmp_path, both_labels=False))
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(figures["variants"]) == VARIANTS
    assert figures["variants"]["drop_offline"]["step_30"]["median"] is None
    assert "one label only" in figures["error"]


def test_a_file_with_no_usable_record_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text("this is not JSON\n[1, 2]\n", encoding="utf-8")
    done = run(path)
    assert done.returncode != 0
    assert "no usable record (2 lines skipped)" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_default_configs_run_as_variants_of_their_own(tmp_path: Path) -> None:
    # The rule run without a config, before this release and now, each in its evaluator: any of its pages.
    done = run(labelled(tmp_path), "--measure-half", "all", "--kinds", "old_default,default")
    assert done.returncode == 0, done.stderr[-2000:]
    variants = json.loads(done.stdout.strip().splitlines()[-1])["variants"]
    assert set(variants) == {
        f"{k}_{j}" for k in ("old_default", "default") for j in ("offline", "llm_baseline")
    }
    # A judge that separates the answers: the new default pages the 30% step, on its drop part (armed by the
    # healthy week), without false alarms.
    new = variants["default_offline"]
    assert new["false_alarms_per_10k"] == 0 and new["step_30"]["missed"] == 0
