"""Whole traces through the real broker: a trace split over messages is scored once, with what every part
carries; offsets never pass a buffered trace, so a stop or crash replays it."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter
from typing import Any

import pytest
from _helpers import WAIT_S, wait_until
from _members import GuardedMember
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka_helpers import assert_all_committed, committed, end_offsets, make_consumer, produce
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracescore.consume import AssemblySettings, EvaluationConsumer
from tracescore.model import EvaluationRecord

pytestmark = pytest.mark.kafka

KIND = "openinference.span.kind"
QUESTION = "How long does the Aurora X2 battery last?"
DOC = "The Aurora X2 battery lasts 14 hours on a single charge."


def openinference_trace(answer: str) -> list[ReadableSpan]:
    """CHAIN -> RETRIEVER, LLM, as an OpenInference-instrumented chain writes them (children end first)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "shop-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("openinference.instrumentation.langchain")
    with tracer.start_as_current_span("RunnableSequence") as chain:
        chain.set_attributes({KIND: "CHAIN", "input.value": QUESTION, "output.value": answer})
        with tracer.start_as_current_span("VectorStoreRetriever") as retriever:
            retriever.set_attributes(
                {KIND: "RETRIEVER", "input.value": QUESTION, "retrieval.documents.0.document.content": DOC}
            )
        with tracer.start_as_current_span("ChatModel") as llm:
            llm.set_attributes({KIND: "LLM", "llm.output_messages.0.message.content": answer})
    spans = list(exporter.get_finished_spans())
    assert [s.name for s in spans] == ["VectorStoreRetriever", "ChatModel", "RunnableSequence"]
    return spans


def messages(spans: list[ReadableSpan]) -> list[tuple[bytes, bytes]]:
    """One Kafka message per span, keyed by trace id as the Collector keys them."""
    return [
        (format(s.context.trace_id, "032x").encode(), encode_spans([s]).SerializeToString()) for s in spans
    ]


def consumer_for(
    bootstrap: str, prefix: str, **overrides: object
) -> tuple[EvaluationConsumer, list[EvaluationRecord]]:
    return make_consumer(
        bootstrap, prefix, **{"evaluation_spans_topic": f"{prefix}.evaluation-spans", **overrides}
    )


wait_for = wait_until


@pytest.mark.parametrize(
    ("answer", "direction"),
    [
        pytest.param("The Aurora X2 battery lasts 14 hours.", "faithful", id="faithful"),
        pytest.param("The Aurora X2 battery lasts 40 hours.", "hallucinated", id="unfaithful"),
    ],
)
def test_a_trace_split_over_messages_is_scored_once_on_its_answering_span(
    bootstrap: str, topic_prefix: str, answer: str, direction: str
) -> None:
    spans = openinference_trace(answer)
    produce(bootstrap, f"{topic_prefix}.spans", messages(spans))
    consumer, seen = consumer_for(bootstrap, topic_prefix)

    stats = consumer.run()

    [record] = seen
    chain = spans[-1]
    assert record.span_id == format(chain.context.span_id, "016x"), "scored on the CHAIN, not the retriever"
    assert record.convention == "openinference" and record.label == direction
    assert stats.messages == 3 and stats.traces == 1 and stats.scored == 1
    assert_all_committed(bootstrap, f"{topic_prefix}.group", f"{topic_prefix}.spans")


def test_a_stopped_consumer_commits_nothing_past_a_buffered_trace_and_the_next_member_scores_it(
    bootstrap: str, topic_prefix: str
) -> None:
    topic = f"{topic_prefix}.spans"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])  # one partition: offsets in produce order
    admin.close()
    spans = openinference_trace("The Aurora X2 battery lasts 14 hours.")
    children, root = messages(spans[:2]), messages(spans[2:])
    # A finished trace first, so there is something to commit before the buffered one.
    done = openinference_trace("It lasts 14 hours.")
    produce(bootstrap, topic, [*messages(done), *children])
    waiting, seen_first = consumer_for(
        bootstrap, topic_prefix, idle_timeout_s=None, assembly=AssemblySettings(grace_s=0, max_wait_s=3600)
    )
    runner = threading.Thread(target=waiting.run)
    runner.start()
    wait_for(lambda: len(seen_first) == 1 and waiting.stats.messages == 5, "the finished trace to be scored")
    waiting.stop()
    runner.join(60)
    assert not runner.is_alive()

    # Every message before the buffered trace is committed; its first message (offset 3) is not.
    assert committed(bootstrap, f"{topic_prefix}.group", topic) == {0: 3}

    produce(bootstrap, topic, root)
    after, seen_after = consumer_for(bootstrap, topic_prefix)
    stats = after.run()

    [record] = seen_after
    assert record.span_id == format(spans[-1].context.span_id, "016x") and record.label == "faithful"
    assert stats.messages == 3, "replayed from the buffered trace's first message"
    assert_all_committed(bootstrap, f"{topic_prefix}.group", topic)


