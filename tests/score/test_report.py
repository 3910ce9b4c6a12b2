"""The HTML report: unit tests of `render_report`, then the real page in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.score import DEFAULT_METRICS, render_report
from tracescore.score._report import ReportCollector

XSS = "<script>alert(1)</script>"


def _row(line: int, score: float | None, **extra: Any) -> dict[str, Any]:
    return {"id": f"r{line}", "line": line, "faithfulness": score, "reason": None, "results": {}, **extra}


def _claim(sentence: str, verdict: str, reason: str = "why", evidence: str = "") -> dict[str, str]:
    return {
        "claim": sentence,
        "sentence": sentence,
        "verdict": verdict,
        "reason": reason,
        "evidence": evidence,
    }


def _faith(
    score: float | None, claims: list[dict[str, str]] | None = None, reason: str | None = None
) -> dict:
    details = {"claims": claims} if claims is not None else {}
    status = "ok" if score is not None else "not_applicable"
    return {"metric": "faithfulness", "score": score, "status": status, "reason": reason, "details": details}


class _Elements(HTMLParser):
    """Start tags with their attributes, and the text inside each <mark>."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.marks: list[tuple[dict[str, str], str]] = []
        self._mark: dict[str, str] | None = None
        self._text = ""
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.append((tag, found))
        if tag == "mark":
            self._mark, self._text = found, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "mark" and self._mark is not None:
            self.marks.append((self._mark, self._text))
            self._mark = None

    def handle_data(self, data: str) -> None:
        if self._mark is not None:
            self._text += data

    def verdict_marks(self) -> list[tuple[str, str, str]]:
        """(class, text, title) of the marks in answers (not the legend or claim badges)."""
        return [(a["class"], t, a.get("title", "")) for a, t in self.marks if "verdict" in a["class"].split()]

    def count(self, tag: str, cls: str) -> int:
        return sum(1 for t, a in self.tags if t == tag and cls in a.get("class", "").split())


def test_untrusted_text_is_escaped_and_the_page_is_self_contained() -> None:
    row = _row(
        1,
        0.0,
        query="<b>bold</b>?",
        answer=f"{XSS} Paris.",
        contexts=['<img src=x onerror="alert(2)">'],
        results={"faithfulness": _faith(0.0, [_claim(f"{XSS} Paris.", "CONTRADICTORY", '"quoted" <i>')])},
    )
    html = render_report([row], title="<title>x")
    assert XSS not in html and "<img" not in html and "<b>bold" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;title&gt;x" in html
    assert html.lower().count("<script") == 1 and "<script>" in html, "one inline script, no src"
    for external in ("http://", "https://", "//cdn", "@import", "url("):
        assert external not in html
    ((cls, text, title),) = _Elements(html).verdict_marks()
    assert text == f"{XSS} Paris." and "contradictory" in cls and '"quoted" <i>' in title


def test_claims_are_highlighted_in_the_answer_with_their_verdict() -> None:
    answer = "Shakespeare wrote Hamlet. It was written in 1700. He lived in Paris. He had a dog."
    claims = [
        _claim("Shakespeare wrote Hamlet.", "FULLY_SUPPORTED", "stated", "Shakespeare wrote Hamlet"),
        _claim("It was written in 1700.", "PARTIALLY_SUPPORTED"),
        _claim("It was written in 1700.", "CONTRADICTORY", "the context says 1600", "around 1600"),
        _claim("He lived in Paris.", "NO_EVIDENCE", "not mentioned"),
        _claim("A sentence that is not in the answer.", "NO_EVIDENCE", "lost"),
    ]
    row = _row(
        3, 0.2, query="q", answer=answer, contexts=["c"], results={"faithfulness": _faith(0.2, claims)}
    )
    page = _Elements(render_report([row]))
    marks = page.verdict_marks()
    assert [(c.split()[-1], t) for c, t, _ in marks] == [
        ("fully-supported", "Shakespeare wrote Hamlet."),
        ("contradictory", "It was written in 1700."),  # two claims: the worst verdict colours the sentence
        ("no-evidence", "He lived in Paris."),
    ]
    assert "the context says 1600" in marks[1][2] and '"around 1600"' in marks[1][2]
    assert "PARTIALLY_SUPPORTED" in marks[1][2], "every claim of the sentence is in the tooltip"
    html = render_report([row])
    assert "He had a dog." in html, "unclaimed text is kept, unmarked"
    assert "A sentence that is not in the answer." in html, "an unlocated claim is still listed"
    assert page.count("ol", "claims") == 1 and html.count('<mark class="badge ') == 4 + len(claims)


