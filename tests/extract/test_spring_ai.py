"""Spring AI's spans, recorded from a real Spring Boot app (fixtures/spring_ai, spring_ai_conversation; the
same app on Spring AI 2.0 and Spring Boot 4: spring_ai2, spring_ai2_conversation, where the tool span is
`execute_tool` below a Tool Calling advisor span): the chat client call read with its advisors' documents
(on its own span, from the page's filter) or its vector store retrieval; without the content on the spans,
a skip that names the Spring settings to turn on; each chat turn in its conversation (the chat memory's
id)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_chat_turn, recordings, spans_of, without

from tracescore.consume import decode_message
from tracescore.model import DecodedSpan, ExtractSkip
from tracescore.score import evaluate

RECORDED = {
    r.id: r
    for r in recordings()
    if r.source in ("spring_ai", "spring_ai2", "spring_ai_conversation", "spring_ai2_conversation")
}
LINES = pytest.mark.parametrize("line", ["spring_ai", "spring_ai2"])  # Spring AI 1.1 and 2.0
QUESTION_WORDS = "How long does the Aurora X2 battery last?"
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]
LOG_COMPLETION = "spring.ai.chat.client.observations.log-completion"
LOG_QUERY_RESPONSE = "spring.ai.vectorstore.observations.log-query-response"
TOOL_CONTENT = "spring.ai.tools.observations.include-content"
QUERY_RESPONSE, TOOL_RESULT = "db.vector.query.response.documents", "spring.ai.tool.call.result"
# The advisors' documents, which the page's filter copies from the chat client response's context.
ADVISED = "gen_ai.retrieval.documents"
ADVISORS, TOOL_NAMES = "spring.ai.chat.client.advisors", "spring.ai.chat.client.tool.names"
ADVISOR_SCENARIOS = pytest.mark.parametrize("scenario", ["qa_advisor", "rag_advisor"])


@LINES
@ADVISOR_SCENARIOS
def test_both_advisors_documents_are_read_once_from_the_chat_client_span(line: str, scenario: str) -> None:
    """The filter puts the advisor's documents on the chat client span (what went into the prompt): read
    there, the vector store query's copy of them not read again."""
    recording = RECORDED[f"{line}/{scenario}_faithful"]
    interaction = read_as_run(recording, "spring_ai", "spring_ai chat_client")
    assert {(s.span_id, s.kind) for s in interaction.context_sources} == {(interaction.span.span_id, "span")}
    # Micrometer writes the usage as strings, and Spring AI's is cumulative over a tool loop: left unread.
    run = interaction.run
    assert run is not None and (run.prompt_tokens, run.steps, run.retrievals) == (None, 1, 1)


@LINES
@ADVISOR_SCENARIOS
def test_without_the_advisors_documents_on_the_chat_client_its_vector_store_query_is_read(
    line: str, scenario: str
) -> None:
    """An app with the page's earlier filter (documents on the vector store query span only)."""
    recording = RECORDED[f"{line}/{scenario}_faithful"]
    [interaction] = extracted(without(spans_of(recording), ADVISED)).interactions
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"retriever"}


