"""`ConversationService` on the real broker: a turn after the record was written revises it, across a
restart; a conversation whose turns straddle a restart is recorded once, whole; two instances split the
conversations and record each once, also while members join and leave around every batch; bad records are
counted, never a stop; a broker restart mid-stream loses and repeats no record."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _helpers import not_found_errors, partitions_on_broker, wait_until
from conversation_service import SERVICE_WAIT_S, Running, config, on_topic, produce
from conversation_turns import turn
from group_diagnostics import GroupDiagnostics, member_partitions
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from tracescore.consume import decode_message
from tracescore.emit import EVALUATION_SPANS_HEADER
from tracescore.model import EvaluationRecord, read_evaluation_record
from tracescore.testing.kafka_broker import KafkaBroker
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka


@pytest.fixture
def diagnosed(bootstrap: str) -> Iterator[GroupDiagnostics]:
    """What each member logged and holds, said when a wait inside its `explained()` fails."""
    diagnostics = GroupDiagnostics(bootstrap)
    yield diagnostics
    diagnostics.close()


def watched(diagnostics: GroupDiagnostics, name: str, running: Running) -> Running:
    """`running`, not started yet, named `name` in what `diagnostics` says."""
    diagnostics.member(name, running.service._loop, running.thread)
    return running


def test_inputs_not_written_yet_are_waited_for_and_never_created(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Started before `tracescore consume` wrote a record (or given a misspelt topic), the service created the
    topics it reads, with the broker's defaults: a misspelt name was left on the broker. It waits for their
    writer now, says so once for each (kafka-python's ERROR that a topic is not found, repeated while it
    waits, is not logged) and reads each once it appears, the other still waited for. Its turns and state
    topics are its own, made at start: partitioned as turns_partitions says, whatever its inputs'."""
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0)
    evaluations, evidence = cfg.evaluations_topic, str(cfg.evidence_topic)
    with Running(cfg) as running:
        # Stage 2 is assigned once both stages subscribed and polled: stage 1 looked for its topics.
        wait_until(lambda: running.service.first_assigned_at is not None, "the turns topic's partitions")
        for topic in (evaluations, evidence):
            assert partitions_on_broker(bootstrap, topic) is None, "the service created a topic it reads"
            assert f"the topic {topic} that tracescore conversations reads does not exist" in caplog.text
        assert partitions_on_broker(bootstrap, cfg.state_topic) == cfg.turns_partitions
        input_producer(bootstrap, [NewTopic(evaluations, 2, 1)]).close()  # what `tracescore consume` does
        produce(bootstrap, evaluations, [turn(1, 1.0), turn(2, 1.0)])
        wait_until(lambda: len(running.written) == 1, "the conversation's record", timeout_s=SERVICE_WAIT_S)
    assert partitions_on_broker(bootstrap, evidence) is None, "still not written: still not there"
    assert partitions_on_broker(bootstrap, cfg.turns_topic) == cfg.turns_partitions
    assert partitions_on_broker(bootstrap, cfg.state_topic) == cfg.turns_partitions
    assert not_found_errors(caplog.text) == []


