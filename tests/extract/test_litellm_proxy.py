"""The LiteLLM proxy (the gateway) with its `otel` callback, recorded from litellm itself
(fixtures/litellm_proxy, scenarios/litellm_proxy.py). Its calls are `acompletion`s, which its callback writes
as the GenAI operation: read as chat calls, the end user the app named in OpenAI's `user` field (`llm.user`)
as the user. A client app that sent its trace context (`traceparent`) puts the proxy's spans in its own
trace, beside the app's record of the same call: scored once, on the app's reading."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.model import DecodedSpan

PROXY = [r for r in recordings() if r.source == "litellm_proxy" and r.expected[0] == "interaction"]
DETACHED = [r for r in PROXY if r.scenario.startswith("detached_")]
JOINED = [r for r in PROXY if r.scenario.startswith("joined_")]
END_USER = "customer-42"  # scenarios/litellm_proxy.py
PROXY_SERVICE = "litellm-proxy"


def _services(spans: list[DecodedSpan]) -> set[str]:
    return {span.service_name for span in spans}


@pytest.mark.parametrize("recording", DETACHED, ids=lambda r: r.id)
def test_a_proxy_call_is_read_with_the_end_user_it_was_made_for(recording: Recording) -> None:
    # No trace context from the app: the proxy's trace alone, its call an `acompletion`.
    spans = spans_of(recording)
    assert _services(spans) == {PROXY_SERVICE}
    [interaction] = extracted(spans).interactions
    record = interaction.record
    assert (record.query, record.answer) == (recording.question, recording.answer)
    # The documents under the prompt's `Context:` label, read as the one block they were pasted as.
    assert "\n\n".join(record.contexts) == "\n\n".join(recording.documents)
    assert interaction.user_id == END_USER
    assert interaction.route == "/chat/completions"


@pytest.mark.parametrize("recording", JOINED, ids=lambda r: r.id)
def test_a_call_through_the_proxy_in_the_apps_trace_is_scored_once(recording: Recording) -> None:
    # The app's client span and the proxy's request span record the same call, side by side under the app's
    # span: one interaction, the app's.
    spans = spans_of(recording)
    assert _services(spans) == {PROXY_SERVICE, "aurora-support"}
    [interaction] = extracted(spans).interactions
    assert interaction.span.service_name == "aurora-support"
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
