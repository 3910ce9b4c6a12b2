"""`tracescore report`: the HTML page rebuilt from a scored JSONL, without re-scoring; checked in Chromium."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.score.test_report import _chromium
from tracescore.cli import main

BASE = {
    "query": "Where is the Oberoi Group's head office?",
    "contexts": ["The Oberoi Group is a hotel company with its head office in Delhi."],
}
RECORDS = [
    {**BASE, "id": "ok", "answer": "The head office is in Delhi.", "label": "faithful"},
    {**BASE, "id": "mumbai", "answer": "The head office is in Mumbai.", "label": "hallucinated"},
    {**BASE, "id": "paris", "answer": "The head office is in Paris.", "label": "hallucinated"},
    {**BASE, "id": "missed", "answer": "The head office is in Delhi.", "label": "hallucinated"},
    {**BASE, "id": "empty", "answer": "", "label": "faithful"},
    # One true sentence and one invented: score 0.5, and hallucinated under the default label rule.
    {
        **BASE,
        "id": "half",
        "answer": "The head office is in Delhi. It opened in 1950.",
        "label": "hallucinated",
    },
]


def _scored(tmp_path: Path) -> tuple[Path, Path]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    scores = tmp_path / "scores.jsonl"
    result = CliRunner().invoke(
        main, ["score", str(source), "--out", str(scores), "--no-progress", "--metrics", "faithfulness"]
    )
    assert result.exit_code == 0, result.output
    return source, scores


def _report(*args: str) -> str:
    result = CliRunner().invoke(main, ["report", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_report_is_rebuilt_from_scores_with_labels_and_texts(tmp_path: Path) -> None:
    source, scores = _scored(tmp_path)
    assert all(json.loads(line)["label"] for line in scores.read_text().splitlines()), "labels kept"
    page = tmp_path / "report.html"
    _report(str(scores), "--records", str(source), "--out", str(page))
    html = page.read_text(encoding="utf-8")
    cells = dict(re.findall(r'id="(tp|fn|fp|tn|balanced-accuracy)">([^<]*)<', html))
    # mumbai, paris and "half" (0.5 with an invented claim) caught, "missed" passed though labelled
    # hallucinated, "ok" passed, "empty" unscored.
    assert cells == {"tp": "3", "fn": "1", "fp": "0", "tn": "1", "balanced-accuracy": "0.875"}
    assert "The head office is in Mumbai." in html, "texts joined from --records"
    assert "1 labelled row without a score" in html

    bare = tmp_path / "bare.html"
    _report(str(scores), "--out", str(bare), "--rows", "1")
    html = bare.read_text(encoding="utf-8")
    assert "answer text not available" in html and html.count('<tr class="record"') == 2, "1 per table"


def test_a_file_that_is_not_scores_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\nnot json\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["report", str(bad), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1 and "line 2: not JSON" in result.output and "Traceback" not in result.output


def test_a_binary_file_is_one_clear_error_naming_the_file_and_line(tmp_path: Path) -> None:
    """It was Python's own `'utf-8' codec can't decode byte 0x89 in position 0`, naming neither."""
    bad = tmp_path / "image.jsonl"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n")
    result = CliRunner().invoke(main, ["report", str(bad), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: {bad} line 1: not valid UTF-8 (byte 1 of the line); is it a `tracescore score` output?\n"
    )


def test_the_scored_input_given_for_the_scores_is_said_so(tmp_path: Path) -> None:
    """It used to make a page of unscored records (and exit 0), as if the batch's judge had failed."""
    source, _ = _scored(tmp_path)
    result = CliRunner().invoke(main, ["report", str(source), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert f"{source}: none of its 6 lines is a `tracescore score` output row (no `results`)" in said, said
    assert (
        "is it the scored input? Give what `tracescore score --out` wrote, and the input with --records"
        in said
    )
    assert not (tmp_path / "r.html").exists()


def _visible_ids(dom: str) -> list[str]:
    table = dom.split('id="worst"')[1].split("</table>")[0]
    rows = re.findall(r'<tr class="record"([^>]*)>\s*<td>\d+<div class="id">([^<]*)</div>', table)
    return [record_id for attrs, record_id in rows if "hidden" not in attrs]


def test_search_filter_and_sort_work_in_headless_chromium(tmp_path: Path) -> None:
    source, scores = _scored(tmp_path)
    page = tmp_path / "report.html"
    _report(str(scores), "--records", str(source), "--out", str(page), "--threshold", "1.0")

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert _visible_ids(dom) == ["mumbai", "paris", "half"], "worst first"
    assert "3 of 3 shown" in dom, "the script ran"

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri() + "#q=paris").stdout
    assert _visible_ids(dom) == ["paris"] and "1 of 3 shown" in dom

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri() + "#verdict=fully-supported").stdout
    assert _visible_ids(dom) == ["half"] and "1 of 3 shown" in dom

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri() + "#sort=faithfulness:desc").stdout
    assert _visible_ids(dom) == ["half", "mumbai", "paris"]


@pytest.mark.parametrize("text", ["", "\n\n"], ids=["empty", "blank"])
def test_a_scores_file_without_a_row_is_an_error_not_an_empty_page(tmp_path: Path, text: str) -> None:
    """It wrote a page of nothing and exited 0, as if a batch had passed."""
    scores = tmp_path / "scores.jsonl"
    scores.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["report", str(scores), "--out", str(tmp_path / "r.html")])
    assert result.exit_code == 1, result.output
    assert result.output == (
        f"Error: nothing could be reported in {scores}: it holds no record (an empty file, blank lines or a "
        "header alone)\n"
    )
    assert not (tmp_path / "r.html").exists()


def _report_error(*args: str) -> str:
    result = CliRunner().invoke(main, ["report", *args])
    assert result.exit_code == 1, result.output
    return " ".join(result.output.split())


def test_a_page_written_over_a_file_read_is_a_usage_error_and_the_file_is_kept(tmp_path: Path) -> None:
    source, scores = _scored(tmp_path)
    for read, args in ((scores, []), (source, ["--records", str(source)])):
        kept = read.read_text(encoding="utf-8")
        result = CliRunner().invoke(main, ["report", str(scores), *args, "--out", str(read)])
        assert result.exit_code == 2, result.output
        assert f"--out {read} is {read}, a file read" in " ".join(result.output.split())
        assert read.read_text(encoding="utf-8") == kept


def test_records_that_are_not_the_scored_file_are_an_error_not_other_records_texts(tmp_path: Path) -> None:
    """--records was joined by line number unchecked: another file's texts showed under these scores."""
    source, scores = _scored(tmp_path)
    page = tmp_path / "r.html"
    swapped = tmp_path / "swapped.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    swapped.write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    said = _report_error(str(scores), "--records", str(swapped), "--out", str(page))
    assert said == (
        f'Error: {scores} line 1 is the row of input line 1, id "ok", but {swapped} line 1 holds id '
        '"mumbai": is it the file these scores were made from? Give it with --records, with the --column '
        "options the scores were made with"
    )
    fewer = tmp_path / "fewer.jsonl"
    fewer.write_text("".join(lines[:-1]), encoding="utf-8")
    said = _report_error(str(scores), "--records", str(fewer), "--out", str(page))
    assert f"{scores} line 6 is the row of input line 6, but {fewer} has no record there (it holds 5" in said
    more = tmp_path / "more.jsonl"
    more.write_text("".join([*lines, lines[0]]), encoding="utf-8")
    said = _report_error(str(scores), "--records", str(more), "--out", str(page))
    assert said.startswith(
        f"Error: {more} holds 7 records (invalid ones included) but {scores} 6 rows: is it"
    )
    assert not page.exists()


def test_records_read_through_column_are_joined_as_score_read_them(tmp_path: Path) -> None:
    """The ids of a file scored with --column id=COLUMN are the column's: report reads --records so too."""
    source = tmp_path / "renamed.jsonl"
    renamed = [{"qid": r["id"], **{k: v for k, v in r.items() if k != "id"}} for r in RECORDS]
    source.write_text("".join(json.dumps(r) + "\n" for r in renamed), encoding="utf-8")
    scores, page = tmp_path / "scores.jsonl", tmp_path / "r.html"
    args = ["--out", str(scores), "--no-progress", "--metrics", "faithfulness", "--column", "id=qid"]
    assert CliRunner().invoke(main, ["score", str(source), *args]).exit_code == 0
    _report(str(scores), "--records", str(source), "--column", "id=qid", "--out", str(page))
    assert "The head office is in Mumbai." in page.read_text(encoding="utf-8")
    said = _report_error(str(scores), "--records", str(source), "--out", str(page))
    assert f'{scores} line 1 is the row of input line 1, id "ok", but {source} line 1 holds no id' in said


def test_a_label_column_of_another_name_is_read_with_column_by_score_and_report_alike(tmp_path: Path) -> None:
    """`--column label=...` was an unknown field: a golden set's labels under another name (`verdict`) gave
    no label to the rows and no confusion matrix."""
    source = tmp_path / "verdicts.jsonl"
    renamed = [{"verdict": r["label"], **{k: v for k, v in r.items() if k != "label"}} for r in RECORDS]
    source.write_text("".join(json.dumps(r) + "\n" for r in renamed), encoding="utf-8")
    scores, page = tmp_path / "scores.jsonl", tmp_path / "r.html"
    args = ["--out", str(scores), "--no-progress", "--metrics", "faithfulness"]
    mapped = CliRunner().invoke(
        main, ["score", str(source), *args, "--column", "label=verdict", "--report", str(page)]
    )
    assert mapped.exit_code == 0, mapped.output
    rows = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [row["label"] for row in rows] == [r["label"] for r in RECORDS]
    cells = dict(re.findall(r'id="(tp|fn|fp|tn)">([^<]*)<', page.read_text(encoding="utf-8")))
    assert cells == {"tp": "3", "fn": "1", "fp": "0", "tn": "1"}
    page.unlink()
    _report(str(scores), "--records", str(source), "--column", "label=verdict", "--out", str(page))
    assert "The head office is in Mumbai." in page.read_text(encoding="utf-8")
    said = _report_error(str(scores), "--records", str(source), "--out", str(page))
    assert (
        f'{scores} line 1 is the row of input line 1, label "faithful", but {source} line 1 holds no label'
    ) in said
    # A label column no row has (a row without it is unlabelled, not invalid) is named: a misspelt name.
    typo = CliRunner().invoke(main, ["score", str(source), *args, "--column", "label=verdcit"])
    assert typo.exit_code == 0
    assert all("label" not in json.loads(line) for line in scores.read_text().splitlines())
    said = "--column label=verdcit: no record has a value in that column, so no row has a label"
    assert said in typo.output


def test_a_report_of_long_answers_judged_offline_says_the_flags_read_the_judge(tmp_path: Path) -> None:
    """The printed summary of a golden set of faithful summaries says its flags read the offline judge's
    level; the HTML page, read by whoever did not see the log, said nothing. Both pages (`score --report`
    and `report` from `--out`) say the summary's note, word for word; a batch of short answers, nothing."""
    summaries = Path(__file__).parents[2] / "docs" / "examples" / "golden_summaries.jsonl"
    scores, scored_page, rebuilt = tmp_path / "o.jsonl", tmp_path / "scored.html", tmp_path / "rebuilt.html"
    result = CliRunner().invoke(
        main,
        ["score", str(summaries), "--out", str(scores), "--report", str(scored_page), "--no-progress",
         "--metrics", "faithfulness"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [note] = [line.removeprefix("  note: ") for line in result.output.splitlines() if "  note: " in line]
    _report(str(scores), "--out", str(rebuilt))
    for page in (scored_page, rebuilt):
        [said] = re.findall(r'<p class="note" id="long-answers"><b>Note:</b> ([^<]*)</p>', page.read_text())
        assert unescape(said) == note, page.name
    _, short = _scored(tmp_path)
    _report(str(short), "--out", str(rebuilt))
    assert 'id="long-answers"' not in rebuilt.read_text()