def test_a_later_turn_revises_the_record_across_a_restart(bootstrap: str, topic_prefix: str) -> None:
    cfg = config(bootstrap, topic_prefix)
    produce(bootstrap, cfg.evaluations_topic, [turn(1, 1.0), turn(2, 1.0)])
    with Running(cfg) as first:
        wait_until(lambda: len(first.written) == 1, "the first conversation record", timeout_s=SERVICE_WAIT_S)
        # The first turn of another conversation, read but not quiet yet when the instance stops.
        produce(bootstrap, cfg.evaluations_topic, [turn(10, 1.0, "c-2")])
        wait_until(
            lambda: first.service.stats.turn_records == 3, "the 3 turns read", timeout_s=SERVICE_WAIT_S
        )
    [record] = first.written
    assert (record.revision, record.turns, record.label) == (0, 2, "passed")

    # Days later in the conversation's life (within forget_seconds): an unfaithful third turn, and the
    # second conversation's next turn.
    produce(bootstrap, cfg.evaluations_topic, [turn(3, 0.0), turn(11, 1.0, "c-2")])
    with Running(cfg) as second:
        wait_until(lambda: len(second.written) == 2, "the second run's 2 records", timeout_s=SERVICE_WAIT_S)
    revised = next(r for r in second.written if r.conversation_id == "c-1")
    assert (revised.revision, revised.supersedes, revised.turns, revised.label) == (1, 0, 3, "flagged")
    assert revised.started_at == record.started_at
    c2 = next(r for r in second.written if r.conversation_id == "c-2")
    assert (c2.revision, c2.turns) == (0, 2), "recorded once, whole, though its turns straddle the restart"
    # Each record also went out as an evaluation span under its conversation's last turn, marked so that
    # `tracescore consume` skips it.
    spans = [
        (span, dict(m.headers))
        for m in read_topic(bootstrap, str(cfg.spans_topic))
        for span in decode_message(m.value)
    ]
    assert len(spans) == 3 and all(headers.get(EVALUATION_SPANS_HEADER) == b"1" for _, headers in spans)
    last = next(span for span, _ in spans if span.attributes.get("tracescore.evaluation.revision") == 1)
    assert (last.name, last.trace_id, last.parent_span_id) == (
        "evaluation conversation_faithfulness",
        f"{3:032x}",
        f"{3:016x}",
    )
    assert last.attributes["session.id"] == "c-1"
    assert sorted((r.conversation_id, r.revision) for r in on_topic(bootstrap, cfg)) == [
        ("c-1", 0),
        ("c-1", 1),
        ("c-2", 0),
    ]


def test_two_instances_split_the_conversations_and_record_each_once(
    bootstrap: str, topic_prefix: str
) -> None:
    cfg = config(bootstrap, topic_prefix)
    conversations = [f"c-{i}" for i in range(8)]
    with Running(cfg) as first, Running(cfg) as second:
        wait_until(
            lambda: (
                first.service.first_assigned_at is not None and second.service.first_assigned_at is not None
            ),
            "both members assigned",
            timeout_s=SERVICE_WAIT_S,
        )
        produce(
            bootstrap,
            cfg.evaluations_topic,
            [turn(10 * i + n, 1.0, c) for i, c in enumerate(conversations) for n in range(3)],
        )
        wait_until(
            lambda: len(first.written) + len(second.written) == len(conversations),
            "a record for each conversation",
            timeout_s=SERVICE_WAIT_S,
        )
    written = first.written + second.written
    assert sorted(r.conversation_id for r in written) == conversations
    assert all(r.turns == 3 for r in written)
    assert first.written and second.written, "both instances owned some"


