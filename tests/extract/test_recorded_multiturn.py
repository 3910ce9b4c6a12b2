"""Three-turn support chats recorded from the real libraries (issue 31: AutoGen AgentChat, Google ADK 1.x and
2.x, Haystack under OpenInference and under its own tracer, MLflow native and GenAI, the openai client under
OpenInference, the Vercel AI SDK; read since: Spring AI, Logfire, OpenLIT, Strands Agents, Mastra, Genkit,
LangChain.js, LangGraph, LlamaIndex, LangSmith's OTel export, the Langfuse v3 SDK, OpenLLMetry, Semantic
Kernel): each turn read as the app ran it, its own documents and the earlier turns' tool results its model
call carried in whatever message shape the library wrote, marked as an earlier turn's; never an earlier
answer. A follow-up whose evidence only an earlier turn's trace holds is read right on its own trace (its own
documents) and named: grounding across traces (the conversations service) revises its verdict."""

from __future__ import annotations

import pytest
from recorded import Recording, recordings, spans_of

from tracescore.extract import Extraction, extract
from tracescore.model import ExtractSkip, Trace
from tracescore.score import evaluate

SOURCES = (
    "autogen_conversation",
    "google_adk",
    "google_adk_v1",
    "haystack_conversation",
    "haystack_otel",
    "mlflow_conversation",
    "openinference_openai_conversation",
    "vercel_ai_conversation",
    # The same chats on the producers read since.
    "spring_ai_conversation",
    "logfire_conversation",
    "openlit_conversation",
    "strands_conversation",
    "mastra_conversation",
    "genkit_conversation",
    "langchain_js_conversation",
    "langgraph_conversation",
    "llamaindex_conversation",
    "openai_agents_conversation",
    "langsmith_conversation",
    "langfuse_v3_conversation",
    "openllmetry_conversation",
    "semantic_kernel_conversation",
)
RECORDED = [r for r in recordings() if r.source in SOURCES]
TURNS = [r for r in RECORDED if r.expected[0] == "interaction"]


def _extract(recording: Recording) -> Extraction:
    # As the consumer reads it: with the log records kept beside it (Semantic Kernel's messages), if any.
    return extract(Trace(recording.trace_id, tuple(spans_of(recording))))


def test_every_library_and_history_form_is_recorded() -> None:
    assert {r.source for r in TURNS} == set(SOURCES)
    forms = {(r.source, r.conversation["history"]) for r in TURNS if r.conversation}
    assert {source for source, form in forms if form == "resent"} == set(SOURCES)
    assert {source for source, form in forms if form == "qa_only"} == set(SOURCES)


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_turn_reads_its_own_documents_then_the_earlier_turns_results_it_was_given(
    recording: Recording,
) -> None:
    [interaction] = _extract(recording).interactions
    conversation = recording.conversation
    assert conversation is not None
    sources = dict(zip(interaction.record.contexts, interaction.context_sources, strict=True))
    for text in conversation["retrieved"]:
        # A tool span's result, a retrieval's, (Logfire, OpenLIT: no tool span) the tool message it became, or
        # (Spring AI) its advisors' documents, which the page's filter puts on the interaction span.
        assert (sources[text].kind, sources[text].turns_back) in {
            ("tool", 0),
            ("retriever", 0),
            ("tool_message", 0),
            ("span", 0),
        }
    for resent in conversation["resent"]:
        for text in resent["documents"]:
            if text in recording.documents:  # resent in a form read as documents (a tool result)
                back = conversation["turn"] - resent["turn"]
                assert (sources[text].kind, sources[text].turns_back) == ("earlier_turn", back)
    # An answer never supports itself: an earlier answer in the prompt is never a document.
    assert not set(conversation["earlier_answers_in_prompt"]) & set(interaction.record.contexts)
    # The session and user the app set: test_sessions.py, for every producer's chats.


