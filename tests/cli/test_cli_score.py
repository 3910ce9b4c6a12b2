"""`tracescore score`: every input line yields one output line; bad lines are reported by number."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _zygote import ZygoteProcess, popen, run
from click.testing import CliRunner
from service_processes import checkout_env

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


def test_a_csv_row_with_more_fields_than_a_one_column_header_says_field_not_fields(tmp_path: Path) -> None:
    source = tmp_path / "in.csv"
    source.write_text("answer\nDelhi,Mumbai\n", encoding="utf-8")
    result = CliRunner().invoke(
        main, ["score", str(source), "--out", str(tmp_path / "o.jsonl"), "--no-progress"]
    )
    assert "in.csv line 2: expected 1 field, got 2" in result.output
    assert "1 record (1 invalid)" in result.output


@pytest.mark.parametrize("text", ["", "\n\n", "id,query,contexts,answer\n"], ids=["empty", "blank", "header"])
def test_a_file_without_a_record_says_so_not_see_the_reasons_above(tmp_path: Path, text: str) -> None:
    source = tmp_path / "in.csv"
    source.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(
        main, ["score", str(source), "--out", str(tmp_path / "o.jsonl"), "--no-progress"]
    )
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == (
        f"Error: nothing could be scored in {source}: it holds no record (an empty file, blank lines or a "
        "header alone)"
    )


def test_unknown_metric_is_a_usage_error(tmp_path: Path) -> None:
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--metrics", "faithfulness,nonsense")
    assert code == 2 and "unknown metric" in output and "nonsense" in output
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--metrics", "faithfulnes")
    assert code == 2 and "faithfulnes (did you mean 'faithfulness'?)" in output, output


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


# --- the CI gate -------------------------------------------------------------------------------------------

HALLUCINATED = {**GOOD, "id": "h", "answer": "The head office is in Mumbai."}


def test_fail_under_exits_1_naming_the_metric_and_passes_when_met(tmp_path: Path) -> None:
    lines = [json.dumps(GOOD), json.dumps(HALLUCINATED)]
    _, output, code = _run(tmp_path, lines, "--fail-under", "faithfulness=0.8")
    assert code == 1 and "FAIL faithfulness: mean 0.500 is below 0.8" in output
    _, output, code = _run(
        tmp_path, lines, "--fail-under", "faithfulness=0.5", "--fail-under", "context_relevance=0.5"
    )
    assert code == 0, output
    assert "FAIL" not in output, output


def test_the_closing_summary_gives_means_share_below_and_judge_spend(tmp_path: Path) -> None:
    _, output, code = _run(tmp_path, [json.dumps(GOOD), json.dumps(HALLUCINATED)])
    assert code == 0
    assert "faithfulness: 2 scored, 0 unscored; mean 0.500, 50% below 0.5, 1 flagged" in output
    assert "answer_relevancy:" in output and "context_relevance:" in output, "three metrics by default"
    assert "judge calls 0, tokens 0 prompt + 0 completion" in output


def test_tokens_and_cost_are_totalled_for_an_llm_judge(tmp_path: Path, monkeypatch) -> None:
    from tracescore.testing.judge_server import JudgeServer

    monkeypatch.setenv("TRACESCORE_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("TRACESCORE_JUDGE_PROMPT_PRICE_PER_1M", "1000")
    with JudgeServer() as server:
        _, output, code = _run(
            tmp_path, [json.dumps(GOOD)], "--judge", "openai", "--base-url", server.base_url
        )
        prompt_tokens = server.stats.prompt_tokens
    assert code == 0, output
    assert f"judge calls 3, tokens {prompt_tokens} prompt" in output
    assert f"cost ${prompt_tokens * 1000 / 1e6:.4f}" in output


def test_the_command_logs_no_line_per_judge_call(tmp_path: Path) -> None:
    """As a program: in-process, pytest's log capture keeps the command's logging set-up from showing them.
    The judge's HTTP client logs every request at INFO, which scrolled the summary away."""
    from tracescore.testing.judge_server import JudgeServer

    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    with JudgeServer() as server:
        done = run(
            [sys.executable, "-m", "tracescore.cli", "score", str(source), "--out", str(tmp_path / "o.jsonl"),
             "--no-progress", "--judge", "openai", "--base-url", server.base_url],
            timeout=120, env=checkout_env({**clean, "TRACESCORE_JUDGE_API_KEY": "test-key"}),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "judge calls 3" in done.stderr and "HTTP Request" not in done.stderr, done.stderr


def test_nothing_scored_exits_1(tmp_path: Path) -> None:
    _, output, code = _run(tmp_path, ["{broken", json.dumps({"id": "x"})])
    assert code == 1 and "Error: nothing could be scored" in output, "said as click says its errors"


def test_a_judge_that_scores_nothing_is_said_with_the_first_reason(tmp_path: Path, monkeypatch) -> None:
    """Its failures are in the output rows only: the last line pointed to "the reasons above", where the
    summary alone stood."""
    from tracescore.testing.judge_server import Fault, JudgeServer

    monkeypatch.setenv("TRACESCORE_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("TRACESCORE_JUDGE_MAX_RETRIES", "0")
    with JudgeServer() as server:
        server.inject(Fault.SERVER_ERROR)
        address = server.base_url.rstrip("/")
        _, output, code = _run(
            tmp_path, [json.dumps(GOOD)], "--judge", "openai", "--base-url", server.base_url,
            "--metrics", "faithfulness",
        )  # fmt: skip
    assert code == 1, output
    [last] = [line for line in output.splitlines() if line.startswith("Error:")]
    assert last.startswith(f"Error: nothing could be scored in {tmp_path / 'in.jsonl'}; the first reason: ")
    assert "faithfulness: " in last and "500" in last and "reasons above" not in last, last
    assert last.endswith(f" at {address})"), last  # where the failing calls went


def test_fail_under_on_a_metric_not_scored_or_malformed_is_a_usage_error(tmp_path: Path) -> None:
    args = ("--metrics", "faithfulness", "--fail-under")
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], *args, "quality=0.5")
    # A metric --metrics leaves out, not an "unknown metric 'quality'".
    not_scored = "--fail-under: 'quality' is not among the metrics scored (faithfulness): add it to --metrics"
    assert code == 2 and not_scored in output, output
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], *args, "faithfulnes=0.8")
    assert code == 2 and "'faithfulnes' (did you mean 'faithfulness'? valid: faithfulness)" in output, output
    assert "it gates the metrics --metrics scores" in output
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--fail-under", "faithfulness")
    assert code == 2 and "METRIC=MIN" in output


