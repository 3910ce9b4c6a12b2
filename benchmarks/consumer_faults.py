"""The fault suite's counts as a table: runs tests/consume/test_faults.py and test_faults_fuzz.py (real
broker, the consumer as a real process killed and restarted, the local judge server) and tabulates what each
run left on the topics.

    python benchmarks/consumer_faults.py [-k EXPR]

Every row comes from the evaluations topic and the DLQ read back after the run (records deduplicated on
trace id, span id and metric). The suite itself fails on any lost or unexplained span; this script only
collects the counts it reports (through $TRACESCORE_FAULT_COUNTS), so the figures are the tests' own.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = ("tests/consume/test_faults.py", "tests/consume/test_faults_fuzz.py")
COLUMNS = (
    ("fault", "fault"), ("spans", "expected"), ("lost", "lost"), ("records", "records"),
    ("duplicated", "duplicated"), ("scored", "scored"), ("explained errors", "explained_errors"),
    ("unexplained", "unexplained"), ("DLQ", "dead_letters"),
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default=None, help="pytest -k expression: a subset of the faults")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        counts = Path(tmp) / "counts.jsonl"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITE]
        command += ["-k", args.k] if args.k else []
        env = {**os.environ, "TRACESCORE_FAULT_COUNTS": str(counts), "PYTHONPATH": str(REPO)}
        suite = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        print(suite.stdout.strip().splitlines()[-1] if suite.stdout.strip() else suite.stderr[-2000:])
        rows = [json.loads(line) for line in counts.read_text().splitlines()] if counts.exists() else []
    print()
    print("| " + " | ".join(title for title, _ in COLUMNS) + " | notes |")
    print("|---|" + "---:|" * (len(COLUMNS) - 1) + "---|")
    for row in rows:
        notes = "; ".join(f"{k}={v}" for k, v in row["extra"].items())
        print("| " + " | ".join(str(row[key]) for _, key in COLUMNS) + f" | {notes} |")
    return suite.returncode


if __name__ == "__main__":
    sys.exit(main())