def test_the_turns_whose_evidence_is_in_an_earlier_trace_are_named() -> None:
    """The faithful third turns grounded in turn 1's price list where this trace does not carry it: the app
    kept only questions and answers (every library), ADK 2.x records no model call (the resent results are
    in no span), and Haystack's template resends them as prompt text (never split into documents)."""
    needs = {r.id for r in RECORDED if r.earlier_trace}
    assert needs == {
        *(f"{source}/qa_only_faithful_turn3" for source in SOURCES),
        "mlflow_conversation/semconv_qa_only_faithful_turn3",
        "strands_conversation/default_qa_only_faithful_turn3",  # Strands' default: messages as span events
        "google_adk/resent_faithful_turn3",
        "google_adk/schema_v1_resent_faithful_turn3",
        "haystack_conversation/resent_faithful_turn3",
        "haystack_otel/resent_faithful_turn3",
        "haystack_otel/content_off_resent_faithful_turn3",  # skipped: its content is not recorded at all
        # Spring AI's observations record no prompt: what the chat memory resends is in no span.
        "spring_ai_conversation/resent_faithful_turn3",
        # Semantic Kernel's chat as its docs run it, nothing naming the conversation (`unnamed_`), the app
        # keeping only questions and answers. (Its thread's resent results are in its model calls' log
        # records, read with the trace: such a follow-up is grounded in its own trace.)
        "semantic_kernel_conversation/unnamed_qa_only_faithful_turn3",
    }
    # Where the app resent them as a tool result the trace records, this trace alone grounds the follow-up.
    resent_read = [r for r in TURNS if r.scenario.endswith("resent_faithful_turn3") and not r.earlier_trace]
    assert {r.source for r in resent_read} == set(SOURCES) - {
        "google_adk",
        "haystack_conversation",
        "haystack_otel",
        "spring_ai_conversation",
    }


@pytest.mark.parametrize("recording", [r for r in TURNS if r.scenario.endswith("_turn3")], ids=lambda r: r.id)
def test_a_follow_up_is_judged_on_its_own_trace_as_far_as_that_trace_holds_its_evidence(
    recording: Recording,
) -> None:
    [interaction] = _extract(recording).interactions
    [result] = evaluate(interaction.record, ["faithfulness"])
    assert result.label == recording.label_in_this_trace, result.reason
    if recording.earlier_trace is None and recording.faithful:
        # The price the answer restates is an earlier turn's tool result, read from this turn's model call.
        assert any(s.kind == "earlier_turn" and s.turns_back == 2 for s in interaction.context_sources)


@pytest.mark.parametrize(
    "recording", [r for r in RECORDED if r.scenario == "greeting_turn1"], ids=lambda r: r.id
)
def test_a_greeting_answered_without_a_lookup_is_one_explained_skip(recording: Recording) -> None:
    """ADK writes OpenInference and GenAI keys on its spans: one skip, by the convention read first."""
    found = _extract(recording)
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.EMPTY_CONTEXT


def test_haystack_with_content_tracing_off_is_skipped_saying_so_never_guessed() -> None:
    off = [r for r in RECORDED if r.scenario.startswith("content_off_")]
    assert len(off) == 9
    for recording in off:
        found = _extract(recording)
        [skip] = found.skips
        assert found.interactions == [] and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
        assert "HAYSTACK_CONTENT_TRACING_ENABLED" in skip.detail and skip.convention == "haystack"


def test_ids_written_json_encoded_are_read_as_the_app_set_them() -> None:
    """MLflow writes every attribute JSON-encoded, the app's `session.id` too (`"chat-..."`)."""
    mlflow = [r for r in TURNS if r.source == "mlflow_conversation"]
    for recording in mlflow:
        [interaction] = _extract(recording).interactions
        assert interaction.session_id is not None and not interaction.session_id.startswith('"')
        assert interaction.session_id == recording.conversation["session_id"]  # type: ignore[index]


def test_the_question_is_read_where_the_framework_passes_it() -> None:
    """ADK 2.x records no model call: the question is the run's `new_message`; Haystack's pipeline gets it
    as a component's input (`data.prompt_builder.question`) beside its other arguments."""
    for recording in [
        r for r in TURNS if r.source in ("google_adk", "haystack_conversation", "haystack_otel")
    ]:
        [interaction] = _extract(recording).interactions
        assert interaction.record.query == recording.question and interaction.question_missing is None
