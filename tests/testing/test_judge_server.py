"""JudgeServer through the real (sync) `openai` client: routes, scripting, faults, counters, embeddings."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from click.testing import CliRunner

from tracescore.cli import main
from tracescore.testing.judge_server import (
    Fault,
    JudgeServer,
    Reply,
    default_responder,
    estimate_tokens,
    hashed_embedding,
)


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer(model="judge-test") as running:
        yield running


@pytest.fixture
def client(server: JudgeServer) -> Iterator[openai.OpenAI]:
    # Generous: a loaded machine must not turn a normal reply into a timeout; no test relies on it firing.
    with openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=60.0) as c:
        yield c


def _claims_request(sentences: list[str], *, schema: bool = True) -> dict[str, Any]:
    fmt: dict[str, Any] = (
        {"type": "json_schema", "json_schema": {"name": "answer_analysis", "schema": {"type": "object"}}}
        if schema
        else {"type": "json_object"}
    )
    data = json.dumps({"question": "q", "answer_sentences": sentences})
    return {
        "model": "judge-test",
        "messages": [
            {"role": "system", "content": "Task: answer.analysis\nExtract claims."},
            {"role": "user", "content": f"<<<DATA\n{data}\nDATA>>>"},
        ],
        "response_format": fmt,
    }


def _content(client: openai.OpenAI, request: dict[str, Any]) -> str:
    reply = client.chat.completions.create(**request)
    return reply.choices[0].message.content or ""


def test_base_url_and_models(server: JudgeServer, client: openai.OpenAI) -> None:
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    assert [m.id for m in client.models.list()] == ["judge-test"]


def test_base_url_needs_a_running_server() -> None:
    with pytest.raises(RuntimeError):
        _ = JudgeServer().base_url


def test_unknown_route_is_404(server: JudgeServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"{server.base_url}/nope", timeout=60)
    assert caught.value.code == 404


@pytest.mark.parametrize("schema", [True, False])
def test_default_responder_answers_claims_by_task(client: openai.OpenAI, schema: bool) -> None:
    # The task comes from the json_schema name, or from the "Task:" line in json_object mode.
    reply = json.loads(_content(client, _claims_request(["A is B.", "C is D."], schema=schema)))
    assert reply["sentences"] == [
        {"sentence_index": 0, "claims": ["A is B."]},
        {"sentence_index": 1, "claims": ["C is D."]},
    ]
    assert reply["noncommittal"] is False and 1 <= reply["relevance"] <= 5


def test_default_responder_answers_verdicts(client: openai.OpenAI) -> None:
    data = json.dumps({"question": "q", "context": "c", "claims": ["x", "y"]})
    reply = json.loads(
        _content(
            client,
            {
                "model": "m",
                "messages": [
                    {"role": "system", "content": "Task: faithfulness.verdicts"},
                    {"role": "user", "content": f"<<<DATA\n{data}\nDATA>>>"},
                ],
            },
        )
    )
    assert [v["verdict"] for v in reply["verdicts"]] == ["FULLY_SUPPORTED", "FULLY_SUPPORTED"]
    assert [v["claim_index"] for v in reply["verdicts"]] == [0, 1]


def test_unknown_task_gets_a_minimal_instance_of_its_schema(client: openai.OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {
            "label": {"enum": ["yes", "no"]},
            "score": {"type": "number"},
            "notes": {"type": "string"},
        },
        "required": ["label", "score"],
    }
    request = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "other", "schema": schema}},
    }
    assert json.loads(_content(client, request)) == {"label": "yes", "score": 0}


def test_faults_then_script_then_responder_in_that_order(server: JudgeServer, client: openai.OpenAI) -> None:
    server.inject(Fault.SERVER_ERROR)
    server.script({"a": 1}, "plain text")
    server.responder = lambda body: {"echo": body["model"]}
    request = _claims_request(["A."])

    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(**request)
    assert json.loads(_content(client, request)) == {"a": 1}
    assert _content(client, request) == "plain text"
    assert json.loads(_content(client, request)) == {"echo": "judge-test"}
    assert server.stats.faults_served == 1


def test_rate_limit_carries_retry_after(server: JudgeServer, client: openai.OpenAI) -> None:
    server.retry_after_s = 1.5
    server.inject(Fault.RATE_LIMIT)
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(**_claims_request(["A."]))
    assert caught.value.response.headers["retry-after"] == "1.5"


def test_timeout_sleeps_past_the_client_timeout(server: JudgeServer, client: openai.OpenAI) -> None:
    server.timeout_sleep_s = 3600.0  # closing the server wakes it; no client waits this long
    server.inject(Fault.TIMEOUT)
    with (
        openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=0.5) as impatient,
        pytest.raises(openai.APITimeoutError),
    ):
        impatient.chat.completions.create(**_claims_request(["A."]))
    # The fault is consumed; the next request is served normally while the first still sleeps.
    assert json.loads(_content(client, _claims_request(["A."])))["sentences"]
    assert server.stats.faults_served == 1


def test_timeout_answers_no_sooner_than_timeout_sleep_s(server: JudgeServer, client: openai.OpenAI) -> None:
    server.timeout_sleep_s = 0.5
    server.inject(Fault.TIMEOUT)
    started = time.monotonic()
    reply = client.chat.completions.create(**_claims_request(["A."]))  # a patient client gets the reply
    assert time.monotonic() - started >= 0.5, "the reply was held back for timeout_sleep_s"
    assert json.loads(reply.choices[0].message.content or "")["sentences"]


def test_invalid_json_truncated_and_refusal_replies(server: JudgeServer, client: openai.OpenAI) -> None:
    server.inject(Fault.INVALID_JSON, Fault.TRUNCATED, Fault.REFUSAL)
    request = _claims_request(["A is B."])
    full = json.dumps(default_responder(request))

    invalid = client.chat.completions.create(**request).choices[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(invalid.message.content or "")

    truncated = client.chat.completions.create(**request).choices[0]
    assert truncated.finish_reason == "length"
    assert truncated.message.content == full[: len(full) // 2]

    refused = client.chat.completions.create(**request).choices[0]
    assert refused.message.content is None
    assert refused.message.refusal


def test_json_schema_rejection_as_fault_and_as_mode(server: JudgeServer, client: openai.OpenAI) -> None:
    server.inject(Fault.REJECT_JSON_SCHEMA)
    with pytest.raises(openai.BadRequestError, match="response_format"):
        client.chat.completions.create(**_claims_request(["A."]))
    assert _content(client, _claims_request(["A."]))  # one-shot fault: accepted again

    server.json_schema_supported = False
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(**_claims_request(["A."]))
    assert _content(client, _claims_request(["A."], schema=False))  # json_object still works


def test_requests_are_recorded_and_tokens_estimated(server: JudgeServer, client: openai.OpenAI) -> None:
    request = _claims_request(["A is B."])
    reply = client.chat.completions.create(**request)

    assert server.chat_requests == [request]
    prompt_text = "\n".join(m["content"] for m in request["messages"])
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == estimate_tokens(prompt_text) == math.ceil(len(prompt_text) / 4)
    assert reply.usage.completion_tokens == estimate_tokens(reply.choices[0].message.content or "")
    stats = server.stats
    assert (stats.requests, stats.chat_requests, stats.embedding_requests) == (1, 1, 0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )

    server.reset()
    assert server.stats.requests == 0 and server.requests == []


def test_max_in_flight_is_recorded(server: JudgeServer) -> None:
    clients = [openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0) for _ in range(4)]
    # The responder runs inside each request; holding every reply until all four arrived makes them overlap
    # on any machine, where a fixed latency only makes overlap likely.
    all_in = threading.Barrier(len(clients), timeout=60)

    def hold_until_all_in(body: dict[str, Any]) -> Reply:
        all_in.wait()
        return default_responder(body)

    server.responder = hold_until_all_in
    errors: list[BaseException] = []

    def one(c: openai.OpenAI) -> None:
        try:
            c.chat.completions.create(**_claims_request(["A."]))
        except BaseException as exc:  # surfaced below; a thread cannot fail the test itself
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    assert not errors
    assert server.stats.max_in_flight == 4


# Left unset, the client asks for base64 and decodes it itself; both wire formats must round-trip.
@pytest.mark.parametrize("encoding", ["float", None], ids=["float", "default-base64"])
def test_embeddings_are_deterministic_and_normalised(
    server: JudgeServer, client: openai.OpenAI, encoding: str | None
) -> None:
    texts = ["The head office is in Delhi.", "the office head is in delhi", "Bananas are yellow."]
    options: dict[str, Any] = {"encoding_format": encoding} if encoding else {}
    reply = client.embeddings.create(model="m", input=texts, **options)
    vectors = [d.embedding for d in reply.data]

    assert server.requests[-1].body["encoding_format"] == (encoding or "base64")

    assert all(len(v) == 256 for v in vectors)
    assert vectors[0] == pytest.approx(hashed_embedding(texts[0], 256), abs=1e-6)
    assert math.sqrt(sum(x * x for x in vectors[0])) == pytest.approx(1.0, abs=1e-6)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cosine(vectors[0], vectors[1]) == pytest.approx(1.0, abs=1e-6)  # same bag of words
    assert cosine(vectors[0], vectors[2]) < 0.5
    assert reply.usage.prompt_tokens == sum(estimate_tokens(t) for t in texts)


def test_embedding_dimensions_and_single_input(server: JudgeServer, client: openai.OpenAI) -> None:
    reply = client.embeddings.create(model="m", input="hello", dimensions=16, encoding_format="float")
    assert len(reply.data[0].embedding) == 16
    assert server.stats.embedding_requests == 1


def test_close_wakes_a_sleeping_timeout_instead_of_waiting_for_it(server: JudgeServer) -> None:
    server.timeout_sleep_s = 3600.0
    server.inject(Fault.TIMEOUT)
    replies: list[openai.types.chat.ChatCompletion | BaseException] = []

    def ask() -> None:
        with openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=600) as patient:
            try:
                replies.append(patient.chat.completions.create(**_claims_request(["A."])))
            except BaseException as exc:  # surfaced below
                replies.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    # The request is in: its handler is (about to be) asleep for an hour.
    for _ in range(600):
        if server.stats.faults_served:
            break
        time.sleep(0.1)
    assert server.stats.faults_served == 1 and not replies, "the TIMEOUT request is being held"

    closer = threading.Thread(target=server.close)
    closer.start()
    # Bounds far below the hour the handler would sleep: they catch a hang, not slowness.
    closer.join(120)
    assert not closer.is_alive(), "close() waited for the sleeping handler"
    asker.join(120)
    assert not asker.is_alive(), "the sleeping handler was not woken by close()"
    [reply] = replies
    assert not isinstance(reply, BaseException), reply
    assert json.loads(reply.choices[0].message.content or "")["sentences"], "woken, it still answers"


def test_run_as_a_program_it_serves_until_interrupted_and_a_command_judges_with_it(tmp_path: Path) -> None:
    """`python -m tracescore.testing.judge_server`: to try `--judge openai` without a provider's key. Its
    first line is its base URL; `tracescore score` judges through it with that URL alone (no key, no model);
    Ctrl-C stops it cleanly."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tracescore.testing.judge_server"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1"), base_url
        assert f"--base-url {base_url}" in server.stdout.readline()
        source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        record = {"id": "a", "query": "Where?", "contexts": ["It is in Delhi."], "answer": "It is in Delhi."}
        source.write_text(json.dumps(record) + "\n")
        unset = {k: None for k in os.environ if k.startswith(("TRACESCORE_JUDGE_", "OPENAI_"))}
        result = CliRunner(env={**unset, "OPENAI_BASE_URL": base_url}).invoke(
            main, ["score", str(source), "--judge", "openai", "--metrics", "faithfulness", "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        [row] = [json.loads(line) for line in out.read_text().splitlines()]
        assert row["faithfulness"] == 1.0 and row["results"]["faithfulness"]["judge"] == "openai:gpt-4o-mini"
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0 and "Traceback" not in err, err


def test_run_as_a_program_it_serves_the_faults_it_is_given_in_order() -> None:
    """`--fault rate_limit:2 --fault server_error`: a user rehearses a provider's failures (what is retried,
    counted, paged) from the command line; the faults come first, in order, then the answers."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tracescore.testing.judge_server", "--fault", "rate_limit:2",
         "--fault", "server_error"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
        statuses = []
        for _ in range(4):
            request = urllib.request.Request(
                f"{base_url}/chat/completions", data=body, headers={"content-type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as reply:
                    statuses.append(reply.status)
            except urllib.error.HTTPError as refused:
                statuses.append(refused.code)
        assert statuses == [429, 429, 500, 200]
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    assert server.returncode == 0 and "Traceback" not in err, err


def test_a_fault_it_does_not_know_is_refused_naming_the_kinds() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracescore.testing.judge_server", "--fault", "ratelimit"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "'ratelimit': expected KIND[:N], KIND one of rate_limit, server_error" in done.stderr, done.stderr
