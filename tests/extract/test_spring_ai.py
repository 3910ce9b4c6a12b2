"""Spring AI's spans, recorded from a real Spring Boot app (fixtures/spring_ai, spring_ai_conversation; the
same app on Spring AI 2.0 and Spring Boot 4: spring_ai2, spring_ai2_conversation, where the tool span is
`execute_tool` below a Tool Calling advisor span): the chat client call read with its vector store retrieval;
without the content on the spans, a skip that names the Spring settings to turn on; each chat turn in its
conversation (the chat memory's id)."""

from __future__ import annotations

import pytest
from recorded import Recording, extracted, read_as_run, read_chat_turn, recordings, spans_of, without

from tracescore.consume import decode_message
from tracescore.model import DecodedSpan
from tracescore.score import evaluate

RECORDED = {
    r.id: r for r in recordings() if r.source in ("spring_ai", "spring_ai2", "spring_ai_conversation")
}
LINES = pytest.mark.parametrize("line", ["spring_ai", "spring_ai2"])  # Spring AI 1.1 and 2.0
QUESTION_WORDS = "How long does the Aurora X2 battery last?"
TURNS = [r for r in RECORDED.values() if r.conversation and r.expected[0] == "interaction"]
LOG_COMPLETION = "spring.ai.chat.client.observations.log-completion"
LOG_QUERY_RESPONSE = "spring.ai.vectorstore.observations.log-query-response"
TOOL_CONTENT = "spring.ai.tools.observations.include-content"
QUERY_RESPONSE, TOOL_RESULT = "db.vector.query.response.documents", "spring.ai.tool.call.result"
TOOL_NAMES = "spring.ai.chat.client.tool.names"


@LINES
@pytest.mark.parametrize("scenario", ["qa_advisor", "rag_advisor"])
def test_both_advisors_are_read_with_the_vector_store_documents_as_context(line: str, scenario: str) -> None:
    recording = RECORDED[f"{line}/{scenario}_faithful"]
    interaction = read_as_run(recording, "spring_ai", "spring_ai chat_client")
    assert {s.kind for s in interaction.context_sources} == {"retriever"}
    # Micrometer writes the usage as strings, and Spring AI's is cumulative over a tool loop: left unread.
    run = interaction.run
    assert run is not None and (run.prompt_tokens, run.steps) == (None, 1)


@LINES
def test_content_capture_off_is_skipped_naming_the_spring_settings(line: str) -> None:
    found = extracted(spans_of(RECORDED[f"{line}/no_content_faithful"]))
    [skip] = found.skips
    assert found.interactions == [] and skip.reason == "content_not_captured"
    assert f"{LOG_COMPLETION}=true" in skip.detail and f"{LOG_QUERY_RESPONSE}=true" in skip.detail
    assert "ObservationFilter" in skip.detail


@pytest.mark.parametrize(
    ("key", "setting", "other"),
    [
        ("gen_ai.completion", LOG_COMPLETION, LOG_QUERY_RESPONSE),
        (QUERY_RESPONSE, LOG_QUERY_RESPONSE, LOG_COMPLETION),
    ],
)
def test_one_setting_off_is_named_alone(key: str, setting: str, other: str) -> None:
    spans = without(spans_of(RECORDED["spring_ai/qa_advisor_faithful"]), key)
    [skip] = extracted(spans).skips
    assert skip.reason == "content_not_captured"
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
    assert skip.reason == "content_not_captured"
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
        "content_not_captured",
        "spring_ai",
    )
    assert f"{LOG_PROMPT}=true" in skip.detail and f"{LOG_COMPLETION}=true" in skip.detail
    assert "ObservationFilter" in skip.detail and GENAI_SETTING not in skip.detail


def _lone_chat_client_messages() -> list[tuple[str, list[DecodedSpan]]]:
    """Each Kafka message of a recorded Spring AI trace that holds only the chat client's span with its
    content on (it ends after every span below it: read before the rest of its trace, it is alone)."""
    found = []
    for recording in RECORDED.values():
        for at, message in enumerate(recording.messages):
            spans = decode_message(message.payload)
            if [s.name for s in spans] == ["spring_ai chat_client"] and "gen_ai.completion" in spans[
                0
            ].attributes:
                found.append((f"{recording.id}.msg{at}", spans))
    return found


LONE_CLIENTS = _lone_chat_client_messages()
# Where each retrieval a chat client names keeps its documents, and the setting that puts them there.
HELD_BY = {
    "QuestionAnswerAdvisor": (QUERY_RESPONSE, LOG_QUERY_RESPONSE),
    "RetrievalAugmentationAdvisor": (QUERY_RESPONSE, LOG_QUERY_RESPONSE),
    "search_docs": (TOOL_RESULT, TOOL_CONTENT),
}


@pytest.mark.parametrize(("message", "spans"), LONE_CLIENTS, ids=[m for m, _ in LONE_CLIENTS])
def test_a_lone_chat_client_span_says_where_its_documents_are_and_how_to_get_them(
    message: str, spans: list[DecodedSpan]
) -> None:
    """The chat client span holds the question, the system text and the answer (the filter's), never the
    retrieved documents. Read without the spans below it: documents the app put into its system text are
    read from it (`system_*`); a call whose advisors retrieved (or whose model was given tools) is skipped
    naming the spans and keys that hold its documents and Spring AI's hint with the setting that puts them
    there, not a bare `empty_context`; one that retrieved nothing (a greeting with a chat memory only) still
    is that."""
    [client] = spans
    named = " ".join(str(client.attributes.get(k)) for k in ("spring.ai.chat.client.advisors", TOOL_NAMES))
    held = [where for name, where in HELD_BY.items() if name in named]
    found = extracted(spans)
    if "gen_ai.system_instructions" in client.attributes:
        [interaction] = found.interactions
        assert [s.kind for s in interaction.context_sources] == ["instructions"]
        return
    [skip] = found.skips
    assert found.interactions == [] and skip.convention == "spring_ai"
    if not held:
        assert skip.reason == "empty_context"
        return
    assert skip.reason == "content_not_captured"
    for key, setting in held:
        assert key in skip.detail and f"{setting}=true" in skip.detail
    assert "none of them is in this trace (or this part of it" in skip.detail
    assert "ObservationFilter" in skip.detail


def test_the_lone_chat_clients_cover_each_kind_of_retrieval() -> None:
    named = {
        str(spans[0].attributes.get(key))
        for _, spans in LONE_CLIENTS
        for key in ("spring.ai.chat.client.advisors", TOOL_NAMES)
    }
    assert all(any(name in n for n in named) for name in HELD_BY)


def test_the_hint_is_the_same_for_the_chat_client_and_a_lone_chat_span() -> None:
    [(_, chat)] = LONE_CHATS[:1]
    [lone] = extracted(chat).skips
    [client] = extracted(spans_of(RECORDED["spring_ai/no_content_faithful"])).skips
    hint = "Spring AI writes prompts, completions and retrieved documents only to the application log; set"
    assert hint in lone.detail and hint in client.detail
