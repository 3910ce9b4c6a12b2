"""A golden set labelled in part: the rows without a label are scored, unlabelled, whether the label column
is `label` or one named with `column_map` / `--column label=NAME`; a label column no row has is said."""

from __future__ import annotations

import io
import json
from pathlib import Path

from tracescore.score import Faithfulness, OfflineJudge, evaluate_dataset
from tracescore.score._batch import score_file

DELHI = {"question": "Where is it?", "docs": ["It is in Delhi."]}
ROWS = [
    {"id": "a", **DELHI, "reply": "Delhi.", "verdict": "faithful"},
    {"id": "b", **DELHI, "reply": "Mumbai."},
    {"id": "c", **DELHI, "reply": "Pune.", "verdict": "bad"},
]
COLUMNS = {"query": "question", "contexts": "docs", "answer": "reply"}


def _score(tmp_path: Path, column_map: dict[str, str]) -> tuple[list[dict], list[str]]:
    source = tmp_path / "golden.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    out, said = io.StringIO(), []
    summary = score_file(
        source,
        out,
        metrics=[Faithfulness()],
        judge=OfflineJudge(),
        progress=False,
        report=said.append,
        column_map=column_map,
    )
    assert summary.invalid == 0, said
    return [json.loads(line) for line in out.getvalue().splitlines()], said


def test_rows_without_the_mapped_label_column_are_scored_unlabelled(tmp_path: Path) -> None:
    rows, said = _score(tmp_path, {**COLUMNS, "label": "verdict"})
    assert [row.get("label") for row in rows] == ["faithful", None, "bad"]
    assert [row["faithfulness"] for row in rows] == [1.0, 0.0, 0.0]
    assert said == []


def test_a_label_column_no_row_has_is_said(tmp_path: Path) -> None:
    rows, said = _score(tmp_path, {**COLUMNS, "label": "verdcit"})
    assert all("label" not in row and row["faithfulness"] is not None for row in rows)
    assert said == ["--column label=verdcit: no record has a value in that column, so no row has a label"]


def test_the_library_reads_a_partly_labelled_list_alike() -> None:
    result = evaluate_dataset(ROWS, ["faithfulness"], column_map={**COLUMNS, "label": "verdict"})
    assert [row.get("label") for row in result.rows] == ["faithful", None, "bad"]
    assert result.summary.invalid == 0


def test_an_empty_label_cell_is_no_label(tmp_path: Path) -> None:
    """A partly labelled DataFrame written with `to_csv` leaves empty cells; read back, pandas gives NaN."""
    source = tmp_path / "golden.csv"
    source.write_text(
        'id,query,contexts,answer,label\nq1,Where?,["It is in Delhi."],Delhi.,faithful\n'
        'q2,Where?,["It is in Delhi."],Mumbai.,\n',
        encoding="utf-8",
    )
    out: io.StringIO = io.StringIO()
    score_file(source, out, metrics=[Faithfulness()], judge=OfflineJudge(), progress=False)
    assert [json.loads(line).get("label") for line in out.getvalue().splitlines()] == ["faithful", None]
    rows = [{"query": "Where?", "contexts": ["It is in Delhi."], "answer": "Mumbai.", "label": float("nan")}]
    assert "label" not in evaluate_dataset(rows, ["faithfulness"]).rows[0]
