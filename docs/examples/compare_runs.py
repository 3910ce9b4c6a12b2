"""docs/offline/library.md: two runs of `tracescore score` on the same golden set compared, record by record
(main's scores kept from its CI run, and a branch's); run here on golden.jsonl and golden_next.jsonl."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
folder = Path(tempfile.mkdtemp())
for scores, answers in (("main.jsonl", "golden.jsonl"), ("branch.jsonl", "golden_next.jsonl")):
    command = ["score", answers, "--out", str(folder / scores), "--metrics", "faithfulness"]
    subprocess.run(
        [sys.executable, "-m", "tracescore.cli", *command], cwd=HERE, check=True, capture_output=True
    )
os.chdir(folder)  # where the two runs' --out files are, as in a CI job's folder

# --8<-- [start:compare]
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402


def faithfulness(scores_file: Path) -> pd.DataFrame:
    """Each record's faithfulness score and label, by id, from a `tracescore score --out` file."""
    rows = pd.read_json(scores_file, lines=True, dtype={"id": str})  # ids such as "007" stay strings
    verdict = rows["results"].map(lambda results: (results.get("faithfulness") or {}).get("label"))
    return rows.assign(verdict=verdict).set_index("id")[["faithfulness", "verdict"]]


main, branch = faithfulness(Path("main.jsonl")), faithfulness(Path("branch.jsonl"))  # the two --out files
both = main.merge(branch, how="outer", left_index=True, right_index=True, suffixes=("_main", "_branch"))
print(both)
newly_flagged = both.verdict_branch.eq("hallucinated") & both.verdict_main.ne("hallucinated")
print("newly hallucinated:", list(both.index[newly_flagged]))
print(f"mean faithfulness {main.faithfulness.mean():.3f} -> {branch.faithfulness.mean():.3f}")
# --8<-- [end:compare]

os.chdir(HERE)
shutil.rmtree(folder)
