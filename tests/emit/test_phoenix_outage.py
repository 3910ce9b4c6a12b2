"""Phoenix down, hung, or not Phoenix at all: the annotations are kept (bounded) and posted once it answers,
never twice, the caller never waits, and a wrong endpoint is said at start. Against a real Phoenix of the
test's own (stopped, restarted or SIGSTOPped: never the session's shared one; forked as the shared one is,
`phoenix_spawn`) and the real broker; "a server that is not Phoenix" is a tiny local HTTP server answering
404.
"""

from __future__ import annotations

import http.server
import logging
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _helpers import paused, wait_until
from phoenix_helpers import (
    SpanIds,
    annotations,
    consume_command,
    in_phoenix,
    record,
    traced_answer,
    traced_span,
)

from tracescore.emit import PhoenixAnnotations, PhoenixSettings
from tracescore.emit._phoenix import PAST_MAX_PENDING, REJECTED, UNSENT_AT_STOP
from tracescore.emit._phoenix_backlog import Backlog
from tracescore.testing import free_port
from tracescore.testing.phoenix import PhoenixServer

LOGGER = "tracescore.emit"
# Long enough for a Phoenix coming back (a restart takes seconds) to take what was kept.
POSTED_S = 90.0


@pytest.fixture
def own_phoenix(tmp_path: Path, phoenix_spawn: Callable[..., Any]) -> Iterator[PhoenixServer]:
    """A Phoenix of this test's own, to stop, restart or hang; its data in `tmp_path/phoenix`, kept when
    it stops so a restart finds the spans it had."""
    with PhoenixServer(working_dir=tmp_path / "phoenix", spawn=phoenix_spawn) as server:
        yield server


@pytest.fixture
def not_phoenix() -> Iterator[str]:
    """The URL of a loopback HTTP server that answers every request with 404: a server that is not Phoenix."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def _not_found(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_error(404)

        do_GET = do_POST = _not_found

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test's output is the sink's

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _said(caplog: pytest.LogCaptureFixture, *parts: str) -> str:
    """The first message of the sink's holding every one of `parts`, once it is logged (from its thread)."""

    def found() -> str | None:
        for logged in list(caplog.records):
            message = logged.getMessage()
            if logged.name.startswith(LOGGER) and all(part in message for part in parts):
                return message
        return None

    return wait_until(found, f"a log line with {parts}", timeout_s=30)


def _pending(port: int) -> float | None:
    """The consumer's `tracescore_phoenix_pending` gauge, scraped from its --prometheus-port."""
    try:
        text = httpx2.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx2.TransportError:
        return None  # not serving yet
    found = re.search(r"^tracescore_phoenix_pending(?:\{[^}]*\})? (\S+)$", text, re.MULTILINE)
    return float(found[1]) if found else None


def _once_each(api: httpx2.Client, span: SpanIds, names: list[str]) -> None:
    """Every name in `names`, and no other, landed on `span` in Phoenix, each exactly once."""

    def landed() -> dict[str, list[dict[str, object]]] | None:
        found = annotations(api, span)
        return found if set(found) >= set(names) else None

    found = in_phoenix(landed, f"annotations {names}")
    time.sleep(1.0)  # a duplicate queued in Phoenix behind the last one would land by now
    found = annotations(api, span)
    assert {name: len(each) for name, each in found.items()} == dict.fromkeys(names, 1)


# --- nothing lost ---------------------------------------------------------------------------------------


