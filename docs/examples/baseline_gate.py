"""docs/offline/library.md: the baseline gate and the JUnit file. main's scores of a 20-record golden set
are kept from its CI run; a branch answers the same questions, five of them now with an invented city."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

QUESTION = "Where is the Oberoi Group's head office?"
CONTEXT = "The Oberoi Group is a hotel company with its head office in Delhi."
folder = Path(tempfile.mkdtemp())


def golden(name: str, invented: int) -> None:
    """20 records, the first `invented` of them answered Mumbai (not in the context), the rest Delhi."""
    answers = ["Mumbai"] * invented + ["Delhi"] * (20 - invented)
    records = [
        {"id": f"q{n}", "query": QUESTION, "contexts": [CONTEXT], "answer": a} for n, a in enumerate(answers)
    ]
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def score(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tracescore.cli", "score", *args, "--metrics", "faithfulness"]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)


golden("golden_main.jsonl", invented=1)
golden("golden_branch.jsonl", invented=6)
score("golden_main.jsonl", "--out", "main_scores.jsonl")
# The page's command: tracescore score golden_branch.jsonl ... --baseline main_scores.jsonl --junit junit.xml
done = score(
    "golden_branch.jsonl", "--out", "scores.jsonl", "--baseline", "main_scores.jsonl", "--junit", "junit.xml"
)
print(f"exit status {done.returncode}")
print(done.stderr, end="")
print((folder / "junit.xml").read_text(encoding="utf-8"), end="")
shutil.rmtree(folder)
