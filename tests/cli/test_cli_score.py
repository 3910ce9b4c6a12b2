"""`tracescore score`: every input line yields one output line; bad lines are reported by number."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracescore.cli import main

GOOD = {
    "id": "a",
    "query": "Where is the Oberoi Group's head office?",
    "contexts": ["The Oberoi Group is a hotel company with its head office in Delhi."],
    "answer": "Delhi",
}


def _run(tmp_path: Path, lines: list[str], *args: str) -> tuple[list[dict], str, int]:
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        main, ["score", str(source), "--judge", "offline", "--out", str(out), "--no-progress", *args]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return rows, result.output, result.exit_code


def test_scores_each_record_in_input_order(tmp_path: Path) -> None:
    hallucinated = {**GOOD, "id": "b", "answer": "Mumbai"}
    rows, _, code = _run(tmp_path, [json.dumps(GOOD), json.dumps(hallucinated)])
    assert code == 0
    assert [r["id"] for r in rows] == ["a", "b"]
    assert rows[0]["faithfulness"] >= 0.5 > rows[1]["faithfulness"]
    assert rows[0]["reason"] is None
    claims = rows[1]["results"]["faithfulness"]["details"]["claims"]
    assert claims and claims[0]["verdict"] in ("NO_EVIDENCE", "CONTRADICTORY")


def test_malformed_lines_are_reported_by_number_and_the_batch_goes_on(tmp_path: Path) -> None:
    lines = [json.dumps(GOOD), "{not json", json.dumps({"id": "c", "contexts": []}), json.dumps(GOOD)]
    rows, output, code = _run(tmp_path, lines)
    assert code == 0
    assert len(rows) == 4, "one output line per input line, bad ones included"
    assert rows[1]["line"] == 2 and rows[1]["faithfulness"] is None and "not JSON" in rows[1]["reason"]
    assert rows[2]["line"] == 3 and "query" in rows[2]["reason"] and "answer" in rows[2]["reason"]
    assert rows[3]["faithfulness"] is not None
    assert "line 2" in output and "line 3" in output
    assert "4 records (2 invalid)" in output


def test_unscorable_records_get_null_and_a_reason(tmp_path: Path) -> None:
    lines = [
        json.dumps({**GOOD, "id": "empty", "answer": ""}),
        json.dumps({**GOOD, "id": "nocontext", "contexts": []}),
        json.dumps({**GOOD, "id": "refusal", "answer": "I don't know."}),
    ]
    rows, _, code = _run(tmp_path, lines)
    assert code == 0
    for row in rows:
        assert row["faithfulness"] is None and row["reason"], row
        assert row["results"]["faithfulness"]["status"] == "not_applicable"


def test_csv_input(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text(
        'id,query,contexts,answer\nx,"Where is it?","[""It is in Delhi.""]",Delhi\n', encoding="utf-8"
    )
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["score", str(source), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["id"] == "x" and row["faithfulness"] is not None


def test_unknown_metric_is_a_usage_error(tmp_path: Path) -> None:
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--metrics", "faithfulness,nonsense")
    assert code == 2 and "unknown metric" in output and "nonsense" in output


def test_openai_judge_with_all_three_metrics_costs_three_calls_per_record(
    tmp_path: Path, monkeypatch
) -> None:
    from tracescore.testing.judge_server import JudgeServer

    monkeypatch.setenv("TRACESCORE_JUDGE_API_KEY", "test-key")
    with JudgeServer() as server:
        rows, output, code = _run(
            tmp_path,
            [json.dumps(GOOD), json.dumps({**GOOD, "id": "b"})],
            "--judge", "openai", "--model", "judge-test", "--base-url", server.base_url,
            "--metrics", "faithfulness,answer_relevancy,context_relevance,quality",
        )  # fmt: skip
        chat_requests = server.stats.chat_requests
    assert code == 0, output
    assert [r["id"] for r in rows] == ["a", "b"]
    for row in rows:
        for metric in ("faithfulness", "answer_relevancy", "context_relevance", "quality"):
            assert row[metric] is not None, (metric, row["reason"])
            assert row["results"][metric]["judge"] == "openai:judge-test"
        assert sum(r["usage"]["calls"] for r in row["results"].values()) == 3
    assert chat_requests == 6


def test_a_failing_judge_gives_error_results_with_the_cause_and_the_batch_goes_on(
    tmp_path: Path, monkeypatch
) -> None:
    from tracescore.testing.judge_server import Fault, JudgeServer

    monkeypatch.setenv("TRACESCORE_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("TRACESCORE_JUDGE_MAX_RETRIES", "1")
    monkeypatch.setenv("TRACESCORE_JUDGE_RETRY_BASE_S", "0.001")
    with JudgeServer() as server:
        # Both attempts of the first record's first call fail; everything after is answered.
        server.inject(Fault.SERVER_ERROR, Fault.SERVER_ERROR)
        rows, output, code = _run(
            tmp_path,
            [json.dumps({**GOOD, "id": "first"}), json.dumps({**GOOD, "id": "second"})],
            "--judge", "openai", "--base-url", server.base_url, "--concurrency", "1",
            "--metrics", "faithfulness",
        )  # fmt: skip
    assert code == 0, output
    first, second = rows
    assert first["faithfulness"] is None
    assert first["results"]["faithfulness"]["status"] == "error"
    assert "500" in first["reason"] and "2 attempts" in first["reason"]
    assert second["faithfulness"] is not None
    assert "1 unscored" in output