def stage_one_owners(bootstrap: str, group: str) -> list[set[str]]:
    """The partitions of each member of stage 1's group (`topic[partition]`), as the broker describes it."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        members = (admin.describe_groups([group]).get(group) or {}).get("members") or []
    finally:
        admin.close()
    return [member_partitions(member) for member in members]


def test_two_members_started_before_both_inputs_exist_share_them_once_each_appears(
    bootstrap: str, topic_prefix: str
) -> None:
    """Two replicas deployed before anything was written: the evaluations topic appears, then later the
    evidence topic. Each appearance extends both members' subscription (a rejoin); both end up owning
    partitions of each (kafka-python 3.0.12 left the one whose rejoin outlasted its poll out of the group for
    good, once in 12 runs under load: tracescore/_service/_awaited.py), and every conversation is written
    exactly once."""
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0)
    evaluations, evidence = cfg.evaluations_topic, str(cfg.evidence_topic)
    everything = {f"{t}[{p}]" for t in (evaluations, evidence) for p in range(2)}

    def shared(topics: set[str]) -> bool:
        owners = stage_one_owners(bootstrap, cfg.group_id)
        return len(owners) == 2 and all(owners) and set().union(*owners) == topics

    def batch(name: str, base: int) -> list[EvaluationRecord | bytes]:
        return [turn(base + 10 * i + n, 1.0, f"{name}-{i}") for i in range(6) for n in range(3)]

    with Running(cfg) as first, Running(cfg) as second:
        wait_until(
            lambda: first.service.first_assigned_at and second.service.first_assigned_at,
            "both members waiting for their inputs",
            timeout_s=SERVICE_WAIT_S,
        )
        input_producer(bootstrap, [NewTopic(evaluations, 2, 1)]).close()
        wait_until(lambda: shared({f"{evaluations}[{p}]" for p in range(2)}), "the evaluations topic shared")
        produce(bootstrap, evaluations, batch("a", 0))
        input_producer(bootstrap, [NewTopic(evidence, 2, 1)]).close()
        wait_until(lambda: shared(everything), "both inputs shared", timeout_s=SERVICE_WAIT_S)
        produce(bootstrap, evaluations, batch("b", 1000))
        wait_until(
            lambda: len(first.written) + len(second.written) >= 12,
            "a record for each conversation",
            timeout_s=SERVICE_WAIT_S,
        )
    written = sorted((r.conversation_id, r.revision, r.turns) for r in on_topic(bootstrap, cfg))
    assert written == sorted((f"{name}-{i}", 0, 3) for name in "ab" for i in range(6))


@pytest.mark.parametrize("protocol", ["cooperative", "eager"])
def test_an_instance_joining_and_leaving_moves_only_the_partitions_that_change_owner(
    bootstrap: str, topic_prefix: str, protocol: str
) -> None:
    """Cooperative rebalancing (the default): the first instance keeps reading the partitions it keeps and
    reads back the state of those it gets, never of those it had. Eager: every rebalance reads back all.
    Both start before their inputs exist, which appear once both wait: two replicas deployed before anything
    was written (one of them, once elected leader of a rebalance it never finished, was left out for good)."""
    cfg = config(bootstrap, topic_prefix, rebalance_protocol=protocol)
    with Running(cfg) as first:
        wait_until(
            lambda: first.service.first_assigned_at is not None,
            "the first member assigned",
            timeout_s=SERVICE_WAIT_S,
        )
        with Running(cfg) as second:
            wait_until(
                lambda: second.service.first_assigned_at is not None,
                "the second member assigned",
                timeout_s=SERVICE_WAIT_S,
            )
            produce(bootstrap, cfg.evaluations_topic, [turn(n, 1.0, f"c-{n}") for n in range(12)])
            wait_until(
                lambda: len(first.written) + len(second.written) == 12,
                "12 records from the two members",
                timeout_s=SERVICE_WAIT_S,
            )
        # The first owns every partition again once it wrote conversations from each.
        produce(bootstrap, cfg.evaluations_topic, [turn(12 + n, 1.0, f"late-{n}") for n in range(12)])
        wait_until(
            lambda: len(first.written) + len(second.written) == 24,
            "24 records from the two members",
            timeout_s=SERVICE_WAIT_S,
        )
    later = {f"late-{n}" for n in range(12)}
    partitions = {
        m.partition
        for m in read_topic(bootstrap, cfg.turns_topic)
        if read_evaluation_record(m.value).session_id in later
    }
    assert len(partitions) == 6, "the later conversations sit on every partition"
    # 6 partitions at the start, 3 handed back when the second left (eager: 6 + 3 + 6, or more).
    read = first.service.stats.state["partitions_read"]
    assert read == 9 if protocol == "cooperative" else read > 9, read
    second_read = second.service.stats.state["partitions_read"]
    assert second_read == 3 if protocol == "cooperative" else second_read >= 3, second_read


def test_bad_records_are_counted_and_the_service_goes_on(bootstrap: str, topic_prefix: str) -> None:
    cfg = config(bootstrap, topic_prefix, max_turns=5)
    produce(
        bootstrap,
        cfg.evaluations_topic,
        [b"not json", b'{"schema_version": 99}', turn(1, 1.0, conversation=None)]
        + [turn(n, 1.0, "shared-by-everyone") for n in range(1, 9)],
    )
    with Running(cfg) as running:
        wait_until(lambda: len(running.written) == 1, "the conversation record", timeout_s=SERVICE_WAIT_S)
    [record] = running.written
    assert (record.turns, record.records_past_cap) == (5, 3)
    stats = running.service.stats
    assert stats.skipped == {
        "invalid_record": 1,
        "unknown_schema_version": 1,
        "no_conversation": 1,
        "records_past_cap": 3,
    }


def test_a_broker_restart_mid_stream_loses_and_repeats_no_record(
    own_broker: KafkaBroker, topic_prefix: str
) -> None:
    bootstrap = own_broker.bootstrap_servers
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0)
    before, after = [f"a-{i}" for i in range(6)], [f"b-{i}" for i in range(6)]

    def turns(conversations: list[str], base: int) -> list[EvaluationRecord | bytes]:
        return [turn(base + 10 * i + n, 1.0, c) for i, c in enumerate(conversations) for n in range(3)]

    produce(bootstrap, cfg.evaluations_topic, turns(before, 0))
    with Running(cfg) as running:
        wait_until(
            lambda: len(running.written) >= 1, "the first record", timeout_s=SERVICE_WAIT_S
        )  # records and states being written
        own_broker.restart()  # same data, same port
        produce(bootstrap, cfg.evaluations_topic, turns(after, 1000))  # the stream goes on
        wait_until(
            lambda: len(running.written) >= len(before + after),
            "a record for each conversation, before and after",
            timeout_s=240,
        )
    written = sorted((r.conversation_id, r.revision, r.turns) for r in on_topic(bootstrap, cfg))
    assert written == sorted((c, 0, 3) for c in before + after)


# A storm member's timeouts, well inside the test's shortest wait (SERVICE_WAIT_S): one that stops
# heartbeating, or heartbeats but stops polling, is out of the group and its partitions given to the others
# before a wait gives up (the defaults, 45 s and 300 s, outlast the waits).
STORM_MEMBER = {"session_timeout_ms": 20_000, "max_poll_interval_ms": 60_000}
assert sum(STORM_MEMBER.values()) / 1000 < SERVICE_WAIT_S


def test_members_joining_and_leaving_in_turn_write_every_conversation_once(
    bootstrap: str, topic_prefix: str, diagnosed: GroupDiagnostics
) -> None:
    """A rebalance storm: a second and a third instance join and leave around every batch of turns, leaving
    while its conversations are being written. None is lost or written twice."""
    cfg = config(bootstrap, topic_prefix, quiet_seconds=1.0, **STORM_MEMBER)
    batches = [[f"s{b}-{i}" for i in range(6)] for b in range(4)]
    with watched(diagnosed, "steady", Running(cfg)) as steady, diagnosed.explained():
        wait_until(
            lambda: steady.service.first_assigned_at is not None,
            "the steady member assigned",
            timeout_s=SERVICE_WAIT_S,
        )
        for b, batch in enumerate(batches):
            with (
                watched(diagnosed, f"second-{b}", Running(cfg)) as second,
                watched(diagnosed, f"third-{b}", Running(cfg)) as third,
            ):
                members = (steady, second, third)
                wait_until(
                    lambda: None not in (second.service.first_assigned_at, third.service.first_assigned_at),
                    "the second and third members assigned",
                    timeout_s=SERVICE_WAIT_S,
                )
                turns = [turn(1000 * b + 10 * i + n, 1.0, c) for i, c in enumerate(batch) for n in range(3)]
                produce(bootstrap, cfg.evaluations_topic, turns)
                wait_until(
                    lambda: any(r.conversation_id in batch for m in members for r in m.written),  # noqa: B023
                    "a record of the batch from a member",
                    timeout_s=SERVICE_WAIT_S,
                )
        expected = sorted(c for batch in batches for c in batch)
        # Every conversation, counted once: a repeat must not end the wait before the last one is written.
        wait_until(
            lambda: {r.conversation_id for r in on_topic(bootstrap, cfg)} >= set(expected),
            "every expected conversation on the topic",
            timeout_s=180,
        )
    records = on_topic(bootstrap, cfg)
    written = [r.conversation_id for r in records]
    assert sorted(set(written)) == expected  # none lost
    twice = sorted({c for c in written if written.count(c) > 1})
    assert not twice, f"written twice in a rebalance storm: {twice}"
    assert all((r.revision, r.turns) == (0, 3) for r in records), "each written once, whole"
