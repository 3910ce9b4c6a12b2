"""Semantic Kernel's own GenAI spans (its experimental diagnostics, sensitive data on), recorded from the real
library: its agent's model calls' messages as log records (fixtures/semantic_kernel), and
(fixtures/semantic_kernel_conversation) the support chat on a ChatCompletionAgent's thread. Its spans
name no conversation (the thread's id is on none) and no user: as its docs run it, each turn is a turn of no
conversation; under a span of the app's per turn with `session.id` and `user.id`, the turns are one
conversation. Called with `messages=`, no span records the question; the model calls' messages (the thread's
resent results among them) go to log records, kept with each turn: read with them, each turn reads its
question, its own tool result and the earlier turns' results the thread resent (none where the app kept only
questions and answers)."""

from __future__ import annotations

import json

import pytest
from recorded import FIXTURES, Recording, extracted, recordings, spans_of

from tracescore import semconv
from tracescore.consume import decode_message

TURNS = [
    r for r in recordings() if r.source == "semantic_kernel_conversation" and r.expected[0] == "interaction"
]
UNNAMED = "unnamed_"
NAMING_KEYS = (semconv.SESSION_ID, semconv.GEN_AI_CONVERSATION_ID, semconv.USER_ID)


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_a_turn_is_in_a_conversation_only_where_the_app_names_one(recording: Recording) -> None:
    spans = spans_of(recording)
    [interaction] = extracted(spans).interactions
    conversation = recording.conversation
    assert conversation is not None
    named = [s.name for s in spans if any(key in s.attributes for key in NAMING_KEYS)]
    if recording.scenario.startswith(UNNAMED):
        assert named == [] and (interaction.session_id, interaction.user_id) == (None, None)
    else:
        assert named == ["support_turn"]  # the app's span, above invoke_agent
        assert interaction.session_id == conversation["session_id"]
    # The spans hold this turn's tool result and the answer; its log records the question and the earlier
    # turns' results the thread resent, each read as the earlier turn's.
    resent = [text for item in conversation["resent"] for text in item["documents"]]
    assert sorted(interaction.record.contexts) == sorted([*conversation["retrieved"], *resent])
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert interaction.question_missing is None
    alone = extracted(decode_message(recording.payload)).interactions
    assert [i.record.query for i in alone] == [None], "without its log records no span names the question"


AGENT = [r for r in recordings() if r.source == "semantic_kernel"]
CHAT_EVENTS = ["gen_ai.system.message", "gen_ai.user.message"]


@pytest.mark.parametrize("recording", AGENT, ids=lambda r: r.id)
def test_its_chat_messages_are_log_records_read_with_their_chat_spans(recording: Recording) -> None:
    """Semantic Kernel writes each model call's messages as Python log lines (`event.name` among their
    attributes, the message as JSON text), made OTel log records by the OTel SDK's LoggingHandler as its
    samples set it up, each with its chat span's trace and span id. The trace alone names no question;
    read with its log records (as the consumer reads them from the spans topic), the chat spans carry the
    messages as events: the question is read, the documents are the tool's results (the tool message's
    repr of them is no document), and Semantic Kernel's other log lines are no events."""
    alone = extracted(decode_message(recording.payload))
    [interaction] = alone.interactions
    assert interaction.record.query is None and interaction.question_missing is not None

    spans = spans_of(recording)
    manifest = json.loads((FIXTURES / recording.source / "manifest.json").read_text())
    logged = manifest["scenarios"][f"{recording.scenario}.binpb"]["logs"]["record_count"]
    chats = [s for s in spans if s.attributes.get(semconv.GEN_AI_OPERATION_NAME) == "chat"]
    assert len(chats) == 2
    for chat in chats:
        assert [e.name for e in chat.events][:2] == CHAT_EVENTS and chat.events[-1].name == "gen_ai.choice"
    events = [e.name for s in spans for e in s.events]
    assert all(name.startswith("gen_ai.") for name in events) and len(events) < logged  # its other lines
    [interaction] = extracted(spans).interactions
    assert interaction.question_missing is None
    assert interaction.record.query == recording.question
    assert interaction.record.contexts == tuple(recording.documents)
    assert interaction.record.answer == recording.answer
