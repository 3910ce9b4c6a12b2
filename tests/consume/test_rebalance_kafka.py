"""Members joining and leaving a group during a run, through the real broker: every interaction is scored
exactly once (a crash is different: at least once, see test_faults.py).

The members are real `tracescore consume` processes judging through the local judge server, whose replies
the test lets through a few at a time: every join and leave lands while judge calls are in flight, traces
are buffered and queued, whatever the machine's speed. Nothing here waits on a clock; each step waits for a
condition (a log line, records on the topic) with a generous bound.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import pytest
from _helpers import WAIT_S, paused, wait_until
from fault_helpers import APP, ConsumerProcess, GatedJudgeServer, Topics, outcome, rag_spans_on, report
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.coordinator.consumer import ConsumerCoordinator
from kafka.errors import KafkaTimeoutError
from kafka_helpers import ConsumerFactory, end_offsets, run_instrumented_app

from tracescore.model import EvaluationRecord
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import read_topic

pytestmark = pytest.mark.kafka

SPANS = 60
PARTITIONS = 6
REVOKE_TIMEOUT_S = 2
STEP = 20  # judge replies let through between two membership changes (about two per interaction)
SESSION_MS, MAX_POLL_INTERVAL_MS = 30_000, 60_000  # a member's timeouts: see `Group.args`
assert (SESSION_MS + MAX_POLL_INTERVAL_MS) / 1000 < WAIT_S


class Group:
    """The members of one run, all alike but for the protocol they share."""

    def __init__(self, topics: Topics, server: GatedJudgeServer, protocol: str) -> None:
        self.topics, self.server, self.protocol = topics, server, protocol
        self.members: list[ConsumerProcess] = []

    def args(self) -> list[str]:
        return self.topics.cli_args(
            # No idle exit: the test says when each member goes. A session long enough that a member
            # waiting on its revoke (at most --revoke-timeout) never loses the group on a slow machine; it
            # and the rebalance timeout (max.poll.interval) within the test's waits (WAIT_S): a member that
            # stops polling is out of the group before a wait gives up (300 s by default).
            "--rebalance-protocol", self.protocol, "--revoke-timeout", str(REVOKE_TIMEOUT_S),
            "--drain-timeout", "2", "--max-in-flight", "2", "--session-timeout-ms", str(SESSION_MS),
            "--max-poll-interval-ms", str(MAX_POLL_INTERVAL_MS),
            base_url=self.server.base_url, idle_timeout_s=600,
        )  # fmt: skip

    def start(self) -> ConsumerProcess:
        """A new member, once it was given partitions."""
        member = ConsumerProcess(self.args())
        self.members.append(member)
        member.wait_for_line("assigned partitions")
        return member

    def leave(self, member: ConsumerProcess) -> None:
        member.terminate()
        assert member.wait() == 0, member.log

    def written(self) -> int:
        return sum(end_offsets(self.topics.bootstrap, self.topics.evaluations).values())

    def progress(self) -> None:
        """Let STEP more judge replies through and wait until records follow (some replies may go to calls
        whose trace was handed over, whose results are dropped)."""
        before = self.written()
        self.server.hold(allow=STEP)
        wait_until(lambda: self.written() >= before + 3, "records after the membership change")

    def finish(self, last: ConsumerProcess) -> None:
        """Every reply let through; once every span has a record, the last member leaves too."""
        self.server.open()
        wait_until(
            lambda: _spans_scored(self.topics) >= SPANS or last.process.poll() is not None,
            "every span scored",
            every_s=0.5,
        )
        self.leave(last)

    def assert_each_scored_once(self, what: str) -> None:
        expected = rag_spans_on(self.topics.bootstrap, self.topics.spans)
        assert len(expected) == SPANS
        result = outcome(self.topics, expected)
        report(f"rebalance ({self.protocol}): {what}", result)
        log = "\n\n".join(member.log for member in self.members)
        assert result.lost == 0 and result.unexplained == 0, (result, log)
        if result.duplicated or result.records != len(expected):
            # pytest.fail, not an assert message: pytest shortens those, and this one must say it all.
            pytest.fail(f"{result}\n{self._what_moved()}", pytrace=False)

    def _what_moved(self) -> str:
        """For a failure: the traces written twice and every member's rebalance lines, whole (a member's
        `log` is its last lines only), so that a failure under load says which interleaving it was."""
        keys = Counter(
            r.trace_id
            for r in map(EvaluationRecord.model_validate_json, (m.value for m in read_topic(
                self.topics.bootstrap, self.topics.evaluations
            )))
        )  # fmt: skip
        twice = sorted(trace_id[:8] for trace_id, n in keys.items() if n > 1)
        words = ("partitions", "rebalance", "commit", "acknowledged", "handover", "stopped", "scored=")
        members = [
            "\n".join(line for line in member.lines if any(word in line for word in words))
            for member in self.members
        ]
        return f"written twice: {twice}\n\n" + "\n\n".join(members)


def _spans_scored(topics: Topics) -> int:
    values = (m.value for m in read_topic(topics.bootstrap, topics.evaluations))
    return len({(r.trace_id, r.span_id) for r in map(EvaluationRecord.model_validate_json, values)})


def _topics(bootstrap: str, topic_prefix: str) -> Topics:
    topics = Topics(bootstrap, topic_prefix)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topics.spans, PARTITIONS, 1)])
    admin.close()
    return topics


@pytest.fixture
def topics(bootstrap: str, topic_prefix: str) -> Topics:
    return _topics(bootstrap, topic_prefix)


@pytest.fixture(params=["eager", "cooperative"])
def group(topics: Topics, judge_server: GatedJudgeServer, request: pytest.FixtureRequest) -> Group:
    """A group rebalancing as the test's parameter says: its spans on the topic, no member yet, STEP judge
    replies let through."""
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS))
    judge_server.hold(allow=STEP)
    return Group(topics, judge_server, request.param)


def test_two_then_three_members_joining_and_leaving_score_every_interaction_once(group: Group) -> None:
    first = group.start()
    wait_until(lambda: group.written() >= 3, "the first records")

    second = group.start()  # two members: the first hands partitions over with judge calls in flight
    first.wait_for_line("revoked partitions")
    group.progress()
    third = group.start()  # three
    group.progress()
    group.leave(second)  # a clean leave: its work in flight goes to the others
    group.progress()
    group.leave(third)
    group.finish(first)

    if group.protocol == "eager":  # every partition revoked while judge replies were held
        assert first.count("left to the next owner") >= 1, f"nothing in flight at a revoke:\n{first.log}"
    group.assert_each_scored_once("2 then 3 members join and leave")


def test_a_rebalance_storm_loses_nothing_and_scores_nothing_twice(group: Group) -> None:
    steady = group.start()
    for _ in range(4):  # a member joining (given partitions) and leaving again, as fast as it can start
        group.leave(group.start())
        group.server.hold(allow=STEP // 2)
    group.finish(steady)

    group.assert_each_scored_once("a storm: a member joins and leaves 4 times")


def test_a_member_rebalancing_otherwise_than_its_group_is_refused_with_one_clear_error(
    topics: Topics,
) -> None:
    older = ConsumerProcess(topics.cli_args("--rebalance-protocol", "eager", idle_timeout_s=600))
    older.wait_for_line("assigned partitions")
    newer = ConsumerProcess(topics.cli_args(idle_timeout_s=600))  # cooperative, the default
    try:
        assert newer.wait() == 1, newer.log
    finally:
        older.terminate()
    assert older.wait() == 0, older.log
    errors = [line for line in newer.lines if line.startswith("Error:")]
    assert len(errors) == 1 and "--rebalance-protocol eager" in errors[0], newer.log
    assert "Traceback" not in newer.log


def test_records_sent_during_a_revoke_and_acknowledged_late_are_not_handed_over(
    own_broker: KafkaBroker, topic_prefix: str, judge_server: GatedJudgeServer
) -> None:
    """A loaded machine's interleaving, made certain: during an eager revoke the judge calls running finish
    and their records are sent, but Kafka acknowledges them only after the revoke's judge deadline (here the
    broker is paused past it). A record sent cannot be taken back: were its trace handed over, the next owner
    would score it again. The member waits for the acknowledgements (up to half the session) instead."""
    topics = _topics(own_broker.bootstrap_servers, topic_prefix)
    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS))
    judge_server.hold(allow=STEP)
    group = Group(topics, judge_server, "eager")
    first = group.start()
    wait_until(lambda: group.written() >= 3, "the first records")
    judge_server.hold()  # the first member's calls in flight stay there

    group.members.append(ConsumerProcess(group.args()))  # joins: the first revokes every partition
    first.wait_for_line("revoked partitions")
    with paused(own_broker.process.pid):
        judge_server.open()  # the running calls finish; their records are sent, not acknowledged
        time.sleep(2 * REVOKE_TIMEOUT_S)  # past the revoke's judge deadline (not a timing assert)

    wait_until(lambda: _spans_scored(topics) >= SPANS, "every span scored", every_s=0.5)
    for member in group.members:
        group.leave(member)
    group.assert_each_scored_once("records acknowledged after the revoke's deadline")


@pytest.mark.parametrize("answered", [True, False], ids=["answered", "not-answered"])
@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_a_member_reads_its_partitions_committed_offsets_in_one_request(
    topics: Topics,
    consumer_for: ConsumerFactory,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    protocol: str,
    answered: bool,
) -> None:
    """A member given partitions asked the group's coordinator for one partition's committed offset at a
    time (the consumer's `committed`): as many round trips as partitions assigned (6 here) before it took
    any of their messages. The coordinator's real fetch is watched, not replaced; a broker that does not
    answer is that fetch timing out: each partition then says so, and is read all the same (nothing
    committed is scored again: kafka-python's own position starts at the committed offset)."""
    asked: list[list[int]] = []
    real_fetch = ConsumerCoordinator.fetch_committed_offsets

    def fetch(self: ConsumerCoordinator, partitions: Any, timeout_ms: Any = None) -> Any:
        asked.append(sorted(tp.partition for tp in partitions))
        if not answered:
            raise KafkaTimeoutError("the test's broker did not answer")
        return real_fetch(self, partitions, timeout_ms=timeout_ms)

    run_instrumented_app(topics.bootstrap, topics.spans, APP.format(n=SPANS // 5))
    monkeypatch.setattr(ConsumerCoordinator, "fetch_committed_offsets", fetch)
    runs = []
    for _ in range(2):  # the second member reads every partition from what the first committed
        member, seen = consumer_for(topics.bootstrap, topics.prefix, rebalance_protocol=protocol)
        member.run()
        runs.append(len(seen))

    assert runs == [SPANS // 5, 0], runs
    assert asked == [list(range(PARTITIONS))] * 2, f"asked for the offsets of {asked}"
    not_read = [r.getMessage() for r in caplog.records if "committed offset (" in r.getMessage()]
    assert len(not_read) == (0 if answered else 2 * PARTITIONS), not_read
