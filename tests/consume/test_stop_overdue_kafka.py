"""The backstop of `tracescore consume`'s stop: a wait that no step of the stop bounds does not hold the
process. As `tracescore alert` and `tracescore conversations` (the same code,
tracescore/_service/_overdue.py), the process exits 2 s past `--stop-timeout`, with status 1 and one line
saying what it waited on and what it leaves (docs: Operating, Rebalances). Every wait of the stop is bounded
now (a judge call that blocks the scoring loop is given up on: test_stop_blocked_judge_kafka.py), so a scoring
worker whose close never returns stands in for one that is not, in a consumer run by a script of the test's
own (as the CLI runs it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import started_process, wait_until
from fault_helpers import APP, Topics
from kafka_helpers import REPO, run_instrumented_app
from service_processes import checkout_env

from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

STOP_TIMEOUT_S = 6.0
OVERDUE_S = 2.0  # past the budget, the process's to exit in (docs/operating/rebalances.md)
OVERDUE_EXIT = 1
# Far above the budget and its margin (a loaded machine); the wait it stands in for never ends.
BOUND_S = STOP_TIMEOUT_S + OVERDUE_S + 12.0

# The consumer, scoring with the offline judge, stopped on SIGTERM; its worker's close never returns.
SCRIPT = """
import logging
import signal
import sys
import threading

from tracescore.consume import ConsumerSettings, EvaluationConsumer
from tracescore.consume._scoring import ScoringWorker
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness


class NeverClosing(ScoringWorker):
    def close(self, timeout_s: float = 0.0) -> bool:
        threading.Event().wait()  # a wait no step of the stop bounds
        return True


logging.basicConfig(level=logging.INFO, stream=sys.stderr)
prefix = sys.argv[2]
settings = ConsumerSettings.model_validate({
    "bootstrap_servers": sys.argv[1], "topic": f"{prefix}.spans", "group_id": f"{prefix}.group",
    "evaluations_topic": f"{prefix}.evaluations", "dlq_topic": f"{prefix}.dlq",
    "evaluation_spans_topic": f"{prefix}.evaluation-spans", "stop_timeout_s": float(sys.argv[3]),
})
consumer = EvaluationConsumer(
    settings, judge=OfflineJudge(), metrics=[Faithfulness()], worker=NeverClosing
)
signal.signal(signal.SIGTERM, lambda *_: consumer.stop())
consumer.run()
"""


def test_a_stop_held_by_a_wait_no_step_bounds_exits_past_the_budget_saying_what_it_left(
    topics: Topics, tmp_path: Path
) -> None:
    script = tmp_path / "never_closing.py"
    script.write_text(SCRIPT, encoding="utf-8")
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=2))
    proc = started_process(
        subprocess.Popen(
            [sys.executable, str(script), topics.bootstrap, topics.prefix, f"{STOP_TIMEOUT_S:g}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, env=checkout_env(),
        )
    )  # fmt: skip
    try:
        wait_until(
            lambda: len(read_topic(topics.bootstrap, topics.evaluations, 60)) >= 2 or proc.poll() is not None,
            "the records scored",
        )
        assert proc.poll() is None, f"exited {proc.returncode} before it scored:\n{proc.communicate()[1]}"
    except BaseException:
        proc.kill()
        raise
    signalled = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still stopping {BOUND_S:g}s after SIGTERM:\n{proc.communicate()[1]}")
    took = time.monotonic() - signalled
    log = proc.communicate()[1]
    assert code == OVERDUE_EXIT, log
    assert took >= STOP_TIMEOUT_S, f"{took:.1f}s: exited before the stop's budget ran out\n{log}"
    [said] = [line for line in log.splitlines() if "passed waiting on" in line]
    assert (
        f"stopping: --stop-timeout ({STOP_TIMEOUT_S:g}s) passed waiting on the judges (cancelling the calls "
        "still running): exiting without the stop's last steps (the last commit, leaving the group)"
    ) in said, said
    assert "read and scored again (at least once, nothing lost)" in said, said
    assert "Traceback" not in log, log
