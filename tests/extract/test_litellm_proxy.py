"""The LiteLLM proxy (the gateway) with its `otel` callback, recorded from litellm itself
(fixtures/litellm_proxy, scenarios/litellm_proxy.py). Its calls are `acompletion`s, which its callback writes
as the GenAI operation: read as chat calls, the end user the app named in OpenAI's `user` field (`llm.user`)
as the user. A client app that sent its trace context (`traceparent`) puts the proxy's spans in its own
trace, beside the app's record of the same call: scored once, on the app's reading, the proxy's end user its
user (OpenInference keeps OpenAI's `user` field only inside `llm.invocation_parameters`)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, recordings, spans_of

from tracescore.extract import DEFAULT_RECOGNIZERS, extract
from tracescore.model import DecodedSpan, Trace

PROXY = [r for r in recordings() if r.source == "litellm_proxy" and r.expected[0] == "interaction"]
DETACHED = [r for r in PROXY if r.scenario.startswith("detached_")]
JOINED = [r for r in PROXY if r.scenario.startswith("joined_")]
# The app names the end user in its single calls, not in the tool loop (scenarios/litellm_proxy.py).
JOINED_FOR_A_USER = [r for r in JOINED if not r.scenario.startswith("joined_tools")]
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


@pytest.mark.parametrize("recording", JOINED_FOR_A_USER, ids=lambda r: r.id)
def test_the_end_user_the_proxy_recorded_is_the_user_of_the_apps_reading(recording: Recording) -> None:
    # The app's reading names no user (OpenInference writes OpenAI's `user` field into its invocation
    # parameters only); the proxy's record of the same call does, as `llm.user`.
    spans = spans_of(recording)
    assert {s.attributes.get("llm.user") for s in spans if s.service_name == PROXY_SERVICE} >= {END_USER}
    [interaction] = extracted(spans).interactions
    assert (interaction.span.service_name, interaction.user_id) == ("aurora-support", END_USER)


@pytest.mark.parametrize("recording", JOINED, ids=lambda r: r.id)
def test_the_apps_reading_is_kept_whichever_convention_reads_first(recording: Recording) -> None:
    # The proxy's reading read before the app's (a gateway traced by a convention listed earlier than the
    # app's): still scored once, on the app's reading, the reading of the service that made the call.
    spans = spans_of(recording)
    trace = Trace(spans[0].trace_id, tuple(spans))
    [interaction] = extract(trace, tuple(reversed(DEFAULT_RECOGNIZERS))).interactions
    assert (interaction.span.service_name, interaction.convention) == ("aurora-support", "openinference")
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
