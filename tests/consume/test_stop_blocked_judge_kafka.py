"""`tracescore consume` stopped (SIGTERM) while a judge call blocks the scoring loop (a metric's async
function that makes a blocking HTTP call, to a judge server that holds its reply): no signal interrupts that
call and cancelling the loop's tasks waits for it. The stop gives the loop up within its share of
`--stop-timeout` (the thread is a daemon), says what it left behind, and its last steps run: the outputs of
what was scored, the last commit, leaving the group. Exit 0, within the budget; the group's next member reads
only what was not committed, at once. Before, the stop waited 30 s for the loop, and the backstop ended the
process 2 s past the budget, status 1, without the last commit nor leaving the group (docs: Operating,
Rebalances)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _helpers import committed, end_offsets, wait_until
from _members import GuardedMember
from fault_helpers import APP, ConsumerProcess, GatedJudgeServer, Topics
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import NewTopic
from kafka.consumer.fetcher import ConsumerRecord
from kafka_helpers import REPO, run_instrumented_app

from tracescore.consume import decode_message
from tracescore.model import EvaluationRecord
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

STOP_TIMEOUT_S = 10.0
# Far above the budget (a loaded machine), and exit 0 says the stop's last steps ran: the backstop (2 s past
# the budget) exits 1 without them.
BOUND_S = STOP_TIMEOUT_S + 20.0
# The group would give a member that did not leave its partitions only after this: far above any wait here.
SESSION_TIMEOUT_MS = 120_000
INTERACTIONS = 5
SCORED = 2  # the judge server answers these; the next call blocks the scoring loop, the rest wait behind it

# A metric's async function making a synchronous HTTP call (held by the judge server): on the event loop it
# runs on, which it blocks; or handed to a thread (`asyncio.to_thread`), which a cancel leaves running.
METRIC = """
import asyncio
import json
import os
import urllib.request

from tracescore.score import python_metric


def call(answer: str) -> None:
    body = json.dumps({{"model": "held", "messages": [{{"role": "user", "content": answer}}]}}).encode()
    request = urllib.request.Request(
        os.environ["HELD_JUDGE_URL"] + "/chat/completions",
        data=body,
        headers={{"content-type": "application/json"}},
    )
    urllib.request.urlopen(request, timeout=600).read()


@python_metric
async def held(answer: str) -> float:
    {call}
    return 1.0
