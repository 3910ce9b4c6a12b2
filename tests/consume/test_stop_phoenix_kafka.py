"""`tracescore consume --phoenix-endpoint` stopped (SIGTERM) while Phoenix is slow but accepting, or hung: the
Phoenix sink is closed last, with what the stop's budget (`--stop-timeout`) has left, so the stop ends within
the budget and its 2 s margin (docs/operating/rebalances.md) instead of posting for Phoenix's own
`timeout_s` past it; what was not posted is counted unsent_at_stop, in the stop's log and the closing
summary. Through the real broker; "slow but accepting" is a tiny local HTTP server answering Phoenix's API
after a delay (it stands for a slow server), "hung" a real Phoenix SIGSTOPped (`paused`)."""

from __future__ import annotations

import http.server
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _helpers import paused, wait_until
from fault_helpers import APP, ConsumerProcess, Topics
from kafka_helpers import run_instrumented_app

from tracescore.testing.kafka_topics import read_topic
from tracescore.testing.phoenix import PhoenixServer

pytestmark = pytest.mark.kafka

STOP_TIMEOUT_S = 6.0
MARGIN_S = 2.0  # past the budget, the process's to exit in (docs/operating/rebalances.md)
ANSWERS = 6  # interactions, one faithfulness record (and annotation) each
SLOW_S = 3.0  # how long the slow Phoenix takes to answer a post (it then accepts it)
# Phoenix's own per-request limit, which closing the sink waited for before: far past the budget, so a stop
# that still waits for it shows.
PHOENIX_TIMEOUT_S = 60.0


class SlowPhoenix:
    """Answers Phoenix's API (GET /v1/projects, POST of annotations) like Phoenix, each post after SLOW_S."""

    def __init__(self) -> None:
        self.received = 0  # annotations in the posts it has read
        counter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._answer({"data": [], "next_cursor": None})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                counter.received += len(body["data"])
                time.sleep(SLOW_S)
                self._answer({"data": []})

            def _answer(self, body: object) -> None:
                payload = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("x-phoenix-server-version", "slow")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass  # the test's output is the consumer's

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def slow_phoenix() -> Iterator[SlowPhoenix]:
    server = SlowPhoenix()
    yield server
    server.close()


def _consumer(topics: Topics, endpoint: str) -> ConsumerProcess:
    """A consumer (the offline judge) that runs until SIGTERM, posting one annotation per request."""
    return ConsumerProcess(
        topics.cli_args("--phoenix-endpoint", endpoint, idle_timeout_s=600),
        env={
            "TRACESCORE_STOP_TIMEOUT_S": f"{STOP_TIMEOUT_S:g}",
            "TRACESCORE_PHOENIX_TIMEOUT_S": f"{PHOENIX_TIMEOUT_S:g}",
            "TRACESCORE_PHOENIX_BATCH_SIZE": "1",
        },
    )


def _stopped(proc: ConsumerProcess) -> float:
    """SIGTERM, and how long the process took to exit (0)."""
    signalled = time.monotonic()
    proc.terminate()
    code = proc.wait()
    took = time.monotonic() - signalled
    assert code == 0, proc.log
    return took


def _unsent(proc: ConsumerProcess, endpoint: str) -> tuple[int, int]:
    """(unsent at the stop, posted), as the stop's log line says them and the closing summary again."""
    [said] = [line for line in proc.lines if f"Phoenix at {endpoint}: " in line and " dropped (" in line]
    found = re.search(
        r"(\d+) not posted before the stop, within the ([\d.]+)s closing had\), (\d+) posted", said
    )
    assert found, said
    unsent, given, posted = int(found[1]), float(found[2]), int(found[3])
    assert given <= STOP_TIMEOUT_S, said  # what the budget left, not Phoenix's own timeout_s
    summary = f"  phoenix: posted={posted}; dropped: unsent_at_stop={unsent}"
    assert summary in proc.lines, proc.log
    return unsent, posted


def test_a_stop_while_phoenix_is_slow_but_accepting_ends_within_the_budget_counting_what_was_not_posted(
    topics: Topics, slow_phoenix: SlowPhoenix
) -> None:
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=ANSWERS))
    proc = _consumer(topics, slow_phoenix.base_url)
    try:
        wait_until(lambda: len(read_topic(topics.bootstrap, topics.evaluations, 1)) >= ANSWERS, "the records")
        wait_until(lambda: slow_phoenix.received >= 1, "the first annotation posted, slowly")
    except BaseException:
        proc.kill()
        raise
    took = _stopped(proc)
    # Before, closing the sink went on posting (SLOW_S a post, ANSWERS of them) for up to its timeout_s.
    assert took < STOP_TIMEOUT_S + MARGIN_S, f"{took:.1f}s to stop:\n{proc.log}"
    unsent, posted = _unsent(proc, slow_phoenix.base_url)
    assert unsent >= 1 and unsent + posted == ANSWERS, proc.log
    assert posted <= slow_phoenix.received  # a post under way at the end is not counted as posted


def test_a_stop_while_phoenix_hangs_ends_within_the_budget_counting_what_was_not_posted(
    topics: Topics, tmp_path: Path, phoenix_spawn: Callable[..., Any]
) -> None:
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=ANSWERS))
    with PhoenixServer(working_dir=tmp_path / "phoenix", spawn=phoenix_spawn) as phoenix:
        assert phoenix.process is not None
        proc = _consumer(topics, phoenix.base_url)
        try:
            proc.wait_for_line("answers; annotations are posted there")  # before any record: none posted yet
            with paused(phoenix.process.pid):
                wait_until(
                    lambda: len(read_topic(topics.bootstrap, topics.evaluations, 1)) >= ANSWERS, "the records"
                )
                time.sleep(1.0)  # the sink's first post is under way, to the hung Phoenix
                took = _stopped(proc)
        except BaseException:
            proc.kill()
            raise
    # Before, closing the sink waited for the post under way: Phoenix's timeout_s past the budget.
    assert took < STOP_TIMEOUT_S + MARGIN_S, f"{took:.1f}s to stop:\n{proc.log}"
    assert _unsent(proc, phoenix.base_url) == (ANSWERS, 0), proc.log
