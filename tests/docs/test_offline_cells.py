"""The Python blocks of the offline pages run as notebook cells: copied in page order into one fresh
namespace, each block brings its own imports (a block that leant on an import above its snippet markers,
`pd` or `Path`, failed with NameError in a notebook while the whole example file ran in CI)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pages import DOCS, REPO

EXAMPLES = DOCS / "examples"
_SNIPPET = re.compile(r'--8<-- "(docs/examples/[\w.]+\.py):(\w+)"')
# One notebook: the cells share a namespace, a cell's failure is named and the next still runs.
_NOTEBOOK = """
import json, sys, traceback
sys.path.insert(0, ".")  # a notebook's folder is importable (kb_metrics.py beside it)
namespace = {"__name__": "__main__"}
failed = []
for where, code in json.load(sys.stdin):
    try:
        exec(compile(code, where, "exec"), namespace)
    except Exception:
        failed.append(where + ": " + traceback.format_exc(limit=-1).strip().splitlines()[-1])
print("\\n".join(failed), file=sys.stderr)
sys.exit(1 if failed else 0)
"""


def cells(page: Path) -> list[tuple[str, str]]:
    """The page's Python snippets, in page order, as (file:section, code)."""
    found = []
    for path, section in _SNIPPET.findall(page.read_text(encoding="utf-8")):
        text = (REPO / path).read_text(encoding="utf-8")
        body = re.search(rf"# --8<-- \[start:{section}\]\n(.*?)# --8<-- \[end:{section}\]", text, re.S)
        assert body is not None, f"{path}: no section {section}"
        found.append((f"{path}:{section}", body[1]))
    return found


@pytest.mark.parametrize("page", ["library.md", "metrics.md"])
def test_the_python_blocks_of_a_page_run_as_notebook_cells(page: str, tmp_path: Path) -> None:
    folder = shutil.copytree(EXAMPLES, tmp_path / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    # The two runs' --out files the comparison block reads (main's and the branch's), as the page says.
    for scores, answers in (("main.jsonl", "golden.jsonl"), ("branch.jsonl", "golden_next.jsonl")):
        command = ["score", answers, "--out", scores, "--metrics", "faithfulness"]
        subprocess.run(
            [sys.executable, "-m", "tracescore.cli", *command],
            cwd=folder,
            env=env,
            check=True,
            capture_output=True,
        )
    done = subprocess.run(
        [sys.executable, "-c", _NOTEBOOK],
        input=json.dumps(cells(DOCS / "offline" / page)),
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
