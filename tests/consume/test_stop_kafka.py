"""`tracescore consume` stopped (SIGTERM) with its broker gone and a judge call that never answers: every step
of the stop (the drain, the acknowledgements, the last commit, leaving the group) shares one budget,
`stop_timeout_s` counted from the signal, so the stop ends inside the grace period the Deployment gives
(deploy/k8s/consume.yaml), exit 0, saying what the next start reads again; and the next start does read it
again: nothing lost. Before, each step had a limit of its own (drain 60 s, commit 10 s, producer 30 s,
leaving 10 s): the stop overran the grace period and was killed without a word."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from _helpers import wait_until
from fault_helpers import APP, ConsumerProcess, GatedJudgeServer, Topics, outcome, rag_spans_on
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka_helpers import assert_all_committed, run_instrumented_app

from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "k8s" / "consume.yaml"
GRACE_S = yaml.safe_load(MANIFEST.read_text())["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
STOP_TIMEOUT_S = 10.0  # the drain (default 60 s) is what must give way


def test_a_stop_with_the_broker_gone_and_a_judge_call_hanging_ends_within_the_grace_period_and_loses_nothing(
    own_broker: KafkaBroker, topic_prefix: str, judge_server: GatedJudgeServer
) -> None:
    topics = Topics(own_broker.bootstrap_servers, topic_prefix)
    admin = KafkaAdminClient(bootstrap_servers=topics.bootstrap)
    admin.create_topics([NewTopic(topics.spans, 1, 1)])  # one partition: "all committed" is one offset
    admin.close()
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=4))
    expected = rag_spans_on(topics.bootstrap, topics.spans)
    judge_server.hold(allow=2)  # one interaction scored and written; the next judge call never answers
    # No periodic commit after the first: the stop's is the one that meets the broker gone. Every other
    # limit at its default (drain 60 s, acknowledgements 30 s, commit and leaving 10 s each).
    args = ("--commit-interval", "600", "--max-in-flight", "1", "--status-interval", "0")
    proc = ConsumerProcess(
        topics.cli_args(*args, base_url=judge_server.base_url, idle_timeout_s=600),
        env={"TRACESCORE_STOP_TIMEOUT_S": str(STOP_TIMEOUT_S)},
    )
    wait_until(lambda: len(read_topic(topics.bootstrap, topics.evaluations, 1)) >= 1, "the first record")
    wait_until(lambda: judge_server.stats.chat_requests >= 3, "the next judge call held")
    proc.terminate()
    proc.wait_for_line("stopping: finishing 1 interaction")  # the drain waits for the call held
    own_broker.stop()

    try:
        # The bound is the grace period (6x the budget): the bug was a stop of 80 s and more, killed.
        code = proc.process.wait(GRACE_S)
    except subprocess.TimeoutExpired:
        proc.process.kill()
        pytest.fail(f"still stopping after the {GRACE_S}s grace period:\n{proc.log}")
    assert code == 0, proc.log
    drained = [line for line in proc.lines if "when the drain ran out" in line]
    assert len(drained) == 1, proc.log
    # The line docs/operating/rebalances.md quotes, word for word.
    assert (
        f"stopping: 1 interaction still being scored when the drain ran out (what --stop-timeout "
        f"{STOP_TIMEOUT_S:g}s left the drain) is not committed: the next start reads and scores it again "
        "(at least once, nothing lost)"
    ) in drained[0], drained
    not_committed = [line for line in proc.lines if "stopped without committing" in line]
    assert len(not_committed) == 1 and f"{topics.spans}[0] up to offset " in not_committed[0], proc.log
    assert "read and scored again (at least once)" in not_committed[0], not_committed

    own_broker.start()  # the same address
    judge_server.open()
    restart = ConsumerProcess(topics.cli_args(base_url=judge_server.base_url))
    assert restart.wait() == 0, restart.log
    assert_all_committed(topics.bootstrap, topics.group, topics.spans)
    result = outcome(topics, expected)
    # What the stop did not commit was read and scored again: every span scored, the first one twice.
    assert result.lost == 0 and result.unexplained == 0 and result.unique == len(expected), result
