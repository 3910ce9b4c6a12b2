"""Current OpenLLMetry (traceloop-sdk 0.6x) on a plain openai chat app, recorded from the real library
(fixtures/openllmetry_conversation): each turn an @workflow, the conversation named the way Traceloop's docs
name a trace's entities, association properties (`Traceloop.set_association_properties({"session_id": ...,
"user_id": ...})`, written as `traceloop.association.properties.*` on every span), or its conversation id
(`set_conversation_id`, written as `gen_ai.conversation.id`); a greeting the model answered without the tool
it was offered."""

from __future__ import annotations

import dataclasses

from recorded import extracted, recordings, spans_of, without

from tracescore import semconv
from tracescore.model import ExtractSkip

RECORDED = {r.id: r for r in recordings() if r.source == "openllmetry_conversation"}
ASSOCIATED = "traceloop.association.properties."
STANDARD_KEYS = (semconv.SESSION_ID, semconv.GEN_AI_CONVERSATION_ID, semconv.USER_ID)


def test_a_turn_is_in_the_session_and_user_its_association_properties_name() -> None:
    for scenario in ("qa_only_faithful_turn3", "resent_restated_turn2"):
        recording = RECORDED[f"openllmetry_conversation/{scenario}"]
        spans = spans_of(recording)
        assert (conversation := recording.conversation) is not None
        # Only the association properties name it: no standard key on any span.
        assert not any(k in s.attributes for s in spans for k in STANDARD_KEYS)
        assert all(s.attributes[f"{ASSOCIATED}session_id"] == conversation["session_id"] for s in spans)
        [interaction] = extracted(spans).interactions
        assert (interaction.session_id, interaction.user_id) == (
            conversation["session_id"],
            conversation["user_id"],
        )


def test_the_conversation_id_traceloop_writes_names_the_session_before_an_association_property() -> None:
    recording = RECORDED["openllmetry_conversation/greeting_turn2"]
    spans = spans_of(recording)
    assert {s.attributes[semconv.GEN_AI_CONVERSATION_ID] for s in spans} == {"chat-greeting"}
    [interaction] = extracted(spans).interactions
    assert (interaction.session_id, interaction.user_id) == ("chat-greeting", "user-greeting")
    # An app that also associates a session_id: the standard key stays the conversation.
    both = [
        dataclasses.replace(s, attributes={**s.attributes, f"{ASSOCIATED}session_id": "chat-other"})
        for s in spans
    ]
    [interaction] = extracted(both).interactions
    assert interaction.session_id == "chat-greeting"


def test_a_greeting_the_model_answered_without_the_tool_it_was_offered_retrieved_nothing() -> None:
    """Not an app that put its documents in the prompt (that skip tells the user to decorate a retriever):
    the model was offered the search tool and called none."""
    spans = spans_of(RECORDED["openllmetry_conversation/greeting_turn1"])
    [skip] = extracted(spans).skips
    assert skip.reason == ExtractSkip.EMPTY_CONTEXT and "support_turn.workflow" in skip.detail
    # Offered no tool, the same call is the prompt-only case, said as such.
    [skip] = extracted(without(spans, "gen_ai.tool.definitions")).skips
    assert skip.reason == ExtractSkip.NO_RETRIEVAL and "@task(name='retrieve')" in skip.detail