@LINES
def test_content_capture_off_is_skipped_naming_the_spring_settings(line: str) -> None:
    found = extracted(spans_of(RECORDED[f"{line}/no_content_faithful"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert f"{LOG_COMPLETION}=true" in skip.detail and f"{LOG_QUERY_RESPONSE}=true" in skip.detail
    assert "ObservationFilter" in skip.detail


@pytest.mark.parametrize(
    ("keys", "setting", "other"),
    [
        (("gen_ai.completion",), LOG_COMPLETION, LOG_QUERY_RESPONSE),
        ((ADVISED, QUERY_RESPONSE), LOG_QUERY_RESPONSE, LOG_COMPLETION),
    ],
)
def test_one_setting_off_is_named_alone(keys: tuple[str, ...], setting: str, other: str) -> None:
    spans = without(spans_of(RECORDED["spring_ai/qa_advisor_faithful"]), *keys)
    [skip] = extracted(spans).skips
    assert skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert setting in skip.detail and other not in skip.detail


@LINES
def test_a_tool_the_model_called_is_in_the_run_and_its_search_read_once(line: str) -> None:
    recording = RECORDED[f"{line}/tool_faithful"]
    [interaction] = extracted(spans_of(recording)).interactions
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"retriever"}  # not the tool's result again
    run = interaction.run
    assert run is not None and run.steps == 2 and [c.name for c in run.tool_calls] == ["search_docs"]
    assert QUESTION_WORDS in str(run.tool_calls[0].arguments)


@LINES
def test_a_tools_result_is_the_documents_when_its_search_recorded_none(line: str) -> None:
    recording = RECORDED[f"{line}/tool_faithful"]
    [interaction] = extracted(without(spans_of(recording), QUERY_RESPONSE)).interactions
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    assert {s.kind for s in interaction.context_sources} == {"tool"}


@LINES
def test_a_tool_without_its_content_names_the_tool_setting(line: str) -> None:
    spans = without(spans_of(RECORDED[f"{line}/tool_faithful"]), QUERY_RESPONSE, TOOL_RESULT)
    [skip] = extracted(spans).skips
    assert skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert f"{TOOL_CONTENT}=true" in skip.detail and f"{LOG_QUERY_RESPONSE}=true" in skip.detail


def test_the_question_falls_back_to_the_vector_store_query() -> None:
    recording = RECORDED["spring_ai/qa_advisor_faithful"]
    [interaction] = extracted(without(spans_of(recording), "gen_ai.prompt")).interactions
    assert interaction.record.query == recording.question


@LINES
@pytest.mark.parametrize("scenario", ["rag_advisor_unfaithful", "tool_unfaithful"])
def test_the_chat_model_and_tool_spans_are_not_read_again_as_otel_genai_calls(
    line: str, scenario: str
) -> None:
    # Spring AI 2's tool span is `gen_ai.operation.name=execute_tool`: read as the chat client's, once.
    found = extracted(spans_of(RECORDED[f"{line}/{scenario}"]))
    assert [i.convention for i in found.interactions] == ["spring_ai"] and found.skips == []


@pytest.mark.parametrize("recording", TURNS, ids=lambda r: r.id)
def test_each_chat_turn_is_read_with_its_own_retrieval_in_its_conversation(recording: Recording) -> None:
    # The memory's earlier answers are in the prompt only, never read as documents.
    interaction, conversation = read_chat_turn(recording)
    assert sorted(interaction.record.contexts) == sorted(conversation["retrieved"])
    if conversation["turn"] == 3:
        # Turn 1's price is never on turn 3's spans: judged on this trace it reads as unsupported, and
        # grounding across traces revises the faithful one (recorded.py, Recording.earlier_trace).
        [result] = evaluate(interaction.record, ["faithfulness"])
        assert result.label == recording.label_in_this_trace, result.reason


@LINES
@pytest.mark.parametrize("scenario", ["system_faithful", "system_unfaithful"])
def test_documents_the_app_put_into_the_system_text_are_read_under_their_label(
    line: str, scenario: str
) -> None:
    """No advisor, no retrieval: the app's `.system(...)` carries its documents under `Context:`; the page's
    filter records the system text as `gen_ai.system_instructions` (with log-prompt), read by the shared
    prompt step as the instructions' documents, the question being the user text."""
    recording = RECORDED[f"{line}/{scenario}"]
    spans = spans_of(recording)
    assert not any(s.attributes.get("db.operation.name") == "query" for s in spans)
    [interaction] = extracted(spans).interactions
    record = interaction.record
    assert (record.query, record.answer) == (recording.question, recording.answer)
    assert record.contexts == ("\n\n".join(recording.documents),)
    assert [s.kind for s in interaction.context_sources] == ["instructions"]


GENAI_SETTING = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
LOG_PROMPT = "spring.ai.chat.client.observations.log-prompt"


def _lone_chat_messages() -> list[tuple[str, list[DecodedSpan]]]:
    """Each Kafka message of a recorded Spring AI trace that holds only the chat model's span (Micrometer's
    exporter sends spans as they end: the chat model call reaches Kafka in a message of its own)."""
    found = []
    for recording in RECORDED.values():
        for at, message in enumerate(recording.messages):
            spans = decode_message(message.payload)
            if [s.name for s in spans] == ["chat gpt-4o-mini"]:
                found.append((f"{recording.id}.msg{at}", spans))
    return found


LONE_CHATS = _lone_chat_messages()


@pytest.mark.parametrize(("message", "spans"), LONE_CHATS, ids=[m for m, _ in LONE_CHATS])
def test_a_lone_spring_ai_chat_span_names_spring_ais_settings_not_the_genai_one(
    message: str, spans: list[DecodedSpan]
) -> None:
    """Read without its chat client span, Spring AI's chat model call is skipped as content not captured
    with Spring AI's own hint (its content settings and the page's ObservationFilter), as the chat client
    span is, never the OTel GenAI instrumentations' capture setting, which Spring AI does not read."""
    found = extracted(spans)
    [skip] = found.skips
    assert found.interactions == [] and (skip.reason, skip.convention) == (
        ExtractSkip.CONTENT_NOT_CAPTURED,
        "spring_ai",
    )
    assert f"{LOG_PROMPT}=true" in skip.detail and f"{LOG_COMPLETION}=true" in skip.detail
    assert "ObservationFilter" in skip.detail and GENAI_SETTING not in skip.detail


def _lone_chat_client_messages() -> list[tuple[str, Recording, list[DecodedSpan]]]:
    """Each Kafka message of a recorded Spring AI trace that holds only the chat client's span with its
    content on (it ends after every span below it: read before the rest of its trace, it is alone)."""
    found = []
    for recording in RECORDED.values():
        for at, message in enumerate(recording.messages):
            spans = decode_message(message.payload)
            names = [s.name for s in spans]
            if names == ["spring_ai chat_client"] and "gen_ai.completion" in spans[0].attributes:
                found.append((f"{recording.id}.msg{at}", recording, spans))
    return found


LONE_CLIENTS = _lone_chat_client_messages()
LONE_ADVISED = [c for c in LONE_CLIENTS if ADVISED in c[2][0].attributes]
LONE_OTHERS = [c for c in LONE_CLIENTS if ADVISED not in c[2][0].attributes]
# The context key each retrieving advisor keeps its documents under (Spring AI's), which the filter copies.
CONTEXT_KEYS = {
    "QuestionAnswerAdvisor": "qa_retrieved_documents",
    "RetrievalAugmentationAdvisor": "rag_document_context",
}


def _ids(lone: list[tuple[str, Recording, list[DecodedSpan]]]) -> list[str]:
    return [message for message, _, _ in lone]


@pytest.mark.parametrize(("message", "recording", "spans"), LONE_ADVISED, ids=_ids(LONE_ADVISED))
def test_a_lone_chat_client_span_of_an_advisor_call_is_judged_on_its_own(
    message: str, recording: Recording, spans: list[DecodedSpan]
) -> None:
    """The filter copies the documents a QuestionAnswerAdvisor or RetrievalAugmentationAdvisor retrieved
    from the chat client response's context onto the chat client span: read alone (before the rest of its
    trace reached Kafka), the call is judged on its own span, the faithful answer passing and the
    unfaithful one flagged by the offline judge."""
    [client] = spans
    [interaction] = extracted(spans).interactions
    record = interaction.record
    assert {(s.span_id, s.kind) for s in interaction.context_sources} == {(client.span_id, "span")}
    assert (record.query, record.answer) == (recording.question, recording.answer)
    if recording.conversation is None:
        assert sorted(record.contexts) == sorted(recording.documents)
        [result] = evaluate(record, ["faithfulness"])
        assert result.label == recording.offline_label, result.reason
    else:  # a chat turn: its own retrieval, never what the memory resent
        assert sorted(record.contexts) == sorted(recording.conversation["retrieved"])


def test_every_advisor_call_recorded_has_a_lone_chat_client_message_judged() -> None:
    judged = {recording.id for _, recording, _ in LONE_ADVISED}
    calls = {
        f"{line}/{shape}_{verdict}"
        for line in ("spring_ai", "spring_ai2")
        for shape in ("qa_advisor", "rag_advisor")
        for verdict in ("faithful", "unfaithful")
    }
    assert calls <= judged


@pytest.mark.parametrize(("message", "recording", "spans"), LONE_ADVISED, ids=_ids(LONE_ADVISED))
def test_a_lone_chat_client_span_without_its_advisors_documents_names_the_filter(
    message: str, recording: Recording, spans: list[DecodedSpan]
) -> None:
    """Without the advisors' documents on it (the page's earlier filter, or log-query-response off), the
    lone chat client span is skipped naming where Spring AI keeps them (the advisor's context key), the key
    the filter copies them to and the setting, not a bare `empty_context`."""
    [client] = without(spans, ADVISED)
    [skip] = extracted([client]).skips
    assert (skip.reason, skip.convention) == (ExtractSkip.CONTENT_NOT_CAPTURED, "spring_ai")
    named = [a for a in CONTEXT_KEYS if a in str(client.attributes[ADVISORS])]
    assert named and all(CONTEXT_KEYS[a] in skip.detail for a in named)
    assert f"{ADVISED})" in skip.detail and f"{LOG_QUERY_RESPONSE}=true" in skip.detail
    assert "none of the spans below it is in this trace (or this part of it" in skip.detail
    # The page's filter, by the class name the page shows.
    assert "SpanContentObservationFilter" in skip.detail and "docs/integrations/spring-ai.md" in skip.detail


@pytest.mark.parametrize(("message", "recording", "spans"), LONE_OTHERS, ids=_ids(LONE_OTHERS))
def test_a_lone_chat_client_span_without_advisors_says_where_its_documents_are(
    message: str, recording: Recording, spans: list[DecodedSpan]
) -> None:
    """A lone chat client span whose documents are not on it: documents the app put into its system text are
    read from it (`system_*`); a call whose model was given tools is skipped naming the tool spans and key
    that hold its documents and the setting that puts them there; one that retrieved nothing (a greeting
    with a chat memory only) is `empty_context`."""
    [client] = spans
    found = extracted(spans)
    if recording.scenario.startswith("system_"):
        [interaction] = found.interactions
        assert [s.kind for s in interaction.context_sources] == ["instructions"]
        return
    [skip] = found.skips
    assert found.interactions == [] and skip.convention == "spring_ai"
    if "search_docs" not in str(client.attributes.get(TOOL_NAMES)):
        assert skip.reason == ExtractSkip.EMPTY_CONTEXT
        return
    assert skip.reason == ExtractSkip.CONTENT_NOT_CAPTURED
    assert TOOL_RESULT in skip.detail and f"{TOOL_CONTENT}=true" in skip.detail
    assert "none of the spans below it is in this trace (or this part of it" in skip.detail


def test_the_lone_chat_clients_cover_each_kind_of_retrieval() -> None:
    named = " ".join(
        str(spans[0].attributes.get(key)) for _, _, spans in LONE_CLIENTS for key in (ADVISORS, TOOL_NAMES)
    )
    assert all(name in named for name in (*CONTEXT_KEYS, "search_docs"))
    assert any(r.scenario.startswith("system_") for _, r, _ in LONE_OTHERS)


def test_the_hint_is_the_same_for_the_chat_client_and_a_lone_chat_span() -> None:
    [(_, chat)] = LONE_CHATS[:1]
    [lone] = extracted(chat).skips
    [client] = extracted(spans_of(RECORDED["spring_ai/no_content_faithful"])).skips
    hint = "Spring AI writes prompts, completions and retrieved documents only to the application log; set"
    assert hint in lone.detail and hint in client.detail
