"""The documents of conversation turns for `tracescore conversations`: every interaction with a conversation
id gives one evidence message, scored or sampled out (a later turn may rest on it); one without costs
nothing; the documents are cut to a size that always fits Kafka's limit, the cut counted in the message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka.consumer.fetcher import ConsumerRecord

from tracescore.consume import AssemblySettings, ConsumerSettings, ConsumerStats, TraceAssembler
from tracescore.consume._pipeline import Pipeline
from tracescore.consume._shared_policy import SharedPolicy
from tracescore.emit import turn_evidence
from tracescore.model import DecodedSpan, Interaction, RagRecord, TurnEvidence
from tracescore.sample import CascadePolicy, SamplingConfig

FIXTURES = Path(__file__).parents[1] / "extract" / "fixtures"
TURN = FIXTURES / "pydantic_ai_conversation" / "turn1.binpb"  # a conversation id on every span
ALONE = FIXTURES / "openinference_manual" / "faithful.binpb"  # no conversation id


def message(path: Path, offset: int) -> ConsumerRecord:
    value = path.read_bytes()
    return ConsumerRecord("spans", 0, -1, offset, 0, 0, None, value, [], None, -1, len(value), -1)


def pipeline(evidence: bool) -> Pipeline:
    # Nothing admitted: the turn is sampled out, its documents still count for the turns after it.
    policy = SharedPolicy(CascadePolicy(SamplingConfig(default_rate=0.0)))
    return Pipeline(
        TraceAssembler(AssemblySettings(grace_s=0)), ConsumerStats(), policy=policy, evidence=evidence
    )


def test_a_sampled_out_conversation_turn_still_gives_its_documents_and_a_lone_interaction_nothing() -> None:
    steps = pipeline(evidence=True)
    steps.take([message(TURN, 0), message(ALONE, 1)])
    [trace] = steps.flush()
    assert trace.interactions == [], "not scored"
    [turn] = trace.evidence
    assert turn.interaction.session_id is not None and turn.interaction.record.contexts
    assert steps.stats.sampled_out == 2
    without = pipeline(evidence=False)
    without.take([message(TURN, 0)])
    assert without.flush() == [], "no evidence topic: nothing held, as before"


def interaction(documents: tuple[str, ...], session: str | None = "chat-1") -> Interaction:
    span = DecodedSpan(
        "a" * 32, "b" * 16, "turn", "svc", "app", {}, 2_000_000_000, start_time_unix_nano=10**9
    )
    record = RagRecord(query="What does it cost?", contexts=documents, answer="9 euros.")
    return Interaction(span=span, record=record, route="/chat", session_id=session, user_id="u-1")


def test_the_documents_are_kept_in_judged_order_and_the_cut_is_counted() -> None:
    evidence = turn_evidence(interaction(("a" * 600, "b" * 600, "c" * 600, "d")), max_chars=1_000)
    assert evidence is not None
    assert [d.text[:1] for d in evidence.documents] == ["a", "b"]
    assert [len(d.text) for d in evidence.documents] == [600, 400], "the one that crosses the limit is cut"
    assert (evidence.documents_total, evidence.documents_dropped, evidence.chars_dropped) == (4, 2, 801)
    assert evidence.session_id == "chat-1" and evidence.user_id == "u-1"
    assert evidence.span_started_at is not None and evidence.span_started_at.year == 1970
    assert turn_evidence(interaction(("a",), session=None), max_chars=1_000) is None


def test_every_evidence_message_fits_the_message_limit_by_construction() -> None:
    settings = ConsumerSettings(max_message_bytes=100_000)
    most = settings.conversation_evidence_chars
    # The worst text for JSON: every character escaped as \u00XX (6 bytes).
    evidence = turn_evidence(interaction(("\x01" * 200_000,)), max_chars=most)
    assert evidence is not None and evidence.chars_dropped == 200_000 - most
    assert len(evidence.model_dump_json().encode()) <= settings.max_message_bytes
    assert TurnEvidence.model_validate_json(evidence.model_dump_json()) == evidence
    with pytest.raises(ValueError, match="conversation_evidence_chars"):
        ConsumerSettings(max_message_bytes=50_000, conversation_evidence_chars=16_000)
    off = ConsumerSettings(conversation_evidence_topic="")
    assert off.conversation_evidence_topic is None
    assert json.loads(evidence.model_dump_json())["schema_version"] == 1
