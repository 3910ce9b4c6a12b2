"""Conversations recorded from the real libraries (LangChain's RunnableWithMessageHistory sessions s1/s2,
Langfuse session turns, Pydantic AI conversation ids, AutoGen's second turn without one), replayed through
the real broker: `EvaluationConsumer` scores the turns (offline judge, and the LLM judge behind the cascade
with a baseline keyed on the conversation), then `ConversationService` writes one record per conversation
and judge tier."""

from __future__ import annotations

from collections import defaultdict

import pytest
from _helpers import consumer_settings, judge_client
from recorded import Recording, recordings

from tracescore.consume import EvaluationConsumer
from tracescore.conversations import ConversationsConfig, ConversationService
from tracescore.model import HISTORY_ID_PREFIX, ConversationRecord, EvaluationRecord, read_conversation_record
from tracescore.sample import CascadePolicy, load_sampling_config
from tracescore.score import OfflineJudge
from tracescore.score.metrics import Faithfulness
from tracescore.testing.judge_server import JudgeServer
from tracescore.testing.kafka_topics import input_producer, read_topic

pytestmark = pytest.mark.kafka

SOURCES = ("langchain_stream_history", "langfuse", "pydantic_ai", "autogen")
CONVERSATIONAL = ("history_", "session_")  # the scenarios recorded as turns of a session


def chosen() -> list[Recording]:
    return [
        r
        for r in recordings()
        if r.source in SOURCES and r.expected[0] == "interaction" and r.not_yet_read is None
    ]


def score(
    bootstrap: str, prefix: str, recorded: list[Recording], server: JudgeServer
) -> list[EvaluationRecord]:
    producer = input_producer(bootstrap, [f"{prefix}.spans"], acks="all")
    for recording in recorded:
        producer.send(f"{prefix}.spans", key=recording.trace_id.encode(), value=recording.payload).get(30)
    producer.close()
    seen: list[EvaluationRecord] = []
    # infer_conversations on, not auto: the recordings are read as one backlog over three partitions, where
    # a follow-up may be read before the turn it resent, and auto learns a service only from a turn it read.
    settings = consumer_settings(
        bootstrap, prefix, conversation_evidence_topic=f"{prefix}.evidence", infer_conversations=True
    )
    llm = judge_client(server.base_url)
    # Half the conversations drawn for the LLM judge, whole; suspicious turns of the rest go to it alone.
    policy = CascadePolicy(
        load_sampling_config(None, cascade={"baseline_rate": 0.5}), metrics=["faithfulness"]
    )
    consumer = EvaluationConsumer(
        settings, judge=OfflineJudge(), llm_judge=llm, policy=policy, metrics=[Faithfulness()],
        on_evaluation=seen.append,
    )  # fmt: skip
    consumer.run()
    return seen


def test_recorded_conversations_become_one_record_per_conversation_and_judge_tier(
    bootstrap: str, topic_prefix: str
) -> None:
    recorded = chosen()
    with JudgeServer() as server:
        turns = score(bootstrap, topic_prefix, recorded, server)
    by_trace = {r.trace_id: r for r in recorded}

    # The baseline drew conversations whole: each has all of its turns, or none, in the baseline.
    drawn: dict[str | None, set[bool]] = defaultdict(set)
    for record in turns:
        if record.judge == "offline" and record.session_id is not None:
            baseline = any(
                r.selection == "baseline" and (r.trace_id, r.span_id) == (record.trace_id, record.span_id)
                for r in turns
            )
            drawn[record.session_id + record.service_name].add(baseline)
    assert all(len(outcomes) == 1 for outcomes in drawn.values()), drawn
    assert {True, False} <= {o for outcomes in drawn.values() for o in outcomes}, "a mix, to show both"

    written: list[ConversationRecord] = []
    config = ConversationsConfig(
        bootstrap_servers=bootstrap,
        evaluations_topic=f"{topic_prefix}.evaluations",
        conversations_topic=f"{topic_prefix}.conversations",
        turns_topic=f"{topic_prefix}.turns",
        state_topic=f"{topic_prefix}.state",
        spans_topic=f"{topic_prefix}.evaluation-spans",
        evidence_topic=f"{topic_prefix}.evidence",
        group_id=f"{topic_prefix}.conversations",
        quiet_seconds=1.0,
        tick_seconds=0.2,
    )
    service = ConversationService(config, on_record=written.append)
    stats = service.run(idle_timeout_s=4)

    offline = {(r.service_name, r.conversation_id): r for r in written if r.judge == "offline"}
    sessions = [r for r in recorded if r.scenario.startswith(CONVERSATIONAL)]
    for recording in sessions:
        conversation_id = f"session-{recording.scenario.split('_')[1]}"
        record = offline[(_service(turns, recording), conversation_id)]
        assert record.turns == 2 and record.turns_scored == 2, record
        assert by_trace[record.trace_ids[0]].scenario.endswith("turn1"), "turns in order"
        if conversation_id == "session-s2":  # its second turn was answered unfaithfully
            assert (record.label, record.turns_flagged) == ("flagged", 1), record
            assert record.worst_turn is not None
            assert by_trace[record.worst_turn.trace_id].scenario.endswith("s2_turn2")
        else:
            assert (record.label, record.turns_passed) == ("passed", 2), record
    for recording in [r for r in recorded if r.source == "pydantic_ai"]:
        record = offline[("aurora-support-pydantic-ai", f"conv-{recording.scenario.replace('_', '-')}")]
        assert record.turns == 1 and record.label == ("passed" if recording.faithful else "flagged")
    # AutoGen records no conversation id: its turns are counted, never a named conversation; its follow-up
    # that resent turn 1's question and answer is inferred: a conversation only by the id its history shows.
    autogen = [r for r in recorded if r.source == "autogen"]
    inferred = [r for r in written if r.service_name == "aurora-support-autogen"]
    assert inferred and all(r.conversation_id.startswith(HISTORY_ID_PREFIX) for r in inferred), inferred
    assert stats.skipped["no_conversation"] == sum(
        1 for t in turns if t.session_id is None
    ) and stats.skipped["no_conversation"] >= len(autogen)
    # Two sessions each of LangChain and Langfuse, four Pydantic AI ids, and AutoGen's inferred conversation.
    autogen_offline = {r.conversation_id for r in inferred if r.judge == "offline"}
    assert len(autogen_offline) == 1 and len(offline) == 4 + 4 + 1, sorted(offline)

    # Tiers apart: a conversation the baseline drew has a complete LLM record; cascade picks say cascade.
    for record in written:
        if record.selection == "baseline":
            assert record.complete and record.annotator_kind == "LLM", record
        if record.selection == "cascade":
            assert record.annotator_kind == "LLM" and record.turns_judged <= record.turns
    # What the topic holds is what was written, once each.
    on_topic = [read_conversation_record(m.value) for m in read_topic(bootstrap, config.conversations_topic)]
    assert sorted(r.model_dump_json() for r in on_topic) == sorted(r.model_dump_json() for r in written)
    assert all(r.revision == 0 for r in written)


def _service(turns: list[EvaluationRecord], recording: Recording) -> str:
    return next(t.service_name for t in turns if t.trace_id == recording.trace_id)