def test_summary_counts_means_and_grouped_reasons() -> None:
    rows = [
        _row(1, 0.1, results={"faithfulness": _faith(0.1)}),
        _row(2, 0.2, results={"faithfulness": _faith(0.2)}),
        _row(3, 0.9, results={"faithfulness": _faith(0.9)}),
        _row(4, None, results={"faithfulness": _faith(None, reason="the answer is empty")}),
        _row(5, None, results={"faithfulness": _faith(None, reason="the answer is empty")}),
        _row(6, None, results={"faithfulness": _faith(None, reason="no retrieved context")}),
        _row(7, None, reason="invalid input: not JSON"),
    ]
    html = render_report(rows, threshold=0.5)
    assert 'id="records">7<' in html and 'id="invalid">1<' in html and 'id="below">2<' in html
    cells = html.split('data-metric="faithfulness"')[1].split("</tr>")[0]
    for expected in ('<td class="n">3</td>', '<td class="n">3</td>', "0.400", "0.200", "66.7%"):
        assert expected in cells
    assert "2 × the answer is empty" in cells and "1 × no retrieved context" in cells
    assert "invalid input: not JSON" in html.split('id="unscored"')[1]


def test_one_histogram_with_ten_bars_per_metric_whatever_its_name() -> None:
    rows = [
        {
            "id": str(i),
            "line": i,
            "faithfulness": i / 10,
            "answer_relevancy": 1.0,
            "reason": None,
            "results": {},
        }
        for i in range(11)
    ]
    page = _Elements(render_report(rows))
    assert page.count("svg", "histogram") == 2
    assert page.count("rect", "bar") == 20
    html = render_report(rows)
    assert 'aria-label="answer_relevancy score histogram"' in html
    assert "<title>0.9–1.0: 2</title>" in html, "0.9 and 1.0 share the last, closed bin"
    assert "<title>0.9–1.0: 11</title>" in html


def test_rows_without_texts_or_details_still_render() -> None:
    rows = [
        {"id": "a", "line": 1, "context_relevance": 0.1, "reason": None},  # no results at all
        _row(2, 0.0, results={"faithfulness": {"score": 0.0, "details": None}}),
        _row(3, 0.0, answer="Text only.", results={"faithfulness": {"details": {"claims": "garbage"}}}),
        _row(4, 0.0, answer="Odd.", results={"faithfulness": _faith(0.0, [{"verdict": None}])}),
    ]
    html = render_report(rows)
    assert "answer text not available" in html and "Text only." in html
    assert "context_relevance" in html and html.count('class="record"') == 4
    assert render_report([]).count("<svg") == 0


def test_collector_keeps_every_score_but_only_the_worst_texts() -> None:
    collector = ReportCollector(threshold=0.5, limit=3)
    for line in range(1, 101):
        score = (line % 50) / 50
        collector(None, _row(line, score, answer=f"answer {line}", contexts=["c" * 10]))
    # Faithful but failing another metric: still among the worst, ahead of records above threshold.
    collector(None, {**_row(101, 0.95, answer="x"), "answer_relevancy": 0.1})
    assert len(collector.scores["faithfulness"]) == 101
    assert [k.line for k in collector.worst()] == [50, 100, 1]
    assert len(collector._worst) == 3

    collector = ReportCollector(threshold=0.5, limit=3)
    for line in range(1, 6):
        collector(None, _row(line, 0.9))
    collector(None, {**_row(6, 0.95), "answer_relevancy": 0.1})
    assert 6 in [k.line for k in collector.worst()]


def test_unscored_list_is_bounded() -> None:
    rows = [_row(i, None, reason="faithfulness: empty") for i in range(1, 80)]
    html = render_report(rows, limit=50)
    section = html.split('id="unscored"')[1]
    assert section.count('class="record"') == 50 and "79 records" in section