def test_annotations_made_while_phoenix_hangs_are_posted_once_when_it_answers(
    own_phoenix: PhoenixServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A post that timed out may still be taken by Phoenix once it wakes; posted again, it lands once
    (Phoenix upserts on span, name and identifier)."""
    assert own_phoenix.process is not None
    settings = PhoenixSettings(
        # A timeout far above what 6 sends take on a loaded machine: the bound below is its quarter.
        endpoint=own_phoenix.base_url,
        timeout_s=4.0,
        failure_pause_s=0.5,
        max_retries=0,
        batch_size=2,
    )
    names = [f"metric_{i}" for i in range(5)]
    with (
        httpx2.Client(base_url=own_phoenix.base_url, timeout=30.0) as api,
        caplog.at_level(logging.INFO, logger=LOGGER),
        PhoenixAnnotations(settings) as sink,
    ):
        span = traced_span(own_phoenix.base_url, api)
        _said(caplog, "answers; annotations are posted there")
        with paused(own_phoenix.process.pid):
            started = time.monotonic()
            for name in names:
                assert sink.send([record(span, metric=name)]) == 1
            sink.send([record(span, metric=names[0], score=0.25)])  # a revision while it hangs: replaces
            took = time.monotonic() - started
            _said(caplog, "is not accepting annotations", "no answer within 4s (timeout_s)", "keeping them")
            assert (sink.sent, sink.failed, sink.pending) == (0, 0, 5)
        assert sink.flush(POSTED_S)
        assert (sink.sent, sink.dropped) == (5, {})
        _said(caplog, "accepts annotations again; posting the 5 annotations kept meanwhile")
        _once_each(api, span, names)
        assert annotations(api, span)[names[0]][0]["result"]["score"] == 0.25
    assert took < settings.timeout_s / 4, f"{took:.2f}s for 6 sends: the caller waited on a hung Phoenix"


def test_annotations_made_while_phoenix_is_down_are_posted_when_it_is_back_the_oldest_past_the_cap_dropped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, phoenix_spawn: Callable[..., Any]
) -> None:
    first = PhoenixServer(working_dir=tmp_path / "phoenix", spawn=phoenix_spawn)
    with first, httpx2.Client(base_url=first.base_url, timeout=30.0) as api:
        span = traced_span(first.base_url, api)
    port, grpc_port = first.port, first.grpc_port  # the same Phoenix comes back there, its data kept
    settings = PhoenixSettings(
        endpoint=f"http://127.0.0.1:{port}", failure_pause_s=0.2, max_pending=4, batch_size=2
    )
    names = [f"metric_{i}" for i in range(6)]
    with caplog.at_level(logging.INFO, logger=LOGGER), PhoenixAnnotations(settings) as sink:
        _said(caplog, "is not accepting annotations", "Connection refused", "is Phoenix running")
        for name in names:
            sink.send([record(span, metric=name)])
        # A batch taken to be posted meanwhile is over the cap when it comes back: then the oldest go too.
        wait_until(lambda: sink.dropped == {PAST_MAX_PENDING: 2}, "the two oldest dropped")
        _said(caplog, "4 annotations kept while it does not accept them (max_pending): dropping the oldest")
        wait_until(lambda: sink.pending == 4, "four kept")
        with (
            PhoenixServer(
                working_dir=tmp_path / "phoenix", port=port, grpc_port=grpc_port, spawn=phoenix_spawn
            ) as again,
            httpx2.Client(base_url=again.base_url, timeout=30.0) as api,
        ):
            assert again.port == port, "the port was taken meanwhile: nothing to post to"
            assert sink.flush(POSTED_S)
            _said(
                caplog,
                "accepts annotations again; posting the 4 annotations kept meanwhile; 2 annotations dropped "
                "meanwhile (2 past max_pending while Phoenix was not accepting)",
            )
            _once_each(api, span, names[2:])  # the newest four
    assert (sink.sent, sink.dropped) == (4, {PAST_MAX_PENDING: 2})
    closing = _said(caplog, "dropped (2 past max_pending while Phoenix was not accepting), 4 posted")
    assert closing.endswith("the records are on the evaluations topic")


def test_closing_posts_what_is_kept_while_phoenix_answers(
    phoenix_server: PhoenixServer, phoenix_api: httpx2.Client
) -> None:
    """The consumer's stop closes the sink right after its last send: what is kept is posted, not dropped."""
    span = traced_span(phoenix_server.base_url, phoenix_api)
    names = [f"metric_{i}" for i in range(7)]
    sink = PhoenixAnnotations(PhoenixSettings(endpoint=phoenix_server.base_url, batch_size=2))
    sink.send([record(span, metric=name) for name in names])
    sink.close()
    assert (sink.sent, sink.dropped) == (len(names), {})
    _once_each(phoenix_api, span, names)


def test_the_backlog_keeps_the_latest_of_each_key_and_drops_the_oldest_past_its_cap() -> None:
    def annotation(span: str, name: str, score: float) -> dict[str, object]:
        return {"span_id": span, "name": name, "identifier": "tracescore:offline", "result": {"score": score}}

    backlog = Backlog(cap=3)
    assert backlog.put("/v1/span_annotations", [annotation("a", "m", 0.1), annotation("b", "m", 0.2)]) == 0
    assert backlog.put("/v1/span_annotations", [annotation("a", "m", 0.3)]) == 0  # replaces a's, now last
    assert len(backlog) == 2
    path, taken = backlog.take(most=10)
    assert path == "/v1/span_annotations"
    assert [(a["span_id"], a["result"]) for _, a in taken] == [("b", {"score": 0.2}), ("a", {"score": 0.3})]
    # While they were in flight, a newer a came, and two others: given back, the stale a is not.
    assert backlog.put("/v1/span_annotations", [annotation("a", "m", 0.4), annotation("c", "m", 0.5)]) == 0
    assert backlog.give_back(taken) == 0
    assert [(a["span_id"], a["result"]) for _, a in backlog.take(most=10)[1]] == [
        ("b", {"score": 0.2}),
        ("a", {"score": 0.4}),
        ("c", {"score": 0.5}),
    ]
    backlog.give_back([])
    assert backlog.put("/v1/span_annotations", [annotation(s, "m", 0.0) for s in "defg"]) == 1  # cap 3
    assert [a["span_id"] for _, a in backlog.take(most=10)[1]] == ["e", "f", "g"]
    # One batch, one path: session annotations wait behind span annotations, in order.
    backlog.put("/v1/span_annotations", [annotation("h", "m", 0.0)])
    backlog.put("/v1/session_annotations", [{"session_id": "s", "name": "m", "identifier": "x"}])
    assert backlog.take(most=10)[0] == "/v1/span_annotations"
    assert backlog.take(most=10)[0] == "/v1/session_annotations"
    assert len(backlog) == 0


# --- a wrong endpoint, said at start ----------------------------------------------------------------------


def _said_at_start(caplog: pytest.LogCaptureFixture, endpoint: str, parts: list[str], level: int) -> None:
    """Before any annotation is sent (and lost): one cheap request, and what to change, said once at
    `level`."""
    with caplog.at_level(logging.INFO, logger=LOGGER), PhoenixAnnotations(PhoenixSettings(endpoint=endpoint)):
        said = _said(caplog, *parts)
    assert said.count(endpoint) == 1, said
    assert [r.levelno for r in caplog.records if r.getMessage() == said] == [level]


# The cases on the shared Phoenix ask for it by name (not by request.getfixturevalue): they run on its worker.
@pytest.mark.parametrize(
    ("case", "parts"),
    [
        ("phoenix", ["Phoenix 20.", "answers; annotations are posted there"]),
        ("a path after phoenix's address", ["answers at", "/phoenix, but not its API (GET /v1/projects: "
                                            "HTTP 200, text/html",
                                            "the endpoint is Phoenix's base URL, without /v1"]),
        ("a scheme typo", ["cannot be asked (UnsupportedProtocol: the endpoint needs http:// or https://"]),
    ],
)  # fmt: skip
def test_the_endpoint_is_checked_at_start_and_what_is_wrong_said(
    phoenix_server: PhoenixServer, caplog: pytest.LogCaptureFixture, case: str, parts: list[str]
) -> None:
    base_url = phoenix_server.base_url
    endpoint = {
        "phoenix": base_url,
        "a path after phoenix's address": f"{base_url}/phoenix",
        "a scheme typo": base_url.replace("http://", "htp://"),
    }[case]
    _said_at_start(caplog, endpoint, parts, logging.INFO if case == "phoenix" else logging.WARNING)


@pytest.mark.parametrize(
    ("case", "parts"),
    [
        ("nothing listens", ["is not accepting annotations (ConnectError:",
                             "nothing listens there: is Phoenix running, on this port?", "keeping them"]),
        ("not phoenix", ["answers, but is not Phoenix (GET /v1/projects: HTTP 404, no "
                         "x-phoenix-server-version header): is it Phoenix's address? the endpoint is "
                         "Phoenix's base URL, without /v1"]),
    ],
)  # fmt: skip
def test_an_endpoint_where_no_phoenix_answers_is_said_at_start(
    request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture, case: str, parts: list[str]
) -> None:
    if case == "nothing listens":
        endpoint = f"http://127.0.0.1:{request.getfixturevalue('closed_port')}"
    else:
        endpoint = request.getfixturevalue("not_phoenix")
    _said_at_start(caplog, endpoint, parts, logging.WARNING)


# --- the consumer, end to end -----------------------------------------------------------------------------


def test_consume_keeps_scoring_while_phoenix_hangs_and_its_annotations_arrive_once_it_answers(
    own_phoenix: PhoenixServer, bootstrap: str, topic_prefix: str
) -> None:
    from _zygote import popen
    from service_processes import checkout_env

    from tracescore.testing.kafka_topics import wait_for_records

    assert own_phoenix.process is not None
    port = free_port()  # the consumer's --prometheus-port: its gauge says what it keeps for Phoenix
    answers = ["The battery lasts 40 hours.", "The battery lasts 14 hours.", "It lasts 3 days."]
    spans = [traced_answer(own_phoenix.base_url, bootstrap, f"{topic_prefix}.spans", a) for a in answers]
    settings_timeout_s = 1.0
    env = {
        **checkout_env(),
        "TRACESCORE_PHOENIX_TIMEOUT_S": f"{settings_timeout_s:g}",
        "TRACESCORE_PHOENIX_FAILURE_PAUSE_S": "0.5",
    }
    lines: list[str] = []
    with paused(own_phoenix.process.pid):
        consume = popen(
            [
                *consume_command(bootstrap, topic_prefix, own_phoenix.base_url, idle_timeout_s=15),
                *("--prometheus-port", str(port), "--prometheus-host", "127.0.0.1"),
            ],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert consume.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(consume.stderr), daemon=True)
        reader.start()
        try:
            # Scored and written while Phoenix hangs: the check at start and the posts wait beside it.
            written = wait_for_records(bootstrap, f"{topic_prefix}.evaluations", len(answers), timeout_s=120)
            assert len(written) == len(answers), "".join(lines)
            wait_until(lambda: any("is not accepting annotations" in line for line in lines), "the warning")
            wait_until(lambda: _pending(port) == len(answers), "the annotations kept", timeout_s=60)
            time.sleep(settings_timeout_s * 2)  # a post of them timed out meanwhile: they stay kept
            assert _pending(port) == len(answers)
        except BaseException:
            consume.kill()
            raise
    assert consume.wait(180) == 0, "".join(lines)
    reader.join(10)
    stderr = "".join(lines)
    assert f"scored={len(answers)}" in stderr, stderr
    assert "accepts annotations again" in stderr, stderr
    assert "annotations dropped" not in stderr, stderr
    assert f"  phoenix: posted={len(answers)}; dropped: none\n" in stderr, stderr  # the closing summary
    with httpx2.Client(base_url=own_phoenix.base_url, timeout=30.0) as api:
        for span in spans:
            _once_each(api, span, ["faithfulness"])


def test_consume_with_an_endpoint_that_is_not_phoenix_starts_scores_and_says_so(
    not_phoenix: str, bootstrap: str, topic_prefix: str, phoenix_server: PhoenixServer
) -> None:
    from _zygote import run
    from service_processes import checkout_env

    traced_answer(phoenix_server.base_url, bootstrap, f"{topic_prefix}.spans", "The battery lasts 40 hours.")
    command = consume_command(bootstrap, topic_prefix, not_phoenix, idle_timeout_s=3)
    done = run(command, env=checkout_env(), timeout=180)
    assert done.returncode == 0, done.stderr
    assert "scored=1" in done.stderr, done.stderr
    assert f"{not_phoenix} answers, but is not Phoenix (GET /v1/projects: HTTP 404" in done.stderr
    assert f"Phoenix at {not_phoenix}: 1 annotation dropped (1 refused by Phoenix), 0 posted" in done.stderr
    assert REJECTED in done.stderr and UNSENT_AT_STOP not in done.stderr
    assert "  phoenix: posted=0; dropped: rejected=1\n" in done.stderr, done.stderr  # the closing summary
