"""The long-answer guidance runs as written: the CI gate's command on a golden set of faithful summaries
(docs/offline/library.md) fails on the offline judge's false flags and says why, and the pages a newcomer
reads first point to the guidance."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from pages import DOCS, RECORD, REPO, blocks

EXAMPLES = DOCS / "examples"
LIBRARY = DOCS / "offline" / "library.md"
OUTPUT = EXAMPLES / "gate_long_answers.out"


def _command_on_the_page() -> list[str]:
    [line] = [
        line
        for block in blocks(LIBRARY)
        if block.lang == "sh"
        for line in block.body.splitlines()
        if "golden_summaries.jsonl" in line
    ]
    return shlex.split(line)


def test_the_gate_on_faithful_summaries_fails_and_says_why(tmp_path: Path) -> None:
    words = _command_on_the_page()
    assert words[:2] == ["tracescore", "score"]
    words[words.index("--out") + 1] = str(tmp_path / "scores.jsonl")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    done = subprocess.run(
        [sys.executable, "-m", "tracescore.cli", *words[1:]],
        cwd=EXAMPLES,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    said = done.stdout + done.stderr
    # Every answer is faithful (the file's labels say so): both gates fail on the judge's level alone.
    assert all('"label": "faithful"' in line for line in (EXAMPLES / "golden_summaries.jsonl").open())
    assert "note: 8 of 8 faithfulness scores are the offline judge's on long answers" in said
    if RECORD:
        OUTPUT.write_text(said, encoding="utf-8")
    assert said == OUTPUT.read_text(encoding="utf-8"), f"{OUTPUT.relative_to(REPO)} is stale"


def test_the_first_pages_point_to_the_long_answer_guidance() -> None:
    section = "## Long answers: summaries, reports"
    assert section in (DOCS / "quickstart.md").read_text(encoding="utf-8")
    anchor = "quickstart.md#long-answers-summaries-reports"
    assert anchor in (DOCS / "index.md").read_text(encoding="utf-8")
    assert "#long-answers-summaries-reports" in (DOCS / "quickstart.md").read_text(encoding="utf-8")
    # A team of summaries reads the README first, then perhaps nothing else.
    assert f"](docs/{anchor})" in (REPO / "README.md").read_text(encoding="utf-8")


def test_the_long_answer_sampling_example_loads_with_a_budget() -> None:
    from tracescore.sample import load_sampling_config

    path = EXAMPLES / "sampling_long_answers.toml"
    assert f'--8<-- "docs/examples/{path.name}"' in (DOCS / "sampling.md").read_text(encoding="utf-8")
    config = load_sampling_config(path)
    assert config.llm_budget.tokens_per_hour == 100_000 and config.llm_budget.tokens_per_day == 1_500_000
    assert config.cascade.baseline_rate == 0.01