def test_spans_of_other_services_in_a_trace_are_read_with_it(bootstrap: str, topic_prefix: str) -> None:
    spans = openinference_trace("The Aurora X2 battery lasts 14 hours.")
    not_rag = json.dumps({"unrelated": True}).encode()
    produce(bootstrap, f"{topic_prefix}.spans", [*messages(spans), (b"k", not_rag)])
    consumer, seen = consumer_for(bootstrap, topic_prefix)
    stats = consumer.run()
    assert len(seen) == 1 and stats.dead_letters == 1


class TwoPartitionTraces:
    """Four traces on a spans topic of two partitions (each trace on one, both used), sent in parts, and a
    second group member that joins and leaves."""

    def __init__(self, bootstrap: str, prefix: str) -> None:
        from kafka import KafkaProducer

        self.bootstrap, self.topic, self.group = bootstrap, f"{prefix}.spans", f"{prefix}.group"
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(self.topic, 2, 1)])
        admin.close()
        self.traces = [openinference_trace("The Aurora X2 battery lasts 14 hours.") for _ in range(4)]
        self._producer = KafkaProducer(bootstrap_servers=bootstrap)

    def send(self, part: slice = slice(None)) -> None:
        for i, spans in enumerate(self.traces):
            for key, value in messages(spans[part]):
                self._producer.send(self.topic, value, key=key, partition=i % 2)
        self._producer.flush()

    def rebalance(self, protocol: str) -> None:
        """A second member joins (one partition each) and leaves: the first keeps one partition throughout.
        It rebalances as `protocol` says (a group's members must agree)."""
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

        assignors = {"partition_assignment_strategy": (CooperativeStickyAssignor,)}
        other = GuardedMember(
            KafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=self.group, enable_auto_commit=False,
                **(assignors if protocol == "cooperative" else {}),
            ),
            self.topic,
        )  # fmt: skip
        wait_for(lambda: bool(other.poll(200) is not None and other.assignment()), "a rebalance")
        other.close()

    def close(self) -> None:
        self._producer.close()


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_a_partition_kept_through_a_rebalance_is_read_again_from_its_first_unfinished_message(
    bootstrap: str, topic_prefix: str, protocol: str
) -> None:
    # kafka-python keeps a kept partition's fetch position through a rebalance, past the spans the member
    # dropped from its buffer on revoke; unless it seeks back, those traces lose their children for good.
    topic = TwoPartitionTraces(bootstrap, topic_prefix)
    traces = topic.traces
    topic.send(slice(0, 2))  # the children now: every trace waits in the buffer for its root
    member, seen = consumer_for(
        bootstrap, topic_prefix, idle_timeout_s=None, max_records=len(traces),
        assembly=AssemblySettings(grace_s=0, max_wait_s=3600), rebalance_protocol=protocol,
    )  # fmt: skip
    runner = threading.Thread(target=member.run)
    runner.start()
    wait_for(lambda: member.stats.messages == 2 * len(traces), "every child span to be buffered")

    topic.rebalance(protocol)

    topic.send(slice(2, 3))  # the roots
    runner.join(120)
    if runner.is_alive():
        member.stop()
        runner.join(60)
    topic.close()
    chains = {format(spans[-1].context.span_id, "016x") for spans in traces}
    assert {r.span_id for r in seen} == chains, f"scored {len(seen)} of {len(traces)}: {member.stats}"
    assert all(r.label == "faithful" for r in seen), "each scored with its retrieved documents"
    assert_all_committed(bootstrap, topic.group, topic.topic)


@pytest.mark.parametrize("protocol", ["eager", "cooperative"])
def test_finished_work_is_committed_when_a_rebalance_revokes_it_and_the_member_goes_on(
    bootstrap: str, topic_prefix: str, protocol: str
) -> None:
    # The rebalance listener runs on kafka-python's IO thread: a blocking commit there raised, and the error,
    # thrown out of poll, stopped the member whenever it held finished work not yet committed.
    topic = TwoPartitionTraces(bootstrap, topic_prefix)
    topic.send()
    topic.close()
    # No periodic commit: at the rebalance, all finished work is still to be committed.
    member, seen = consumer_for(
        bootstrap, topic_prefix, idle_timeout_s=None, commit_interval_s=3600, rebalance_protocol=protocol
    )
    failures: list[BaseException] = []

    def run() -> None:
        try:
            member.run()
        except BaseException as exc:  # the test's verdict, not a crash of the test runner
            failures.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    wait_for(lambda: member.stats.evaluations == len(topic.traces), "every trace scored")
    assert set(committed(bootstrap, topic.group, topic.topic).values()) == {None}, "nothing committed yet"

    topic.rebalance(protocol)
    back = "the member to take both partitions back"
    wait_for(lambda: len(member._consumer.assignment()) == 2 or bool(failures), back)
    member.stop()
    runner.join(60)

    assert not failures, f"the member stopped: {failures[0]!r}"
    assert_all_committed(bootstrap, topic.group, topic.topic)
    assert len(seen) == len(topic.traces), "finished work committed at the revoke is not scored again"


