"""infer_conversations auto: a service is learned to resend its chats from a follow-up that resent a turn the
instance read (never from a fixed few-shot prompt's pairs); until then its possible turns' documents are held,
within their bounds, and handed back placed as the setting on places them. On the chats recorded from the
real libraries, read as if their apps named no conversation, the default writes the same documents, under
the same conversations, as the setting on, from the first conversation on."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path += [str(Path(__file__).resolve().parents[1] / folder) for folder in ("conversations", "extract")]

from recorded_chats import chat_turns, named_nothing

from tracescore.consume import AssemblySettings, ConsumerStats, TraceAssembler
from tracescore.consume._learn import ChatLearner, LearnerBounds, with_conversation
from tracescore.consume._pipeline import Pipeline
from tracescore.extract import Found
from tracescore.model import ChatTurn, DecodedSpan, Interaction, RagRecord, turn_digest
from tracescore.testing.kafka_topics import ConsumerRecord

T1, T2, T3 = (turn_digest(f"question {n}", f"answer {n}") for n in (1, 2, 3))
EXAMPLE = turn_digest("Is there a student discount?", "Yes, 20 percent.")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def turn(documents: str = "x" * 100, service: str = "svc") -> Found:
    span = DecodedSpan("a" * 32, "b" * 16, "turn", service, "app", {}, 2, start_time_unix_nano=1)
    return Found.of(Interaction(span, RagRecord(query="q", contexts=(documents,), answer="a"), "/chat"))


def hold(learner: ChatLearner, service: str = "svc", documents: str = "x" * 100, digest: str = T1) -> None:
    learner.hold(service, ChatTurn(digest), turn(documents, service), 0, None)


def test_a_follow_up_that_resent_a_turn_read_proves_the_chat_and_hands_its_held_turns_back() -> None:
    learner = ChatLearner()
    first = ChatTurn(T1)
    assert learner.learns("svc", first) is None
    hold(learner)
    hold(learner, "other", digest=T3)
    assert not learner.learned("svc")
    [back] = learner.learns("svc", ChatTurn(T2, (T1,))) or []
    assert learner.learned("svc") and not learner.learned("other")
    # Placed as the setting on places a first turn: its documents under the conversation it opens.
    opened = with_conversation(turn().interaction(), first).opens_conversation
    assert opened is not None and back.interaction.opens_conversation == opened
    assert back.interaction.session_id is None and back.interaction.turn_digest == T1
    assert learner.held == 1, "another service's turn stays held"


def test_a_turn_read_after_the_follow_up_that_resent_it_proves_the_chat_too() -> None:
    learner = ChatLearner()
    assert learner.learns("svc", ChatTurn(T2, (T1,))) is None
    assert learner.learns("svc", ChatTurn(T1)) == []
    assert learner.learned("svc")


def test_a_response_named_by_the_next_request_proves_a_chain_the_service_keeps() -> None:
    learner = ChatLearner()
    assert learner.learns("svc", ChatTurn(T1, response_id="resp_1")) is None
    assert learner.learns("svc", ChatTurn(T2, response_id="resp_2", previous_response_id="resp_1")) == []


def test_a_fixed_few_shot_prompt_never_proves_a_chat() -> None:
    """Every request resends the example pair, no interaction answered it; one asked exactly the example's
    question and answered as it is holds its own pair in its prompt: no proof either way."""
    learner = ChatLearner()
    for n in range(50):
        assert learner.learns("svc", ChatTurn(turn_digest(f"q{n}", f"a{n}"), (EXAMPLE,))) is None
    assert learner.learns("svc", ChatTurn(EXAMPLE, (EXAMPLE,))) is None
    assert learner.learns("svc", ChatTurn(T1, (EXAMPLE,))) is None
    assert not learner.learned("svc")


def test_a_turn_of_another_service_proves_nothing() -> None:
    learner = ChatLearner()
    learner.learns("a", ChatTurn(T1))
    assert learner.learns("b", ChatTurn(T2, (T1,))) is None and not learner.learned("b")


def test_the_known_turns_are_bounded_the_oldest_forgotten_first() -> None:
    def read(*digests: str) -> ChatLearner:
        learner = ChatLearner(LearnerBounds(known_turns=2))
        for digest in digests:
            learner.learns("svc", ChatTurn(digest))
        return learner

    assert read(T1, T2, T3).learns("svc", ChatTurn(EXAMPLE, (T1,))) is None, "T1 forgotten"
    assert read(T1, T2, T3).learns("svc", ChatTurn(EXAMPLE, (T2,))) == []


def test_held_turns_are_bounded_by_characters_and_let_go_after_their_age() -> None:
    clock = Clock()
    learner = ChatLearner(LearnerBounds(hold_chars=1_000, hold_seconds=60), clock=clock)
    for _ in range(8):  # 102 characters each (document, question, answer)
        hold(learner)
    assert learner.held == 8 and learner.held_chars == 816
    for _ in range(4):
        hold(learner)
    assert learner.held == 9 and learner.held_chars <= 1_000, "the oldest let go"
    hold(learner, documents="y" * 2_000)
    assert learner.held == 9, "one larger than the bound is not held"
    clock.now = 61
    assert learner.held == 0 and learner.held_chars == 0
    learner.learns("svc", ChatTurn(T1))
    assert learner.learns("svc", ChatTurn(T2, (T1,))) == [], "nothing held past its age"


def message(payload: bytes, offset: int) -> ConsumerRecord:
    return ConsumerRecord("spans", 0, -1, offset, 0, 0, None, payload, [], None, -1, len(payload), -1)


def written(infer: bool | str, payloads: list[bytes]) -> tuple[list[tuple[object, ...]], list[object]]:
    """The documents a pipeline writes (each evidence's trace and conversation fields) and its records'
    conversations, the turns read one by one in order."""
    steps = Pipeline(TraceAssembler(AssemblySettings(grace_s=0)), ConsumerStats(), evidence=True,
                     infer_conversations=infer)  # fmt: skip
    evidence: list[tuple[object, ...]] = []
    sessions: list[object] = []
    for offset, payload in enumerate(payloads):
        steps.take([message(payload, offset)])
        for trace in steps.flush():
            for turn in trace.evidence:
                i = turn.interaction
                placed = (i.session_id, i.opens_conversation, i.conversation_source, i.response_id)
                evidence.append((i.span.trace_id, i.turn_digest, i.history, i.previous_response_id, *placed))
            sessions += [
                (r.interaction.span.trace_id, r.interaction.session_id) for r, _ in trace.interactions
            ]
    return sorted(evidence, key=repr), sorted(sessions, key=repr)


@pytest.mark.parametrize(
    "source", ["openinference_openai_conversation", "langgraph_conversation", "agent_framework_responses"]
)
def test_a_recorded_chat_is_written_by_default_as_with_the_setting_on(source: str) -> None:
    turns = sorted(map(named_nothing, chat_turns(source)), key=lambda t: (t.chat, t.turn))
    payloads = [t.payload for t in turns]
    auto, on, off = (written(infer, payloads) for infer in ("auto", True, False))
    assert auto == on, "the same documents under the same conversations, and the same records"
    assert len(auto[0]) == len(turns) and off[0] == []


def test_a_service_that_resent_nothing_for_the_hold_window_is_no_longer_watched() -> None:
    """A one-shot service: after `hold_seconds` without a turn that resent anything, its turns are neither
    held nor known (they cost the reading of their prompts only); a turn that resent something watches it
    again."""
    clock = Clock()
    learner = ChatLearner(LearnerBounds(hold_seconds=60), clock=clock)
    assert learner.watches("svc", resends=False)
    clock.now = 59
    assert learner.watches("svc", resends=False)
    clock.now = 61
    assert not learner.watches("svc", resends=False), "a minute of nothing resent"
    assert learner.watches("other", resends=False), "another service is watched from when it is first read"
    assert learner.watches("svc", resends=True)
    clock.now = 120
    assert learner.watches("svc", resends=False)


def test_learning_a_service_is_said_once_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    turns = sorted(map(named_nothing, chat_turns("openinference_openai_conversation")), key=lambda t: t.turn)
    stats = ConsumerStats()
    steps = Pipeline(TraceAssembler(AssemblySettings(grace_s=0)), stats, evidence=True,
                     infer_conversations="auto")  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tracescore.consume"):
        for offset, t in enumerate(turns):
            steps.take([message(t.payload, offset)])
            steps.flush()
    said = [r.getMessage() for r in caplog.records if "resends its chat history" in r.getMessage()]
    assert stats.services_learned == 1 and len(said) == 1, said
    assert f"service {turns[0].service} resends its chat history" in said[0]
