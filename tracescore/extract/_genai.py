"""OpenTelemetry GenAI semantic conventions: `gen_ai.operation.name` with message content on the span.

The interaction is the outermost `invoke_workflow` / `invoke_agent` span, or without one each outermost `chat`
/ `text_completion` / `generate_content` span (a chat that asks for a tool is one interaction with the chat
that answers after it). The question is the last user message of `gen_ai.input.messages` (of the first chat
call when the agent span has none: Pydantic AI), the answer the assistant text of `gen_ai.output.messages`
(else the last chat call's). The documents come from `retrieval` spans (`gen_ai.retrieval.documents`) and
`execute_tool` spans (`gen_ai.tool.call.result`) below the interaction or beside a chat span, and the texts
of a vector database query the app made beside a chat call before it (OpenLLMetry's `_vector_db`); without a
tool span that recorded its result, from the tool results passed to the last chat call; after them, the tool
results of the conversation's earlier turns in `gen_ai.input.messages`. System instructions are never read as
documents. A chat span without the messages attributes is read from the OpenAI request and response JSON
that Pydantic Logfire's first span format writes (`request_data.messages`, `response_data.message`). Messages
written as `gen_ai.client.inference.operation.details` span events, or as Pydantic AI's version 1 `events`,
are read as the attributes they stand for (`_genai_events`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from tracescore import semconv
from tracescore._plural import counted
from tracescore.extract._convention import Convention, Reading, not_inside, unlabelled_note
from tracescore.extract._genai_events import event_messages, rebuilt
from tracescore.extract._history import MadeCall, TurnResult, genai_tool_calls, genai_tool_results
from tracescore.extract._read import (
    Prompt,
    assistant_text,
    documents_of,
    message_prompt,
    parse_json,
    user_text,
)
from tracescore.extract._vector_db import VectorDB
from tracescore.model import RESPONSE_ID_PREFIX, ContextSourceKind, DecodedSpan, Trace

__all__ = ["GenAI"]


class GenAI(Convention):
    """The OTel GenAI semantic conventions' keys (`gen_ai.*`, most from `semconv`) and readers."""

    name = "genai"
    OPERATION_NAME = semconv.GEN_AI_OPERATION_NAME
    INPUT_MESSAGES = semconv.GEN_AI_INPUT_MESSAGES
    OUTPUT_MESSAGES = semconv.GEN_AI_OUTPUT_MESSAGES
    RETRIEVAL_DOCUMENTS = semconv.GEN_AI_RETRIEVAL_DOCUMENTS
    RETRIEVAL_QUERY = semconv.GEN_AI_RETRIEVAL_QUERY_TEXT
    # How many documents the retrieval returned, where a producer records fewer (OpenLIT keeps the first 3).
    RETRIEVAL_DOCUMENT_COUNT = "gen_ai.retrieval.document_count"
    SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
    TOOL_NAME = "gen_ai.tool.name"
    TOOL_DEFINITIONS = "gen_ai.tool.definitions"
    # pydantic-ai before its GenAI-convention version 2 wrote `tool_response` / `tool_arguments`.
    TOOL_RESULT = ("gen_ai.tool.call.result", "tool_response")
    TOOL_ARGUMENTS = ("gen_ai.tool.call.arguments", "tool_arguments")
    FINAL_RESULT = "final_result"  # pydantic-ai: the agent's output
    # Pydantic Logfire's first span format (`instrument_openai(version=1)`, and Logfire before it wrote GenAI
    # messages): the OpenAI request and response as JSON, their `messages` / `message` in OpenAI's shape.
    REQUEST_DATA = "request_data"
    RESPONSE_DATA = "response_data"
    # The messages' shape (`gen_ai.input.messages` / `gen_ai.output.messages`): a message's role, parts and
    # finish reason; a part's type and fields; the part types.
    ROLE, PARTS, FINISH_REASON = "role", "parts", "finish_reason"
    USER, ASSISTANT, TOOL = "user", "assistant", "tool"
    PART_TYPE, PART_CONTENT, PART_NAME, PART_ID = "type", "content", "name", "id"
    PART_ARGUMENTS, PART_RESPONSE = "arguments", "response"
    TEXT_PART, TOOL_CALL_PART, TOOL_RESPONSE_PART = "text", "tool_call", "tool_call_response"
    # Messages written elsewhere (`_genai_events`): the latest conventions' opt-in span event, which carries
    # the attributes above; the v1.36 events, one per message by role, then the reply (`gen_ai.choice`), their
    # bodies in OpenAI's message shape, as Pydantic AI's version 1 lists them in a chat span's `events`.
    OPERATION_DETAILS = "gen_ai.client.inference.operation.details"
    EVENTS_ATTRIBUTE = "events"
    EVENT_NAME = semconv.EVENT_NAME
    SYSTEM_MESSAGE, CHOICE = "gen_ai.system.message", "gen_ai.choice"
    MESSAGE_EVENTS = {
        "gen_ai.user.message": USER,
        "gen_ai.assistant.message": ASSISTANT,
        "gen_ai.tool.message": TOOL,
    }
    # LiteLLM's events (`LITELLM_OTEL_INTEGRATION_ENABLE_EVENTS`): one per message of any role, the role in
    # its body, as the events above are by role; then one per choice, as `gen_ai.choice`.
    PROMPT_EVENT, COMPLETION_EVENT = "gen_ai.content.prompt", "gen_ai.content.completion"
    ROLE_EVENTS = {"system": SYSTEM_MESSAGE, **{role: name for name, role in MESSAGE_EVENTS.items()}}
    CHOICE_EVENTS = frozenset({CHOICE, COMPLETION_EVENT})
    EVENT_CONTENT, EVENT_MESSAGE = "content", "message"
    EVENT_TOOL_CALLS, EVENT_FUNCTION = "tool_calls", "function"
    # The call a tool message answers: its `id` (the v1.36 events), or OpenAI's `tool_call_id` (LiteLLM's).
    EVENT_TOOL_CALL_IDS = (PART_ID, "tool_call_id")
    # What a span with content capture on records (messages as attributes, or Logfire's first format, or
    # Pydantic AI's answer); the OpenTelemetry GenAI util's setting that puts it on the spans.
    CONTENT_KEYS = (
        INPUT_MESSAGES,
        OUTPUT_MESSAGES,
        SYSTEM_INSTRUCTIONS,
        REQUEST_DATA,
        RESPONSE_DATA,
        FINAL_RESULT,
    )
    CAPTURE_SETTING = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    OPT_IN = "OTEL_SEMCONV_STABILITY_OPT_IN"  # what moves an instrumentation to the latest conventions
    # Frameworks that trace themselves in these conventions and gate the messages behind a setting of their
    # own, by the instrumentation scope their spans carry: the skip names theirs, not the util's.
    OWN_CAPTURE_SETTINGS = {
        "agent_framework": "Microsoft Agent Framework records them only with sensitive data on "
        "(configure_otel_providers(enable_sensitive_data=True), or ENABLE_SENSITIVE_DATA=true)",
    }
    # A history the model's service keeps (the OpenAI Responses API, `previous_response_id`): each model
    # call's response id, and the previous response a turn's request named, which Microsoft Agent Framework
    # writes as the agent span's conversation id (its session's last response as the run starts). On a model
    # call that key names the call before it in the same turn (a tool loop's), never the previous turn's.
    RESPONSE_ID = "gen_ai.response.id"
    PREVIOUS_RESPONSE_ID = semconv.GEN_AI_CONVERSATION_ID
    # LiteLLM's `otel` callback, unless opted in to the latest conventions, writes its call type as the
    # operation: `acompletion` for an async call, as every call its proxy makes.
    OPERATION_ALIASES = {"completion": "chat", "acompletion": "chat", "atext_completion": "text_completion"}
    # The end user the app named in OpenAI's `user` field, as LiteLLM records it (the key OpenLLMetry's
    # conventions name).
    END_USER = "llm.user"
    INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    RETRIEVAL = "retrieval"
    EXECUTE_TOOL = "execute_tool"
    INVOKE_AGENT = "invoke_agent"
    INTERACTION_KINDS = frozenset({"invoke_workflow", INVOKE_AGENT})
    LLM_KINDS = frozenset({"chat", "text_completion", "generate_content"})
    TOOL_KINDS = frozenset({EXECUTE_TOOL})
    LLM_CALL = "chat"
    LONE_LLM_CALLS = True
    OPEN = True
    LOOKED_IN = {
        "question": f"the last user message of {INPUT_MESSAGES} (or {REQUEST_DATA}) of the span or its "
        "first chat",
        "answer": f"the assistant message of {OUTPUT_MESSAGES} (or {RESPONSE_DATA}) of the span or its last "
        "chat",
        "documents": f"the content of each document in {RETRIEVAL_DOCUMENTS} of retrieval spans, "
        f"{TOOL_RESULT[0]} of execute_tool spans and tool results in {INPUT_MESSAGES}; "
        "document ids alone cannot be checked",
    }

    RUN_TOOL_NAME = (TOOL_NAME,)
    RUN_TOOL_ARGUMENTS = TOOL_ARGUMENTS
    RUN_TOOL_RESULT = TOOL_RESULT
    RUN_PROMPT_TOKENS = INPUT_TOKENS
    RUN_COMPLETION_TOKENS = OUTPUT_TOKENS
    RUN_MODEL_OUTPUT = (OUTPUT_MESSAGES,)
    RUN_TOOL_DEFINITIONS = {TOOL_DEFINITIONS: ()}

    def candidates(self, trace: Trace) -> Iterable[Reading]:
        # Read from the spans as they would be with the messages on them, wherever the producer wrote them.
        return super().candidates(self.with_content(trace))

    def with_content(self, trace: Trace) -> Trace:
        """`trace` with the messages its spans' events hold as their attributes (`_genai_events`)."""
        return rebuilt(trace, partial(event_messages, self))

    def kind(self, span: DecodedSpan) -> str:
        operation = span.attributes.get(self.OPERATION_NAME)
        if isinstance(operation, str):
            return self.OPERATION_ALIASES.get(operation, operation)
        # Span names follow `{operation} {target}` when a producer omits the attribute.
        name = span.name
        if name.startswith((self.INVOKE_AGENT, self.EXECUTE_TOOL)):
            return name.split(" ", 1)[0]
        return self.EXECUTE_TOOL if self.TOOL_NAME in span.attributes else ""

    def is_retrieval(self, span: DecodedSpan) -> bool:
        return self.kind(span) == self.RETRIEVAL

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        messages = self._output_messages(span)
        if isinstance(messages, list):
            for message in messages:
                parts = message.get(self.PARTS) if isinstance(message, dict) else None
                if isinstance(parts, list) and any(
                    isinstance(p, dict) and p.get(self.PART_TYPE) == self.TOOL_CALL_PART for p in parts
                ):
                    return True
        return self.llm_output(span) is None

    def collect(self, reading: Reading) -> Reading:
        trace, anchor, around = reading.trace, reading.anchor, reading.around
        retrievals = [s for s in around if self.is_retrieval(s)]
        tools = reading.loop_tools([s for s in around if self.is_tool(s)])
        chats = reading.loop_llms([s for s in around if self.is_llm(s)])
        # The app's own queries of a vector database's client (`_vector_db`), before the answering call.
        queries = VectorDB.ran_before(around, reading.since, chats[-1]) if chats else []
        return reading.found(
            retrievals=[(span, ContextSourceKind.RETRIEVER) for span in (*retrievals, *queries)],
            # A retrieval the workflow made itself; a tool's is the model's search, not the question.
            asked=not_inside(trace, retrievals, anchor, self.is_tool),
            tools=tools,
            llms=chats,
            answering=not_inside(trace, chats, anchor, self.is_tool),
            sources=[*retrievals, *queries, *chats, *tools],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        return documents_of(span.attributes.get(self.RETRIEVAL_DOCUMENTS))

    def read_retrieval(self, reading: Reading, span: DecodedSpan, kind: ContextSourceKind) -> None:
        if VectorDB.is_query(span):
            VectorDB.read(reading, span)
            return
        documents = self.documents(span, kind) or []
        reading.contexts.add(span, kind, documents)
        count = span.attributes.get(self.RETRIEVAL_DOCUMENT_COUNT)
        if isinstance(count, int) and count > len(documents):
            # An answer resting on a document the producer left out reads as unsupported: say so.
            reading.contexts.note(
                f"{span.name!r} returned {counted(count, 'document')} and recorded {len(documents)} "
                f"({self.RETRIEVAL_DOCUMENT_COUNT}): the others are not judged"
            )

    def reads_tool_messages(self, reading: Reading) -> bool:
        # No tool span recorded its result (autogen-core's carry names only; content capture off): the
        # results passed to the model are what its answer rests on.
        return self.no_tool_result(reading.tools)

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        return genai_tool_results(self._input_messages(llm))

    def output_tool_calls(self, llm: DecodedSpan) -> Mapping[str, MadeCall]:
        return genai_tool_calls(self._output_messages(llm))

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        return message_prompt(self._input_messages(span), span.attributes.get(self.SYSTEM_INSTRUCTIONS))

    def no_documents_note(self, reading: Reading) -> str | None:
        if (silent := VectorDB.no_documents_note(reading)) is not None:
            return silent
        if any(self.SYSTEM_INSTRUCTIONS in s.attributes for s in (reading.anchor, *reading.llms)):
            return unlabelled_note(self.SYSTEM_INSTRUCTIONS)
        return None

    def content_not_captured(self, reading: Reading) -> str | None:
        # Any message, on a span or in its events (moved onto it by `with_content`), means capture was on.
        spans = (reading.anchor, *reading.llms)
        if not reading.llms or any(key in s.attributes for s in spans for key in self.CONTENT_KEYS):
            return None
        recorded = (
            f"its {len(reading.llms)} chat span(s) recorded no messages ({self.INPUT_MESSAGES}, "
            f"{self.OUTPUT_MESSAGES}), neither as attributes nor as span events"
        )
        own = next((o for s in spans if (o := self.OWN_CAPTURE_SETTINGS.get(s.scope_name))), None)
        if own is not None:
            return f"{recorded}: {own}; turn it on to judge it"
        return (
            f"{recorded}: the producer's content "
            f"capture is off or writes them elsewhere (the OpenTelemetry GenAI instrumentations' "
            f"{self.CAPTURE_SETTING}=EVENT_ONLY, or =true on their default v1.30 conventions "
            "(opentelemetry-instrumentation-openai-v2), sends them to log records, read only when the "
            "Collector writes them to the spans topic (collectors/genai-log-events.yaml); NO_CONTENT, "
            f"the default, records none): set {self.CAPTURE_SETTING}=SPAN_ONLY or SPAN_AND_EVENT (with "
            f"{self.OPT_IN}=gen_ai_latest_experimental on the v1.30 conventions), or turn the "
            "producer's content capture on, to judge it"
        )

    def more_conversation(self, reading: Reading) -> tuple[str | None, str | None]:
        for span in (reading.anchor, *reading.llms):
            user = span.attributes.get(self.END_USER)
            if isinstance(user, str) and user:
                return None, user
        return None, None

    def response_chain(self, reading: Reading) -> tuple[str | None, str | None]:
        answered = sorted(
            (llm for llm in reading.llms if _response_id(llm.attributes.get(self.RESPONSE_ID))),
            key=lambda llm: llm.end_time_unix_nano,
        )
        if not answered:
            return None, None
        own = {llm.attributes[self.RESPONSE_ID] for llm in answered}
        first = reading.group[0] if reading.group else reading.anchor
        previous = first.attributes.get(self.PREVIOUS_RESPONSE_ID)
        named = previous if _response_id(previous) and previous not in own else None
        return named, answered[-1].attributes[self.RESPONSE_ID]

    def question(self, reading: Reading) -> str | None:
        question = self._question(reading.llms[0] if reading.group else reading.anchor)
        if question is None and reading.llms:
            question = self._question(reading.llms[0])
        return question

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        query = span.attributes.get(self.RETRIEVAL_QUERY)
        return str(query) if query is not None else None

    def own_answer(self, span: DecodedSpan) -> str | None:
        return self.llm_output(span)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        return assistant_text(self._output_messages(llm))

    def answer(self, reading: Reading) -> str | None:
        answer = super().answer(reading)
        final = reading.anchor.attributes.get(self.FINAL_RESULT)
        return final if answer is None and isinstance(final, str) else answer

    def _question(self, span: DecodedSpan) -> str | None:
        return user_text(self._input_messages(span))

    def _input_messages(self, span: DecodedSpan) -> Any:
        if self.INPUT_MESSAGES in span.attributes:
            return parse_json(span.attributes[self.INPUT_MESSAGES])
        request = parse_json(span.attributes.get(self.REQUEST_DATA))
        return request.get("messages") if isinstance(request, Mapping) else None

    def _output_messages(self, span: DecodedSpan) -> Any:
        if self.OUTPUT_MESSAGES in span.attributes:
            return parse_json(span.attributes[self.OUTPUT_MESSAGES])
        response = parse_json(span.attributes.get(self.RESPONSE_DATA))
        message = response.get("message") if isinstance(response, Mapping) else None
        return [message] if isinstance(message, Mapping) else None


def _response_id(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(RESPONSE_ID_PREFIX)