"""
ON_THE_LOOP = METRIC.format(call="call(answer)")
ON_A_THREAD = METRIC.format(call="await asyncio.to_thread(call, answer)")
# What the stop says it left: the loop the call blocks, given up on; or (the loop ended) the drain's line.
ABANDONED = (
    "stopping: cancelling the judge calls did not end the judges' loop within ",
    "what --stop-timeout 10s left this step: a call blocks it",
    "left behind with 1 interaction it was scoring, not committed: the next start reads and scores it again "
    "(at least once, nothing lost)",
)
DRAINED = (
    "stopping: 1 interaction still being scored when the drain ran out (what --stop-timeout 10s left the "
    "drain) is not committed: the next start reads and scores it again (at least once, nothing lost)",
)


def blocked_consumer(
    topics: Topics, judge_server: GatedJudgeServer, tmp_path: Path, metric: str, *extra: str
) -> ConsumerProcess:
    """The consumer scoring with the blocking metric (the judge server's replies held but `SCORED`), one
    interaction at a time (in offset order), with no periodic commit after its first: the stop's last commit
    is the one that covers what it scored."""
    (tmp_path / "held_metric.py").write_text(metric, encoding="utf-8")
    judge_server.hold(allow=SCORED)  # the rest released when the test ends (the fixture closes the server)
    args = ("--metrics", "held_metric:held", "--max-in-flight", "1", "--commit-interval", "600", *extra)
    return ConsumerProcess(
        topics.cli_args(*args, idle_timeout_s=600),
        env={
            "TRACESCORE_STOP_TIMEOUT_S": f"{STOP_TIMEOUT_S:g}",
            "HELD_JUDGE_URL": judge_server.base_url,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(tmp_path)]),
            # Warnings asked for: the process ends by the interpreter's own exit, which waits for threads
            # (cli/_exit.py), as under coverage or a profiler; otherwise it ends itself without waiting.
            "PYTHONWARNINGS": "default",
        },
    )


def trace_ids(messages: list[ConsumerRecord]) -> set[str]:
    return {span.trace_id for message in messages for span in decode_message(message.value)}


def records_of(topics: Topics, at_least: int) -> list[ConsumerRecord]:
    """The evaluation records written, once there are `at_least` ([] before)."""
    records = read_topic(topics.bootstrap, topics.evaluations, 60)
    return records if len(records) >= at_least else []


def group_members(bootstrap: str, group: str) -> list[object]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return list(admin.describe_groups([group]).get(group, {}).get("members") or [])
    finally:
        admin.close()


@pytest.mark.parametrize(
    ("metric", "said"), [(ON_THE_LOOP, ABANDONED), (ON_A_THREAD, DRAINED)], ids=["on_the_loop", "on_a_thread"]
)
def test_a_stop_with_a_judge_call_that_never_returns_commits_what_was_scored_and_leaves_the_group(
    topics: Topics,
    judge_server: GatedJudgeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    metric: str,
    said: tuple[str, ...],
) -> None:
    """On the loop: the stop gives the loop up. On a thread: the loop ends, and the thread no longer holds the
    process at the interpreter's exit (the loop's default executor was a ThreadPoolExecutor, whose threads the
    interpreter joins: the process hung after its stop)."""
    # A message per trace (the app's exporter; by default one per partition and export, all five traces in
    # one): the committed offset then moves past each trace scored.
    monkeypatch.setenv("TRACESCORE_KAFKA__TRACE_MESSAGES", "per_trace")
    admin = KafkaAdminClient(bootstrap_servers=topics.bootstrap)
    admin.create_topics([NewTopic(topics.spans, 1, 1)])  # one partition: "what was committed" is one offset
    admin.close()
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=INTERACTIONS))
    spans = read_topic(topics.bootstrap, topics.spans, 60)
    assert len(trace_ids(spans)) == INTERACTIONS
    proc = blocked_consumer(
        topics, judge_server, tmp_path, metric, "--session-timeout-ms", str(SESSION_TIMEOUT_MS)
    )
    try:
        wait_until(
            lambda: judge_server.stats.chat_requests > SCORED or proc.process.poll() is not None,
            "the metric's call held",
        )
        assert proc.process.poll() is None, f"exited {proc.process.returncode}:\n{proc.log}"
        written = wait_until(lambda: records_of(topics, SCORED), "the records scored")
    except BaseException:
        proc.kill()
        raise

    proc.terminate()
    try:
        code = proc.process.wait(BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"still stopping {BOUND_S:g}s after SIGTERM:\n{proc.log}")
    proc.wait()  # the rest of its log
    assert code == 0, proc.log
    assert "Traceback" not in proc.log, proc.log
    [line] = [line for line in proc.lines if said[0] in line]
    assert all(part in line for part in said), line
    assert metric is ON_THE_LOOP or not any(ABANDONED[0] in line for line in proc.lines), proc.log

    # The member left the group at its stop: none is left to wait out the session timeout.
    assert group_members(topics.bootstrap, topics.group) == [], "the stopped member is still in the group"
    scored = {EvaluationRecord.model_validate_json(m.value).trace_id for m in written}
    assert len(scored) == SCORED
    first_unscored = min(m.offset for m in spans if not trace_ids([m]) <= scored)
    assert first_unscored > 0, "the traces scored come first on the partition"
    assert committed(topics.bootstrap, topics.group, topics.spans) == {0: first_unscored}, proc.log

    # The group's next member gets the partition at once, and reads only what was not committed.
    member = GuardedMember(
        KafkaConsumer(
            bootstrap_servers=topics.bootstrap, group_id=topics.group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=SESSION_TIMEOUT_MS,
        ),
        topics.spans,
    )  # fmt: skip
    try:
        [end] = end_offsets(topics.bootstrap, topics.spans).values()
        read: list[ConsumerRecord] = []

        def to_the_end() -> bool:
            read.extend(message for messages in member.poll(200).values() for message in messages)
            return bool(read) and read[-1].offset >= end - 1

        # Half the session timeout: a member that had not left would hold the partition for all of it.
        wait_until(to_the_end, "the next member to read the partition", timeout_s=SESSION_TIMEOUT_MS / 2000)
    finally:
        member.close()
    assert len(read) == end - first_unscored
    # Every trace not scored is read again (spans of a scored one among them are skipped by the handover the
    # commit carries, which a raw member does not read).
    assert trace_ids(read) >= trace_ids(spans) - scored, "nothing lost"