def test_an_llm_only_metric_with_the_offline_judge_is_refused_up_front(tmp_path: Path) -> None:
    config = tmp_path / "metrics.toml"
    config.write_text('[[metric]]\nname = "politeness"\ntemplate = "Rate how polite the answer is."\n')
    rows, output, code = _run(
        tmp_path, [json.dumps(GOOD)], "--metrics", "faithfulness,politeness", "--metric-config", str(config)
    )
    assert code == 2 and "politeness need an LLM judge" in output and "--judge openai" in output
    assert rows == [] and "Traceback" not in output


# --- input that must keep one output line per input line ---------------------------------------------------


def _score_bytes(tmp_path: Path, name: str, data: bytes, *args: str) -> tuple[list[dict], str, int]:
    source = tmp_path / name
    source.write_bytes(data)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        main, ["score", str(source), "--out", str(out), "--no-progress", "--metrics", "faithfulness", *args]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return rows, result.output, result.exit_code


def test_a_non_utf8_line_is_reported_and_the_rest_is_scored(tmp_path: Path) -> None:
    data = (json.dumps(GOOD) + "\n").encode() + b'{"id": "latin", "answer": "caf\xe9"}\n'
    data += (json.dumps(GOOD) + "\n").encode()
    rows, output, code = _score_bytes(tmp_path, "in.jsonl", data)
    assert code == 0, output
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert "not valid UTF-8" in rows[1]["reason"] and rows[2]["faithfulness"] == 1.0
    assert "line 2" in output and "Traceback" not in output


def test_a_byte_order_mark_does_not_spoil_the_first_line(tmp_path: Path) -> None:
    rows, _, code = _score_bytes(tmp_path, "in.jsonl", b"\xef\xbb\xbf" + (json.dumps(GOOD) + "\n").encode())
    assert code == 0 and rows[0]["faithfulness"] == 1.0
    csv_data = "\ufeffid,query,contexts,answer\nx,Where is it?,It is in Delhi.,Delhi\n".encode()
    rows, _, code = _score_bytes(tmp_path, "in.csv", csv_data)
    assert code == 0 and rows[0]["id"] == "x" and rows[0]["faithfulness"] is not None


def test_an_unbalanced_quote_in_a_csv_swallows_no_record_silently(tmp_path: Path) -> None:
    good = 'ok{n},"Where is it?","[""It is in Delhi.""]",Delhi'
    lines = ["id,query,contexts,answer", good.format(n=1), 'bad,"Where is it?,It is in Delhi.,Delhi']
    lines += [good.format(n=n) for n in range(2, 6)]
    rows, output, code = _score_bytes(tmp_path, "in.csv", ("\n".join(lines) + "\n").encode())
    assert code == 0, output
    assert len(rows) == 6, "6 records in, 6 lines out"
    assert rows[0]["faithfulness"] is not None
    broken = [r for r in rows if r["reason"] and "unbalanced quote" in r["reason"]]
    assert broken and all(r["faithfulness"] is None for r in broken)
    assert [r["line"] for r in broken] == [3, 4], "the swallowed line is reported, not lost"
    assert [r["id"] for r in rows if r["faithfulness"] is not None] == ["ok1", "ok3", "ok4", "ok5"]


