"""`count_rows`: what an interrupted `tracescore score` counts its rows against (the line it ends with, tested
through a real Ctrl-C in tests/cli/test_cli_score.py) is the rows the run writes, one per record read, valid
or not."""

from __future__ import annotations

import json
from pathlib import Path

from tracescore.score._batch import count_rows, read_records

RECORD = {"query": "q", "contexts": ["c"], "answer": "a"}


def test_the_rows_counted_are_the_records_read_in_json_lines_and_csv(tmp_path: Path) -> None:
    jsonl = tmp_path / "in.jsonl"
    line = json.dumps(RECORD) + "\n"
    jsonl.write_text(line + "\n{not json\n" + line, encoding="utf-8")  # a blank line: no record
    table = tmp_path / "in.csv"
    # A quoted field over two lines is one record; a blank line none; a short row an invalid one.
    table.write_text('query,contexts,answer\nq,c,"two\nlines"\n\nq,c\nq,c,a\n', encoding="utf-8")
    for path, rows in ((jsonl, 3), (table, 3)):
        assert count_rows(path) == rows == len(list(read_records(path))), path
