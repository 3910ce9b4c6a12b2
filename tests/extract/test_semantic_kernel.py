"""Semantic Kernel's own GenAI spans (its experimental diagnostics, sensitive data on), recorded from the real
library (fixtures/semantic_kernel_conversation): the support chat on a ChatCompletionAgent's thread. Its spans
name no conversation (the thread's id is on none) and no user: as its docs run it, each turn is a turn of no
conversation; under a span of the app's per turn with `session.id` and `user.id`, the turns are one
conversation. Called with `messages=`, no span records the question; the model calls' messages (the thread's
resent results among them) go to log records, so each turn reads its own tool result only."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore import semconv

TURNS = [
    r for r in recordings() if r.source == "semantic_kernel_conversation" and r.expected[0] == "interaction"
]
UNNAMED = "unnamed_"
NAMING_KEYS = (semconv.SESSION_ID, semconv.GEN_AI_CONVERSATION_ID, semconv.USER_ID)


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_a_turn_is_in_a_conversation_only_where_the_app_names_one(recording: Recording) -> None:
    spans = spans_of(recording)
    [interaction] = extracted(spans).interactions
    assert (conversation := recording.conversation) is not None
    named = [s.name for s in spans if any(key in s.attributes for key in NAMING_KEYS)]
    if recording.scenario.startswith(UNNAMED):
        assert named == [] and (interaction.session_id, interaction.user_id) == (None, None)
    else:
        assert named == ["support_turn"]  # the app's span, above invoke_agent
        assert interaction.session_id == conversation["session_id"]
    # What the spans hold: this turn's tool result, the answer; no question, no resent result.
    assert sorted(interaction.record.contexts) == sorted(conversation["retrieved"])
    assert interaction.record.answer == recording.answer
    assert interaction.question_missing is not None and interaction.record.query is None