class HeldAfterRevoke(KafkaConsumer):
    """A real client whose member, once `hold_at_revoke()` is called, polls without waiting, like a member
    whose revoke outlasts its poll's timeout (the poll returns before the JoinGroup it sent is answered),
    then stops between two polls once it revoked, until `release()`: the group answers its JoinGroup and
    sends its assignment while it does not poll."""

    def __init__(self, **config: Any) -> None:
        super().__init__(**config)
        self.revoked, self.held = threading.Event(), threading.Event()
        self._armed, self._released = threading.Event(), threading.Event()
        self.polls = 0  # the member's loop passes: it took what a poll returned once the next one starts

    def hold_at_revoke(self) -> None:
        self._armed.set()

    def poll(self, timeout_ms: int = 0, **kwargs: Any) -> Any:
        self.polls += 1
        holding = self._armed.is_set() and not self._released.is_set()
        records = super().poll(timeout_ms=0 if holding else timeout_ms, **kwargs)
        if holding and self.revoked.is_set():
            self.held.set()
            self._released.wait(WAIT_S)
        return records

    def release(self) -> None:
        self._released.set()


class _Revoked(logging.Handler):
    def __init__(self, event: threading.Event) -> None:
        super().__init__()
        self._event = event

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("revoked partitions"):
            self._event.set()


def test_a_partition_another_member_committed_while_this_one_was_held_is_read_from_that_commit(
    bootstrap: str, topic_prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Under load a member's JoinGroup can be answered while it is not polling; kafka-python then sends it
    # again and the member never sees that generation's assignment. A partition another member read and
    # committed in it, given back to this one, was read again from this member's own older position: the
    # other member's traces were scored twice (2 to 7 records in the rebalance tests under load).
    topic = TwoPartitionTraces(bootstrap, topic_prefix)
    topic.send()
    client = HeldAfterRevoke(  # kafka-python's default assignors are eager
        bootstrap_servers=bootstrap, group_id=topic.group, enable_auto_commit=False,
        auto_offset_reset="earliest", session_timeout_ms=30_000, heartbeat_interval_ms=3_000,
    )  # fmt: skip
    eager = {
        "rebalance_protocol": "eager", "idle_timeout_s": None, "commit_interval_s": 0.1,
        "assembly": AssemblySettings(grace_s=0), "session_timeout_ms": 30_000,
    }  # fmt: skip
    held, seen_held = consumer_for(bootstrap, topic_prefix, kafka_consumer=client, **eager)
    runners = [threading.Thread(target=held.run, daemon=True)]
    runners[0].start()
    wait_for(lambda: len(seen_held) == len(topic.traces), "the first traces scored")
    wait_for(lambda: set(committed(bootstrap, topic.group, topic.topic).values()) == {6}, "and committed")

    caplog.set_level(logging.INFO, "tracescore.consume")
    handler = _Revoked(client.revoked)
    logging.getLogger("tracescore.consume").addHandler(handler)
    client.hold_at_revoke()
    try:
        other, seen_other = consumer_for(bootstrap, topic_prefix, **eager)
        runners.append(threading.Thread(target=other.run, daemon=True))
        runners[1].start()
        wait_for(lambda: client.held.is_set() and other.first_assigned_at is not None, "the other's share")
    finally:
        logging.getLogger("tracescore.consume").removeHandler(handler)
    topic.traces = [openinference_trace("The Aurora X2 battery lasts 14 hours.") for _ in range(4)]
    topic.send()  # two new traces on each partition: the other member scores those on its partition
    wait_for(lambda: len(seen_other) == 2, "the other member's new traces scored")
    wait_for(lambda: sorted(committed(bootstrap, topic.group, topic.topic).values()) == [6, 12], "committed")
    other.stop()
    runners[1].join(WAIT_S)

    client.release()  # both partitions come back to the held member
    ends = {TopicPartition(topic.topic, p): end for p, end in end_offsets(bootstrap, topic.topic).items()}
    wait_for(lambda: all(_position(client, tp) == end for tp, end in ends.items()), "both read to their ends")
    passes = client.polls
    wait_for(lambda: client.polls > passes + 1, "what it read taken")
    wait_for(lambda: held.stats.scored == held.stats.interactions, "and scored")
    held.stop()
    runners[0].join(WAIT_S)
    topic.close()

    scored = Counter(r.span_id for r in [*seen_held, *seen_other])
    assert len(scored) == 8 and set(scored.values()) == {1}, f"scored twice: {scored}"
    assert_all_committed(bootstrap, topic.group, topic.topic)


def _position(client: KafkaConsumer, tp: TopicPartition) -> int | None:
    return client.position(tp) if tp in client.assignment() else None
