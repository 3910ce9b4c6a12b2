"""`tracescore consume` stopped (SIGTERM) while a judge call blocks the scoring loop (a metric's async
function that makes a blocking HTTP call, to a judge server that holds its reply): no signal interrupts that
call and cancelling the loop's tasks waits for it, so the stop's steps cannot end it. As `tracescore alert`
and `tracescore conversations` (the same backstop, tracescore/_service/_overdue.py), the process exits 2 s
past `--stop-timeout`, with status 1 and one line saying what it waited on and what it leaves (docs:
Operating, Rebalances). Before, the stop waited 30 s for the loop and ended in a traceback."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from _helpers import wait_until
from fault_helpers import APP, ConsumerProcess, GatedJudgeServer, Topics
from kafka_helpers import REPO, run_instrumented_app

pytestmark = pytest.mark.kafka

STOP_TIMEOUT_S = 6.0
OVERDUE_S = 2.0  # past the budget, the process's to exit in (docs/operating/rebalances.md)
OVERDUE_EXIT = 1
# Far above the budget and its margin (a loaded machine), far below the 30 s the stop waited before.
BOUND_S = STOP_TIMEOUT_S + OVERDUE_S + 12.0

# A metric that blocks the event loop it runs on: an async function making a synchronous HTTP call.
BLOCKING_METRIC = """
import json
import os
import urllib.request

from tracescore.score import python_metric


@python_metric
async def held(answer: str) -> float:
    body = json.dumps({"model": "held", "messages": [{"role": "user", "content": answer}]}).encode()
    request = urllib.request.Request(
        os.environ["HELD_JUDGE_URL"] + "/chat/completions",
        data=body,
        headers={"content-type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=600).read()  # held by the judge server: the loop with it
    return 1.0
"""


def test_a_stop_held_by_a_judge_call_that_blocks_the_scoring_loop_exits_past_the_budget_saying_what_it_left(
    topics: Topics, judge_server: GatedJudgeServer, tmp_path: Path
) -> None:
    (tmp_path / "held_metric.py").write_text(BLOCKING_METRIC, encoding="utf-8")
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=2))
    judge_server.hold()  # released when the test ends (the fixture closes the server)
    proc = ConsumerProcess(
        topics.cli_args("--metrics", "held_metric:held", idle_timeout_s=600),
        env={
            "TRACESCORE_STOP_TIMEOUT_S": f"{STOP_TIMEOUT_S:g}",
            "HELD_JUDGE_URL": judge_server.base_url,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]),
        },
    )
    try:

        def held() -> bool:
            return judge_server.stats.chat_requests >= 1

        wait_until(lambda: held() or proc.process.poll() is not None, "the metric's call held")
        assert held(), f"exited {proc.process.returncode} before its metric called:\n{proc.log}"
    except BaseException:
        proc.kill()
        raise
    signalled = time.monotonic()
    proc.terminate()
    try:
        code = proc.process.wait(BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still stopping {BOUND_S:g}s after SIGTERM:\n{proc.log}")
    took = time.monotonic() - signalled
    proc.wait()  # the rest of its log
    assert code == OVERDUE_EXIT, proc.log
    assert took >= STOP_TIMEOUT_S, f"{took:.1f}s: exited before the stop's budget ran out\n{proc.log}"
    [said] = [line for line in proc.lines if "passed waiting on" in line]
    assert (
        f"stopping: --stop-timeout ({STOP_TIMEOUT_S:g}s) passed waiting on the judges (cancelling the calls "
        "still running): exiting without the stop's last steps (the last commit, leaving the group)"
    ) in said, said
    assert "read and scored again (at least once, nothing lost)" in said, said
    assert "Traceback" not in proc.log, proc.log