# --- the real page in a real browser ---------------------------------------------------------------------

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
GROUNDED = {
    "query": "Where is the Oberoi Group's head office?",
    "contexts": ["The Oberoi Group is a hotel company with its head office in Delhi."],
    "answer": "Delhi",
}


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    binary = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    if not binary:
        pytest.fail(f"chromium not found at {CHROMIUM} nor on PATH: run `make browser` to install it")
    profile = tmp_path / "chromium-profile"
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *args,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def _png_summary(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct bytes in the filtered scanlines). One flat colour gives at most a handful
    of distinct bytes whatever the PNG filters; a rendered page gives hundreds."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, width, height = 8, b"", 0, 0
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind, body = data[position + 4 : position + 8], data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    records = [
        {**GROUNDED, "id": "grounded"},
        {**GROUNDED, "id": "hallucinated", "answer": f"{XSS} The head office is in Mumbai."},
        {**GROUNDED, "id": "empty", "answer": ""},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n{broken\n", encoding="utf-8")
    report = tmp_path / "report.html"
    result = CliRunner().invoke(
        main,
        [
            "score",
            str(source),
            "--out",
            str(tmp_path / "out.jsonl"),
            "--no-progress",
            "--report",
            str(report),
        ],
    )
    assert result.exit_code == 0, result.output
    assert f"report: {report}" in result.output
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    expected_keys = {"id", "line", "reason", "results", *DEFAULT_METRICS}
    assert all(set(r) == expected_keys for r in rows), "the JSONL holds no texts"

    dom = _chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    assert 'id="records">4<' in dom and 'id="invalid">1<' in dom
    assert "Flagged records" in dom and "Score distributions" in dom
    hallucinated = next(r for r in rows if r["id"] == "hallucinated")
    verdicts = {c["verdict"] for c in hallucinated["results"]["faithfulness"]["details"]["claims"]}
    marks = _Elements(dom).verdict_marks()
    assert marks, "claims are highlighted in the rendered answer"
    assert {c.split()[-1] for c, _, _ in marks} >= {v.lower().replace("_", "-") for v in verdicts}
    assert any(XSS in text for _, text, _ in marks), "the script is shown as text, not run"
    assert "the answer is empty" in dom

    png = tmp_path / "report.png"
    _chromium(tmp_path, f"--screenshot={png}", "--window-size=1280,2000", report.as_uri())
    width, height, distinct = _png_summary(png)
    assert (width, height) == (1280, 2000)
    assert png.stat().st_size > 20_000 and distinct > 50, "the screenshot is blank or a single colour"


def test_flags_follow_each_results_label_unless_a_threshold_is_set() -> None:
    def labelled(line: int, score: float, label: str, truth: str) -> dict[str, Any]:
        return _row(line, score, label=truth, results={"faithfulness": {**_faith(score), "label": label}})

    rows = [
        labelled(1, 0.5, "hallucinated", "hallucinated"),  # an invented sentence beside a true one
        labelled(2, 0.4, "faithful", "faithful"),  # a wording gap: faithful by its label
        labelled(3, 1.0, "faithful", "faithful"),
    ]
    html = render_report(rows)
    cells = dict(re.findall(r'id="(below|tp|fn|fp|tn)">([^<]*)<', html))
    assert cells == {"below": "1", "tp": "1", "fn": "0", "fp": "0", "tn": "2"}
    strict = dict(re.findall(r'id="(below|fp)">([^<]*)<', render_report(rows, threshold=0.45)))
    assert strict == {"below": "2", "fp": "1"}, "a threshold the caller sets flags scores below it as well"


def test_labels_read_neither_as_good_nor_bad_are_named_not_a_matrix_silently_missing() -> None:
    """A `label` column of yes/no (HaluEval's `hallucination`) left the page without its section and said
    nothing; the values not read are named, and the matrix is drawn only from labels read."""
    rows = [_row(1, 1.0, label="no"), _row(2, 0.0, label="yes"), _row(3, 0.0, label="Yes")]
    text = " ".join(re.sub(r"<[^>]+>", "", render_report(rows)).split())
    left_out = "3 labelled rows without a score or with an unknown label are left out"
    assert f"{left_out} (labels not read: no, yes, Yes;" in text, text
    assert "Balanced accuracy" not in text and 'id="tp"' not in render_report(rows)
    mixed = render_report([*rows, _row(4, 0.0, label="hallucinated")])
    assert dict(re.findall(r'id="(tp|fn|fp|tn)">([^<]*)<', mixed)) == {
        "tp": "1",
        "fn": "0",
        "fp": "0",
        "tn": "0",
    }
    assert "labels not read:" in mixed
    assert "Against the labels" not in render_report([_row(1, 1.0)]), "no label column, no section"


def _long_answer_rows(judge: str) -> list[dict[str, Any]]:
    # Four faithful answers of 4 claims each, as the scores file carries them.
    details = {"total_claims": 4, "verdict_counts": {"FULLY_SUPPORTED": 2, "PARTIALLY_SUPPORTED": 2}}
    result = {"score": 0.75, "label": "faithful", "judge": judge, "details": details}
    return [{"line": n + 1, "faithfulness": 0.75, "results": {"faithfulness": result}} for n in range(4)]


def test_the_long_answer_note_is_the_offline_judge_s_only() -> None:
    """The page says the flags read the judge's level on long answers judged offline; an LLM judge's scores
    on the same answers are the answers' own level, and rows without details (another tool's) say nothing."""
    assert 'id="long-answers"' in render_report(_long_answer_rows("offline"))
    assert 'id="long-answers"' not in render_report(_long_answer_rows("openai:gpt-4o-mini"))
    bare = {"faithfulness": 0.75, "results": {"faithfulness": {"score": 0.75, "judge": "offline"}}}
    assert 'id="long-answers"' not in render_report([bare] * 4)
