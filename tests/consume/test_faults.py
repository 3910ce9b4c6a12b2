"""The fault suite: the scoring service crashed, stopped, starved and fed garbage, through the real broker.

Each test ends in counts read back from the topics: every span must end with a score or an explained error
record (0 lost, 0 unexplained); records are at least once, so duplicates are counted and reported, not
failed. Judge calls are held in flight by the test itself (GatedJudgeServer), so every fault lands at the
moment it names, with no race against a fixed latency. Garbage on the spans topic: test_faults_fuzz.py.
`benchmarks/consumer_faults.py` runs both files and tabulates the counts for BENCHMARKS.md.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _helpers import judge_client, wait_until
from fault_helpers import (
    APP,
    CommittedOffsets,
    ConsumerProcess,
    FlakyJudgeServer,
    GatedJudgeServer,
    Topics,
    outcome,
    rag_spans_on,
    report,
)
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka_helpers import assert_all_committed, end_offsets, run_instrumented_app

from tracescore.consume import EvaluationConsumer
from tracescore.score.metrics import Faithfulness
from tracescore.testing.judge_server import Fault
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

SPANS = 20  # per kill run: enough to spread over the 3 partitions and keep work queued behind the judge


def _finish(topics: Topics, server: GatedJudgeServer, expected: set[tuple[str, str]]) -> ConsumerProcess:
    """The restart after a fault: a new consumer process that must finish the topic and exit 0."""
    server.open()
    restart = ConsumerProcess(topics.cli_args(base_url=server.base_url))
    assert restart.wait() == 0, restart.log
    assert_all_committed(topics.bootstrap, topics.group, topics.spans)
    return restart


def _assert_nothing_lost(fault: str, topics: Topics, expected: set[tuple[str, str]], **extra: object) -> None:
    result = outcome(topics, expected)
    result.extra.update(extra)
    report(fault, result)
    assert result.lost == 0 and result.unexplained == 0, result
    assert result.unique == len(expected), result


# --- kill -9 at five moments -----------------------------------------------------------------------------


class _EvaluationsWritten:
    """How many messages the evaluations topic holds (0 until the consumer created it)."""

    def __init__(self, topics: Topics) -> None:
        self._topics = topics

    def __call__(self) -> int:
        return sum(end_offsets(self._topics.bootstrap, self._topics.evaluations).values())


def _early(
    proc: ConsumerProcess, server: GatedJudgeServer, topics: Topics, offsets: CommittedOffsets
) -> None:
    proc.wait_for_line("assigned partitions")  # every judge reply is held: nothing can be committed yet


def _mid_scoring(
    proc: ConsumerProcess, server: GatedJudgeServer, topics: Topics, offsets: CommittedOffsets
) -> None:
    wait_until(lambda: server.stats.chat_requests >= 4, "4 judge calls in flight")


def _outputs_in_flight(
    proc: ConsumerProcess, server: GatedJudgeServer, topics: Topics, offsets: CommittedOffsets
) -> None:
    # Two judge calls per span: of SPANS + 3 replies let through, at least 3 spans got both, whatever the
    # order; the rest stay in flight.
    server.hold(allow=SPANS + 3)
    wait_until(_EvaluationsWritten(topics), "the first evaluation records on their topic", every_s=0.1)


def _after_commit(
    proc: ConsumerProcess, server: GatedJudgeServer, topics: Topics, offsets: CommittedOffsets
) -> None:
    server.open()
    wait_until(offsets.any, "the group's first committed offset", every_s=0.02)


def _during_shutdown(
    proc: ConsumerProcess, server: GatedJudgeServer, topics: Topics, offsets: CommittedOffsets
) -> None:
    wait_until(lambda: server.stats.chat_requests >= 1, "a judge call in flight")
    proc.terminate()
    proc.wait_for_line("stopping: finishing")  # draining, judge replies still held


MOMENTS: dict[str, Callable[[ConsumerProcess, GatedJudgeServer, Topics, CommittedOffsets], None]] = {
    "early": _early,
    "mid_scoring": _mid_scoring,
    "outputs_in_flight": _outputs_in_flight,
    "after_commit": _after_commit,
    "during_shutdown": _during_shutdown,
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_kill_9_then_a_restart_finishes_the_topic_with_nothing_lost(
    moment: str, topics: Topics, judge_server: GatedJudgeServer
) -> None:
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS))
    expected = rag_spans_on(topics.bootstrap, topics.spans)
    assert len(expected) == SPANS
    judge_server.hold()
    proc = ConsumerProcess(topics.cli_args(base_url=judge_server.base_url, idle_timeout_s=60))
    offsets = CommittedOffsets(topics)
    try:
        MOMENTS[moment](proc, judge_server, topics, offsets)
        proc.kill()
        committed_at_kill = offsets.any()
    finally:
        offsets.close()
    if moment == "early":
        assert not committed_at_kill, "killed before the first commit"
    if moment == "after_commit":
        assert committed_at_kill
    records_at_kill = len(read_topic(topics.bootstrap, topics.evaluations))

    _finish(topics, judge_server, expected)

    _assert_nothing_lost(f"kill -9 {moment}", topics, expected, records_before_restart=records_at_kill)


# --- SIGTERM drain ---------------------------------------------------------------------------------------


def test_sigterm_finishes_the_judge_calls_in_flight_commits_them_and_exits_0(
    topics: Topics, judge_server: GatedJudgeServer
) -> None:
    admin = KafkaAdminClient(bootstrap_servers=topics.bootstrap)
    admin.create_topics([NewTopic(topics.spans, 1, 1)])  # one partition: "all committed" is one offset
    admin.close()
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=4))
    expected = rag_spans_on(topics.bootstrap, topics.spans)
    judge_server.hold()
    proc = ConsumerProcess(topics.cli_args(base_url=judge_server.base_url, idle_timeout_s=60))
    wait_until(lambda: judge_server.stats.chat_requests >= 4, "all 4 interactions at the judge")

    proc.terminate()
    proc.wait_for_line("stopping: finishing 4 interactions being scored")
    judge_server.open()

    assert proc.wait() == 0, proc.log
    assert "scored=4" in proc.log
    assert len(read_topic(topics.bootstrap, topics.evaluations)) == 4, "each finished and emitted once"
    assert_all_committed(topics.bootstrap, topics.group, topics.spans)
    restart = _finish(topics, judge_server, expected)
    assert "scored=0" in restart.log, "nothing left to read again after a drained stop"
    _assert_nothing_lost("SIGTERM drain (judge calls in flight)", topics, expected)


def test_sigterm_with_the_broker_gone_exits_within_the_stop_budget_saying_what_is_read_again(
    own_broker: KafkaBroker, topic_prefix: str, judge_server: GatedJudgeServer
) -> None:
    """The closing commit waits at most --close-timeout (2 s here), not kafka-python's 30 s request timeout,
    then says in one line which offsets were not committed and that they are read again on restart. The
    broker goes while the stop drains its judge calls (not while the loop polls, which would be an error)."""
    topics = Topics(own_broker.bootstrap_servers, topic_prefix)
    admin = KafkaAdminClient(bootstrap_servers=topics.bootstrap)
    admin.create_topics([NewTopic(topics.spans, 1, 1)])
    admin.close()
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=4))
    judge_server.hold(allow=2)  # one interaction scored: the producer knows the output topics
    # No periodic commit after the first: the stop's is the one that meets the broker gone. The drain waits
    # for the acknowledgements of the records the call held sends, which never come: --drain-timeout ends it
    # (the default, 60 s, only made the test wait), long after the broker is gone (stopped right after the
    # stop begins: the drain cannot end before the judge lets the call held go, after that).
    args = ("--commit-interval", "600", "--close-timeout", "2", "--ack-timeout", "1", "--max-in-flight", "1")
    args += ("--drain-timeout", "10")
    args += (
        "--status-interval",
        "0",
    )  # a status line asks the broker for the lag
    proc = ConsumerProcess(topics.cli_args(*args, base_url=judge_server.base_url, idle_timeout_s=600))
    wait_until(lambda: len(read_topic(topics.bootstrap, topics.evaluations, 1)) >= 1, "the first record")
    wait_until(lambda: judge_server.stats.chat_requests >= 3, "the next judge call held")
    proc.terminate()
    proc.wait_for_line("stopping: finishing 1 interaction")  # the drain waits for the call held
    own_broker.stop()
    judge_server.open()  # the drain ends; its records are sent and never acknowledged

    assert proc.wait() == 0, proc.log  # within WAIT_S, a generous bound; the old wait was 30 s
    said = [line for line in proc.lines if "stopped without committing" in line]
    assert len(said) == 1, proc.log
    assert f"{topics.spans}[0] up to offset " in said[0] and "--close-timeout" in said[0], said
    assert "read and scored again (at least once)" in said[0], said
    assert "retrying at the next commit" not in proc.log and "before the rebalance" not in proc.log


# --- the broker restarted, a rebalance ----------------------------------------------------------------------


def test_broker_stopped_and_restarted_mid_stream(own_broker: KafkaBroker, topic_prefix: str) -> None:
    topics = Topics(own_broker.bootstrap_servers, topic_prefix)
    with GatedJudgeServer() as server:
        run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS))
        server.hold()
        # Idleness counts only once the judge calls held through the restart are done, and a stream not read
        # to its end (or a broker still gone) is never idle: 5 s of it is a clean end, not a lucky one.
        proc = ConsumerProcess(topics.cli_args(base_url=server.base_url, idle_timeout_s=5))
        wait_until(lambda: server.stats.chat_requests >= 4, "judge calls in flight")

        own_broker.restart()  # same data, same port
        run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=10))  # the stream goes on
        server.open()
        first_exit = proc.wait()
        errors = [line for line in proc.lines if line.startswith("Error:")]
        # A restart well inside the producer's retries (2 minutes) is ridden through: no error, exit 0.
        assert first_exit == 0 and errors == [], f"the member did not ride through the restart:\n{proc.log}"
        expected = rag_spans_on(topics.bootstrap, topics.spans)
        assert len(expected) == SPANS + 10

        _finish(topics, server, expected)

    _assert_nothing_lost(
        "broker restarted mid-stream", topics, expected, first_run_exit=first_exit, first_run_error=errors
    )


def test_a_member_joining_then_one_killed_rebalances_with_nothing_lost(
    topics: Topics, judge_server: GatedJudgeServer
) -> None:
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS))
    expected = rag_spans_on(topics.bootstrap, topics.spans)
    judge_server.hold()
    first = ConsumerProcess(topics.cli_args(base_url=judge_server.base_url, idle_timeout_s=60))
    first.wait_for_line("assigned partitions")
    wait_until(lambda: judge_server.stats.chat_requests >= 1, "the first member scoring")
    # No idle exit: the test stops the survivor once it took the dead member's partitions over and every
    # span has a record (an idle exit had to outlive the dead member's session, then idled 20 s more).
    second = ConsumerProcess(topics.cli_args(base_url=judge_server.base_url, idle_timeout_s=600))
    second.wait_for_line("assigned partitions")
    first.wait_for_line("revoked partitions")  # the group rebalanced over both

    first.kill()
    judge_server.open()

    second.wait_for_line("assigned partitions", times=2)
    wait_until(
        lambda: outcome(topics, expected).lost == 0 or second.process.poll() is not None,
        "every span scored",
        every_s=0.5,
    )
    second.terminate()
    assert second.wait() == 0, second.log
    assert second.count("assigned partitions") >= 2, "the survivor took the dead member's partitions"
    # The survivor kept its own partitions through both rebalances: it read again what it had dropped on
    # revoke, so it commits everything itself.
    assert_all_committed(topics.bootstrap, topics.group, topics.spans, first.log, second.log)
    _assert_nothing_lost("rebalance: member joins, one killed", topics, expected)


# --- a judge failing 30% of calls -------------------------------------------------------------------------


def test_a_judge_failing_30_percent_of_calls(topics: Topics) -> None:
    faults = (Fault.RATE_LIMIT, Fault.SERVER_ERROR, Fault.TIMEOUT, Fault.INVALID_JSON, Fault.TRUNCATED)
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=40))
    expected = rag_spans_on(topics.bootstrap, topics.spans)
    with FlakyJudgeServer(every=(0, 3, 6), period=10, faults=faults, timeout_sleep_s=3) as server:
        judge = judge_client(server.base_url, timeout_s=1, max_retries=1, retry_base_s=0.01, retry_max_s=0.05)
        stats = EvaluationConsumer(topics.settings(), judge=judge, metrics=[Faithfulness()]).run()
        served = dict(server.served)
        calls = server.stats.chat_requests

    assert set(served) == set(faults), served
    assert sum(served.values()) * 10 >= calls * 3 - 10, "about 30% of calls failed"
    # One metric: an interaction the judge failed on has one record, status=error, and no score.
    assert stats.scored + stats.unscored == 40 and stats.unscored == stats.judge_errors
    assert_all_committed(topics.bootstrap, topics.group, topics.spans)
    result = outcome(topics, expected)
    result.extra.update(judge_calls=calls, faults=served, judge_errors=stats.judge_errors)
    report("judge failing 30% of calls", result)
    assert result.lost == 0 and result.unexplained == 0, result
    assert result.explained_errors == stats.judge_errors