def test_a_pandas_csv_with_a_list_column_and_ragas_names(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "user_input": [GOOD["query"]],
            "retrieved_contexts": [["Unrelated first passage.", GOOD["contexts"][0]]],
            "response": ["Delhi"],
        }
    )
    frame.to_csv(tmp_path / "in.csv", index=False)
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(main, ["score", str(tmp_path / "in.csv"), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["faithfulness"] == 1.0
    assert row["results"]["context_relevance"]["details"]["total_chunks"] == 2, "the list is two passages"


def test_documents_given_as_objects_are_invalid_lines_naming_their_keys_not_judged_as_their_repr(
    tmp_path: Path,
) -> None:
    """A `{"text", "source"}` document was judged as its Python repr, its metadata quoted as evidence."""
    document = {"text": GOOD["contexts"][0], "source": "wiki"}
    rows, output, code = _run(tmp_path, [json.dumps(GOOD), json.dumps({**GOOD, "contexts": [document]})])
    assert code == 0, output
    assert rows[0]["faithfulness"] == 1.0
    assert rows[1]["faithfulness"] is None
    reason = "contexts[0]: expected a string, got a mapping (keys text, source): give each document's text"
    assert rows[1]["reason"] == f"invalid input: {reason}" and f"line 2: {reason}" in output
    assert "2 records (1 invalid)" in output


def test_a_json_array_is_refused_saying_how_to_make_json_lines_of_it(tmp_path: Path) -> None:
    """`df.to_json(orient="records")`, or a file written with json.dump(indent=1): each of its lines was an
    invalid record of its own ("not JSON", "expected a record ..."), and none said what the file was."""
    for data in (json.dumps([GOOD, GOOD]).encode(), json.dumps([GOOD], indent=1).encode()):
        rows, output, code = _score_bytes(tmp_path, "golden.json", data)
        assert code == 1 and not rows
        assert output.endswith(
            "golden.json holds a JSON array: tracescore score reads JSON Lines, one record a line; "
            "convert it with jq -c '.[]' "
            + str(tmp_path / "golden.json")
            + " > golden.jsonl, or in pandas with "
            "to_json(..., orient='records', lines=True)\n"
        ), output


def test_a_gzip_compressed_file_is_refused_saying_to_decompress_it(tmp_path: Path) -> None:
    """Each of its lines was "not valid UTF-8"."""
    rows, output, code = _score_bytes(tmp_path, "golden.jsonl.gz", gzip.compress(json.dumps(GOOD).encode()))
    assert code == 1 and not rows
    assert "golden.jsonl.gz is gzip-compressed: decompress it first (gunzip -k " in output, output


@pytest.mark.parametrize("flag", ["--out", "--report"])
def test_writing_over_the_input_is_a_usage_error_and_the_input_is_kept(tmp_path: Path, flag: str) -> None:
    """`--out golden.jsonl` emptied the golden set before reading it, then said it held no record."""
    source = tmp_path / "golden.jsonl"
    source.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    args = ["--out", str(tmp_path / "s.jsonl"), "--report"] if flag == "--report" else ["--out"]
    result = CliRunner().invoke(main, ["score", str(source), *args, str(tmp_path / "." / "golden.jsonl")])
    assert result.exit_code == 2, result.output
    assert f"{flag} {source} is {source}, a file read: writing it would erase it before it is read" in (
        " ".join(result.output.split())
    )
    assert source.read_text(encoding="utf-8") == json.dumps(GOOD) + "\n"


def test_a_tsv_file_is_read_as_tsv(tmp_path: Path) -> None:
    data = b"id\tquery\tcontexts\tanswer\nt1\tWhere is it?\tIt is in Delhi.\tDelhi\n"
    rows, output, code = _score_bytes(tmp_path, "in.tsv", data)
    assert code == 0, output
    assert rows[0]["id"] == "t1" and rows[0]["faithfulness"] is not None


# --- `-`: standard input, a pipe from another tool --------------------------------------------------------

# The same records as a JSONL, CSV and TSV file: the second one's answer invented (NO_EVIDENCE).
_AS_FILES = {
    "in.jsonl": "".join(json.dumps(r) + "\n" for r in (GOOD, {**GOOD, "id": "b", "answer": "Mumbai"})),
    "in.csv": f'id,query,contexts,answer\na,{GOOD["query"]},"{GOOD["contexts"][0]}",Delhi\nb,'
    f'{GOOD["query"]},"{GOOD["contexts"][0]}",Mumbai\n',
    "in.tsv": f"id\tquery\tcontexts\tanswer\na\t{GOOD['query']}\t{GOOD['contexts'][0]}\tDelhi\nb\t"
    f"{GOOD['query']}\t{GOOD['contexts'][0]}\tMumbai\n",
}


@pytest.mark.parametrize(
    ("name", "read_as"), [("in.jsonl", "JSON Lines"), ("in.csv", "CSV"), ("in.tsv", "TSV")]
)
def test_stdin_is_read_as_the_file_would_be_its_format_told_by_its_first_line(
    tmp_path: Path, name: str, read_as: str
) -> None:
    """`tracescore score -` (a pipe from another tool) was "File '-' does not exist"."""
    source = tmp_path / name
    source.write_text(_AS_FILES[name], encoding="utf-8")
    args = ["--metrics", "faithfulness", "--no-progress", "--out"]
    from_file = CliRunner().invoke(main, ["score", str(source), *args, str(tmp_path / "file.jsonl")])
    piped = CliRunner().invoke(
        main, ["score", "-", *args, str(tmp_path / "pipe.jsonl")], input=source.read_bytes()
    )
    assert piped.exit_code == from_file.exit_code == 0, piped.output
    assert (tmp_path / "pipe.jsonl").read_text() == (tmp_path / "file.jsonl").read_text()
    assert [json.loads(line)["faithfulness"] for line in (tmp_path / "pipe.jsonl").open()] == [1.0, 0.0]
    said = piped.output.splitlines()[0]
    assert said.startswith(f"reading stdin as {read_as} ("), said
    assert piped.output.splitlines()[1:] == from_file.output.splitlines()


def test_stdin_s_bad_lines_and_refusals_are_the_file_s_named_stdin(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    args = ["score", "-", "--no-progress", "--out", str(out)]
    bad = CliRunner().invoke(main, args, input=json.dumps(GOOD) + "\n{not json\n")
    assert bad.exit_code == 0 and "stdin line 2: not JSON: Expecting property name" in bad.output, bad.output
    assert "2 records (1 invalid)" in bad.output
    out.unlink()
    array = CliRunner().invoke(main, args, input=json.dumps([GOOD]))
    assert array.exit_code == 1 and array.output.endswith(
        "Error: stdin holds a JSON array: tracescore score reads JSON Lines, one record a line; convert it "
        "in the pipe (... | jq -c '.[]' | tracescore score -), or in pandas with to_json(..., "
        "orient='records', lines=True)\n"
    ), array.output
    packed = CliRunner().invoke(main, args, input=gzip.compress(json.dumps(GOOD).encode()))
    assert packed.exit_code == 1 and packed.output.endswith(
        "Error: stdin is gzip-compressed: decompress it first in the pipe (... | gunzip | tracescore "
        "score -)\n"
    ), packed.output
    assert not out.exists(), "a refused input leaves no empty scores file"
    empty = CliRunner().invoke(main, args, input=b"")
    assert empty.exit_code == 1 and empty.output.splitlines() == [
        "0 records (0 invalid)",
        "  judge calls 0, tokens 0 prompt + 0 completion",
        f"Error: nothing could be scored in stdin{_HOLDS_NO_RECORD}",
    ], empty.output


_HOLDS_NO_RECORD = ": it holds no record (an empty file, blank lines or a header alone)"


def test_a_real_pipe_into_score_dash_is_scored_past_the_bytes_read_to_tell_its_format(tmp_path: Path) -> None:
    """Past the first 4096 bytes (the ones read to tell the format) and a line they cut in two."""
    records = [{**GOOD, "id": f"r{n}", "query": f"{GOOD['query']} ({n})"} for n in range(120)]
    data = "".join(json.dumps(r) + "\n" for r in records).encode()
    assert len(data) > 4 * 4096
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    out = tmp_path / "out.jsonl"
    process = popen(
        [sys.executable, "-m", "tracescore.cli", "score", "-", "--out", str(out),
         "--metrics", "faithfulness"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=checkout_env(clean),
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(data)
    process.stdin.close()
    _, err = process.communicate(120)
    assert process.wait() == 0, err
    assert [json.loads(line)["id"] for line in out.open()] == [r["id"] for r in records]
    assert b"120 records (0 invalid)" in err


def test_out_into_a_missing_directory_is_created(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    out = tmp_path / "new" / "dir" / "out.jsonl"
    result = CliRunner().invoke(main, ["score", str(source), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["faithfulness"] == 1.0
    blocked = tmp_path / "file"
    blocked.write_text("")
    result = CliRunner().invoke(main, ["score", str(source), "--out", str(blocked / "out.jsonl")])
    assert result.exit_code == 1 and "cannot write" in result.output and "Traceback" not in result.output


# One true sentence and one invented: 0.5, labelled hallucinated under the default label rule.
HALF = {**GOOD, "id": "half", "answer": "The head office is in Delhi. It opened in 1950."}


def test_max_flagged_counts_answers_labelled_hallucinated_even_at_half_score(tmp_path: Path) -> None:
    lines = [json.dumps(GOOD), json.dumps(HALF)]
    rows, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", "--max-flagged", "0")
    half = rows[1]["results"]["faithfulness"]
    assert half["score"] == 0.5 and half["label"] == "hallucinated"
    assert code == 1 and "FAIL faithfulness: 1 record flagged (50.0% of scored), more than 0" in output
    assert "faithfulness: 2 scored, 0 unscored; mean 0.750, 0% below 0.5, 1 flagged" in output
    # A restatement of the question is weak evidence (confidence 0.3): 0.5 and faithful by the label...
    weak = {**GOOD, "answer": "The head office is in Delhi. The Oberoi Group has a head office."}
    rows, output, code = _run(tmp_path, [json.dumps(weak)], "--metrics", "faithfulness", "--max-flagged", "0")
    assert rows[0]["results"]["faithfulness"]["label"] == "faithful" and code == 0, output
    # ... and flagged when the caller sets a threshold above its score.
    _, output, code = _run(
        tmp_path, [json.dumps(weak)], "--metrics", "faithfulness", "--max-flagged", "0", "--threshold", "0.6"
    )
    assert code == 1 and "1 record flagged" in output
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", "--max-flagged", "1")
    assert code == 0 and "FAIL" not in output
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", "--max-flagged", "0.25")
    assert code == 1 and "more than 25% of scored" in output
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", "--max-flagged", "0.5")
    assert code == 0, output


def test_max_flagged_takes_a_share_written_as_a_percentage(tmp_path: Path) -> None:
    """`--max-flagged 5%` was "expected a count (e.g. 3) or a share below 1"."""
    lines = [
        json.dumps(GOOD),
        json.dumps(HALF),
        json.dumps({**GOOD, "id": "c"}),
        json.dumps({**GOOD, "id": "d"}),
    ]
    gate = ["--metrics", "faithfulness", "--max-flagged"]
    _, output, code = _run(tmp_path, lines, *gate, "20%")
    assert code == 1 and output.splitlines()[-1] == (
        "FAIL faithfulness: 1 record flagged (25.0% of scored), more than 20% of scored"
    ), output
    _, output, code = _run(tmp_path, lines, *gate, "25%")
    assert code == 0, output
    _, output, code = _run(tmp_path, lines, *gate, "0.5%")
    assert code == 1 and output.splitlines()[-1].endswith("more than 0.5% of scored"), output
    for bad, said in (
        ("120%", "--max-flagged '120%': a percentage must be below 100% (e.g. 5%); at 100% every scored "
         "record may be flagged and pass: leave the option out"),
        ("100%", "--max-flagged '100%': a percentage must be below 100%"),
        ("-1", "--max-flagged '-1': expected a count (e.g. 3), a share below 1 (e.g. 0.05) or a percentage "
         "below 100% (e.g. 5%)"),
        ("-5%", "--max-flagged '-5%': expected a count"),
    ):  # fmt: skip
        _, output, code = _run(tmp_path, lines, *gate, bad)
        assert code == 2 and said in " ".join(output.split()), (bad, output)


def test_max_flagged_malformed_or_without_faithfulness_is_a_usage_error(tmp_path: Path) -> None:
    for bad in ("-1", "1.5", "lots"):
        _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--max-flagged", bad)
        assert code == 2 and "--max-flagged" in output, bad
    _, output, code = _run(
        tmp_path, [json.dumps(GOOD)], "--metrics", "context_relevance", "--max-flagged", "0"
    )
    assert code == 2 and "add it to --metrics" in output


def test_an_id_on_two_records_fails_a_gate_naming_the_lines_and_without_a_gate_both_are_scored(
    tmp_path: Path,
) -> None:
    """Two records with one id were both scored and counted, without a word: a golden case pasted twice
    weighed twice in the gate, and a comparison of two runs by id paired each copy with each."""
    lines = [json.dumps(GOOD), json.dumps(HALF), json.dumps({**HALF, "id": GOOD["id"]})]
    rows, output, code = _run(tmp_path, lines, "--metrics", "faithfulness")
    assert code == 0 and [r["line"] for r in rows] == [1, 2, 3], "every record scored, no gate: no failure"
    said = "id 'a' on 2 records (line 1, line 3)"
    assert f"  1 id on more than one record, each record scored: {said}" in output.splitlines()
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", "--max-flagged", "2")
    assert code == 1
    assert output.splitlines()[-1] == (
        f"FAIL {said}: a gate counts each record by its id (a copy weighs twice, and runs are compared by "
        "id): give each record its own id"
    )
    lines[2] = json.dumps({**HALF, "id": "c"})
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", "--max-flagged", "2")
    assert code == 0 and "more than one record" not in output, output


# --- the CI gate and the records it could not judge ----------------------------------------------------


def _rate_limited_run(tmp_path: Path, monkeypatch, *args: str, faults: int) -> tuple[list[dict], str, int]:
    """Three records through the local judge; the first `faults` judge calls answered 429, no retries."""
    from tracescore.testing.judge_server import Fault, JudgeServer

    monkeypatch.setenv("TRACESCORE_JUDGE_API_KEY", "test-key")
    monkeypatch.setenv("TRACESCORE_JUDGE_MAX_RETRIES", "0")
    lines = [json.dumps({**GOOD, "id": name}) for name in ("first", "second", "third")]
    with JudgeServer() as server:
        server.inject(Fault.RATE_LIMIT, times=faults)
        return _run(
            tmp_path, lines, "--judge", "openai", "--base-url", server.base_url, "--concurrency", "1",
            "--metrics", "faithfulness", *args,
        )  # fmt: skip


def test_a_gate_fails_on_records_the_judge_left_unscored_naming_how_many_and_the_first_reason(
    tmp_path: Path, monkeypatch
) -> None:
    """A judge rate-limited on part of a batch: the gate judged only the rest, and passed on them."""
    gate = ("--fail-under", "faithfulness=0.5")
    rows, output, code = _rate_limited_run(tmp_path, monkeypatch, *gate, faults=1)
    assert rows[0]["results"]["faithfulness"]["status"] == "error" and rows[1]["faithfulness"] == 1.0
    assert code == 1, output
    last = output.splitlines()[-1]
    assert last.startswith("FAIL 1 of 3 records not scored (1 judge error), more than --allow-unscored 0")
    assert "the first: line 1: faithfulness: " in last and "429" in last, last
    # Every record scored: the same gate passes.
    _, output, code = _rate_limited_run(tmp_path, monkeypatch, *gate, faults=0)
    assert code == 0 and "FAIL" not in output, output


def test_allow_unscored_lets_that_many_records_through_a_gate(tmp_path: Path, monkeypatch) -> None:
    _, output, code = _rate_limited_run(
        tmp_path, monkeypatch, "--max-flagged", "0", "--allow-unscored", "2", faults=2
    )
    assert code == 0 and "FAIL" not in output and "2 unscored" in output, output
    _, output, code = _rate_limited_run(
        tmp_path, monkeypatch, "--max-flagged", "0", "--allow-unscored", "1", faults=2
    )
    assert code == 1 and output.splitlines()[-1].startswith("FAIL 2 of 3 records not scored"), output
    assert "more than --allow-unscored 1" in output, output


def test_invalid_rows_count_against_a_gate_and_not_without_one(tmp_path: Path) -> None:
    """A golden set with broken rows failed no gate: the rest passed it. A refusal is not one of them: it is
    not applicable to faithfulness on purpose (its row says why), the judge did not fail."""
    refusal = json.dumps({**GOOD, "id": "refusal", "answer": "I don't know."})
    lines = [json.dumps(GOOD), "{not json", json.dumps({"id": "c", "question": "Where?"}), refusal]
    _, output, code = _run(tmp_path, lines, "--fail-under", "faithfulness=0.5", "--max-flagged", "0")
    assert code == 1, output
    last = output.splitlines()[-1]
    assert last.startswith("FAIL 2 of 4 records not scored (2 invalid), more than --allow-unscored 0"), last
    assert "the first: line 2: not JSON" in last, last
    _, output, code = _run(tmp_path, lines, "--fail-under", "faithfulness=0.5", "--allow-unscored", "2")
    assert code == 0 and "FAIL" not in output and "1 unscored" in output, output
    _, output, code = _run(tmp_path, lines)
    assert code == 0 and "4 records (2 invalid)" in output, "without a gate, invalid rows are reported only"


def test_allow_unscored_without_a_gate_or_below_zero_is_a_usage_error(tmp_path: Path) -> None:
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--allow-unscored", "1")
    assert code == 2 and "--allow-unscored loosens a gate" in output, output
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--max-flagged", "0", "--allow-unscored", "-1")
    assert code == 2 and "--allow-unscored" in output, output


@pytest.mark.parametrize("command", ["score", "consume", "conversations"])
def test_a_missing_api_key_names_the_flag_and_the_variables_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """What the user typed and what to set, not the class (`OpenAIJudge needs an API key`)."""
    for name in _JUDGE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    args = [str(source)] if command == "score" else ["--bootstrap-servers", "127.0.0.1:9"]
    result = CliRunner().invoke(main, [command, *args, "--judge", "openai"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "--judge openai needs an API key: set TRACESCORE_JUDGE_API_KEY or OPENAI_API_KEY" in said, said
    assert "--base-url (TRACESCORE_JUDGE_BASE_URL or OPENAI_BASE_URL) instead" in said, said
    assert "OpenAIJudge" not in said, said


_JUDGE_VARIABLES = (
    "OPENAI_API_KEY",
    "TRACESCORE_JUDGE_API_KEY",
    "TRACESCORE_JUDGE_BASE_URL",
    "OPENAI_BASE_URL",
)


def test_a_local_server_at_openai_base_url_needs_no_key_and_the_flag_and_ours_come_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_BASE_URL to a local server without a key was refused ("needs an API key") where --base-url to
    the same server was not: it is a base URL too, after the flag and TRACESCORE_JUDGE_BASE_URL. The real
    openai client sends to the server the precedence names, and nowhere else."""
    from tracescore.testing.judge_server import JudgeServer

    for name in _JUDGE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with JudgeServer() as flag, JudgeServer() as ours, JudgeServer() as openais:
        servers = {"flag": flag, "ours": ours, "openai's": openais}
        for expected in reversed(servers):
            # Each run adds the next source: OPENAI_BASE_URL alone, then ours, then the flag too.
            monkeypatch.setenv("OPENAI_BASE_URL", openais.base_url)
            if expected != "openai's":
                monkeypatch.setenv("TRACESCORE_JUDGE_BASE_URL", ours.base_url)
            extra = ("--base-url", flag.base_url) if expected == "flag" else ()
            before = {name: server.stats.chat_requests for name, server in servers.items()}
            rows, output, code = _run(
                tmp_path, [json.dumps(GOOD)], "--judge", "openai", "--model", "judge-test", *extra
            )
            assert code == 0, output
            assert rows[0]["results"]["faithfulness"]["judge"] == "openai:judge-test", rows[0]["reason"]
            sent = [name for name, server in servers.items() if server.stats.chat_requests > before[name]]
            assert sent == [expected], (expected, sent)


@pytest.mark.parametrize("command", ["consume", "conversations"])
def test_a_service_takes_openai_base_url_without_a_key(monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """The report's command: with OPENAI_BASE_URL alone it goes on to reach Kafka (none here)."""
    for name in _JUDGE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    args = ["--bootstrap-servers", "127.0.0.1:9", "--connect-timeout", "1", "--judge", "openai"]
    result = CliRunner().invoke(main, [command, *args])
    assert "API key" not in result.output, result.output
    assert result.exit_code == 1, result.output
    assert "no Kafka broker reachable at 127.0.0.1:9" in result.output, result.output


def test_a_column_option_reads_a_renamed_column_and_the_message_says_how_to_give_it(tmp_path: Path) -> None:
    """An invalid record's message ended 'map them with column_map={...}', a Python-only option, on the
    command line too, which had no way to map a column: --column FIELD=COLUMN does what column_map does."""
    renamed = {
        "id": "a",
        "question": "Where is the head office?",
        "contexts": GOOD["contexts"],
        "reply": "Delhi",
    }
    rows, output, code = _run(tmp_path, [json.dumps(renamed)])
    assert code == 1 and rows[0]["faithfulness"] is None
    assert "no answer" in rows[0]["reason"] and "map them with --column answer=<column>" in rows[0]["reason"]
    assert "column_map" not in output

    rows, output, code = _run(tmp_path, [json.dumps(renamed)], "--column", "answer=reply")
    assert code == 0, output
    assert rows[0]["reason"] is None and rows[0]["faithfulness"] >= 0.5

    rows, _, code = _run(tmp_path, [json.dumps(renamed)], "--column", "answer=replie")
    assert code == 1 and "--column names no such column: 'replie' for answer" in rows[0]["reason"]


def test_a_column_option_naming_no_field_is_a_usage_error_with_the_field_meant(tmp_path: Path) -> None:
    _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--column", "anwser=reply")
    assert code == 2
    said = " ".join(output.split())
    assert "unknown field 'anwser' (did you mean 'answer'? valid: answer, contexts, id, label, query)" in said
    for bad in ("answer", "answer=", "answer=reply --column answer=text"):
        _, output, code = _run(tmp_path, [json.dumps(GOOD)], "--column", *bad.split(" --column "))
        assert code == 2, (bad, output)


def test_the_column_option_s_help_lists_the_fields_its_usage_error_accepts(tmp_path: Path) -> None:
    """Only the usage error said which fields --column maps: the help sent readers to the docs."""
    _, output, _ = _run(tmp_path, [json.dumps(GOOD)], "--column", "nofield=x")
    valid = " ".join(output.split()).split("valid: ")[1].split(")")[0].split(", ")
    helped = " ".join(CliRunner().invoke(main, ["score", "--help"], terminal_width=10_000).output.split())
    listed = helped.split("--column FIELD=COLUMN Read FIELD (")[1].split(")")[0]
    assert sorted(listed.split(", ")) == sorted(valid) == ["answer", "contexts", "id", "label", "query"], (
        listed
    )


# A golden set's record whose documents sit under a name tracescore does not read.
PASSAGES = {"id": "p", "query": GOOD["query"], "passages": GOOD["contexts"], "answer": GOOD["answer"]}
NO_CONTEXTS = (
    "faithfulness: no contexts (looked for contexts, retrieved_contexts, retrieval_context, context, "
    "documents); the record's columns: id, query, passages, answer; map them with --column contexts=<column>"
)


def test_a_record_without_a_contexts_column_fails_a_gate_naming_the_column_and_how_to_map_it(
    tmp_path: Path,
) -> None:
    """Those records were not_applicable to faithfulness, as a refusal is, and the gate passed on the rest.
    A record that retrieved nothing (an empty list) still is the record's own outcome."""
    refusal = {**GOOD, "id": "refusal", "contexts": [], "answer": "I don't know."}
    lines = [json.dumps(GOOD), json.dumps(PASSAGES), json.dumps(refusal)]
    gate = ("--metrics", "faithfulness", "--fail-under", "faithfulness=0.5", "--max-flagged", "0")
    rows, output, code = _run(tmp_path, lines, *gate)
    assert [r["results"]["faithfulness"]["status"] for r in rows[1:]] == ["not_applicable"] * 2
    assert code == 1, output
    assert output.splitlines()[-1] == (
        "FAIL 1 of 3 records not scored (1 without a contexts column), more than --allow-unscored 0; the "
        f"first: line 2: {NO_CONTEXTS}"
    )
    _, output, code = _run(tmp_path, lines, *gate, "--allow-unscored", "1")
    assert code == 0 and "FAIL" not in output, output
    _, output, code = _run(tmp_path, [json.dumps(GOOD), json.dumps(refusal)], *gate)
    assert code == 0 and "FAIL" not in output, output
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness")
    assert code == 0, "without a gate, nothing changes"


def test_a_file_without_a_contexts_column_fails_every_condition_and_is_read_once_mapped(
    tmp_path: Path,
) -> None:
    """Answer relevancy scores those records (it reads no document): the gate on faithfulness says what it
    lacked; with faithfulness alone nothing is scored, and the error says why."""
    lines = [json.dumps(PASSAGES), json.dumps({**PASSAGES, "id": "q"})]
    gate = ("--fail-under", "faithfulness=0.5", "--max-flagged", "0")
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness,answer_relevancy", *gate)
    assert code == 1, output
    assert output.splitlines()[-3:] == [
        "FAIL faithfulness: no record could be scored (--max-flagged 0)",
        "FAIL faithfulness: no record could be scored (--fail-under faithfulness=0.5)",
        "FAIL 2 of 2 records not scored (2 without a contexts column), more than --allow-unscored 0; the "
        f"first: line 1: {NO_CONTEXTS}",
    ]
    _, output, code = _run(tmp_path, lines, "--metrics", "faithfulness", *gate)
    assert code == 1 and output.splitlines()[-1].endswith(f"; the first reason: {NO_CONTEXTS}"), output
    rows, output, code = _run(
        tmp_path, lines, "--metrics", "faithfulness", *gate, "--column", "contexts=passages"
    )
    assert code == 0 and "FAIL" not in output and rows[0]["faithfulness"] == 1.0, output


def test_without_a_gate_a_row_says_which_column_is_missing_and_one_record_is_counted_as_one(
    tmp_path: Path,
) -> None:
    """The row said "no retrieved context" (as a record that retrieved nothing does) and the summary
    "1 records": both as read now, and `tracescore report` counts alike."""
    rows, output, code = _run(tmp_path, [json.dumps(PASSAGES)], "--metrics", "faithfulness,answer_relevancy")
    assert code == 0, output
    assert rows[0]["reason"] == NO_CONTEXTS and rows[0]["answer_relevancy"] is not None
    assert "1 record (0 invalid)" in output.splitlines(), output
    # The summary says why a metric scored nothing, without a gate too (it said only "no score").
    why = NO_CONTEXTS.removeprefix("faithfulness: ")
    assert f"  faithfulness: 0 scored, 1 unscored; no score; the first: line 1: {why}" in output
    page = tmp_path / "report.html"
    reported = CliRunner().invoke(main, ["report", str(tmp_path / "out.jsonl"), "--out", str(page)])
    assert reported.output == f"1 record; report: {page}\n", reported.output


def _score_on(tmp_path: Path, stderr: int, *args: str) -> ZygoteProcess:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    return popen(
        [sys.executable, "-m", "tracescore.cli", "score", str(source), "--out", str(tmp_path / "o.jsonl"),
         "--judge", "offline", *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=checkout_env(clean),
    )  # fmt: skip


def _terminal_output(tmp_path: Path, *args: str) -> str:
    """What `tracescore score` writes to a real terminal (a pseudo-terminal as its stderr)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    # A new pseudo-terminal is 0 columns wide, and tqdm fits its bar into that: 24 rows of 80, as a window.
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        process = _score_on(tmp_path, follower, *args)
        os.close(follower)  # the child holds its own: reading ends (EIO) once it exits
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # Linux: the terminal's other end is closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=120) == 0
    finally:
        os.close(leader)
    return b"".join(chunks).decode("utf-8", errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_a_terminal_gets_the_progress_bar_and_the_summary_and_no_progress_hides_it(tmp_path: Path) -> None:
    shown = _terminal_output(tmp_path)
    assert "scoring: 1rec [" in shown, shown  # the bar (no total known: the count of records scored)
    assert "1 record (0 invalid)" in shown and "judge calls 0" in shown, shown
    hidden = _terminal_output(tmp_path, "--no-progress")
    assert "scoring" not in hidden and "1 record (0 invalid)" in hidden, hidden


def test_a_pipe_gets_the_summary_without_the_progress_bar(tmp_path: Path) -> None:
    """A CI log: the bar redrawn there is noise around the gate's lines."""
    process = _score_on(tmp_path, subprocess.PIPE)
    _, err = process.communicate(timeout=120)
    logged = err.decode()
    assert process.returncode == 0, logged
    assert "1 record (0 invalid)" in logged and "scoring" not in logged and "rec/s" not in logged, logged


def test_ctrl_c_exits_130_and_keeps_the_lines_scored_before(tmp_path: Path) -> None:
    """A CI job tells a cancelled run from a failed gate (1) by the status a shell gives an interrupted
    command; what was scored stays readable in --out."""
    import signal
    import time

    source = tmp_path / "in.jsonl"
    source.write_text((json.dumps(GOOD) + "\n") * 50_000, encoding="utf-8")  # a minute of scoring or more
    out = tmp_path / "o.jsonl"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACESCORE_", "OTEL_"))}
    process = popen(
        [sys.executable, "-m", "tracescore.cli", "score", str(source), "--out", str(out),
         "--judge", "offline", "--fail-under", "faithfulness=0.5"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=checkout_env(clean),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120  # a bound on a start that takes seconds, not a timing assertion
        while not (out.exists() and out.stat().st_size > 0) and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    said = err.decode()
    assert process.returncode == 130, said
    assert "FAIL" not in said and "Traceback" not in said, said
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]  # each whole
    assert 0 < len(rows) < 50_000
    assert [row["line"] for row in rows] == list(range(1, len(rows) + 1))
    # One line says how many were kept of how many, where, and what they are good for (it said neither).
    assert said.splitlines()[-1] == (
        f"interrupted after {len(rows)} of 50000 records: {out} holds their rows, whole and in input order "
        "(usable, but incomplete: no summary and no gate)"
    ), said
