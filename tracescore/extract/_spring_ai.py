"""Spring AI's Micrometer observations, exported as OpenTelemetry spans by Micrometer Tracing's OpenTelemetry
bridge: `spring.ai.kind` on every span of the framework's own (`chat_client`, `advisor`, `vector_store`,
`tool_call`), `gen_ai.*` keys on the chat model's call.

The interaction is the outermost `chat_client` span (`spring_ai chat_client`: one `ChatClient` call with its
advisors). The documents are those its QuestionAnswerAdvisor or RetrievalAugmentationAdvisor retrieved, on the
span itself (`gen_ai.retrieval.documents`: the page's filter copies them from the chat client response's
context, where Spring AI keeps them, so the span is judged even when it reaches Kafka without the spans
below it), else those of the `vector_store` query spans below it (`db.vector.query.response.documents`, a
JSON list of texts: the same retrieval, as the store returned it), and the results of the `tool_call` spans
the model asked for (`spring.ai.tool.call.result`, which Spring AI
records itself with `spring.ai.tools.observations.include-content`; a tool whose own vector store query was
read is not read again); the question the chat client span's `gen_ai.prompt` (else the query's
`db.vector.query.content`), the answer its `gen_ai.completion`. With neither, documents the app put into the
system text (`gen_ai.system_instructions`) or the user text under a label are read by the shared prompt
step (`_prompt`). The conversation is
`spring.ai.chat.client.conversation.id` (a chat memory advisor's).

Spring AI 1.x and 2.0 put none of these texts on spans themselves: their `log-prompt`, `log-completion` and
`log-query-response` settings write them to the application log. The small ObservationFilter on the Spring AI
integration page adds them to the spans when those settings are on; without it (or with them off) the
interaction is skipped as `content_not_captured`, naming the settings, rather than judged on a guess. A chat
model call of Spring AI's (its span, from Spring Boot's tracer, carries no `spring.ai.kind`) read with no
chat client span around it, and no message on it (its span reached Kafka in a message of its own, or the app
called the `ChatModel` itself), is skipped the same way, naming the same settings and filter, which put the
content on the chat client span; one that carries messages is left to the OTel GenAI reader. A chat client
span without its advisors' documents (an earlier filter, or log-query-response off; the user text on it is
the app's, before any advisor added its retrieval) read with no span below it: its retrieving advisors
(`spring.ai.chat.client.advisors`) or tools (`spring.ai.chat.client.tool.names`) name where the documents
are and what puts them on the chat client span, skipped the same way; one that names neither retrieved
nothing (`empty_context`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tracescore.extract._convention import Convention, Reading, not_inside, without_wrappers
from tracescore.extract._genai import GenAI
from tracescore.extract._openllmetry import OpenLLMetry
from tracescore.extract._read import Prompt, documents_of, message_prompt, parse_json
from tracescore.model import ContextSourceKind, DecodedSpan, Trace

__all__ = ["SpringAI"]


class SpringAI(Convention):
    """The keys Spring AI's observations write (`spring.ai.*`, `db.vector.*`) and their readers."""

    name = "spring_ai"
    KIND = "spring.ai.kind"
    CHAT_CLIENT, VECTOR_STORE, TOOL_CALL = "chat_client", "vector_store", "tool_call"
    OPERATION = "db.operation.name"
    QUERY = "query"
    QUERY_CONTENT = "db.vector.query.content"
    # What the integration page's ObservationFilter adds, under Spring AI's own names (its docs name
    # gen_ai.prompt / gen_ai.completion, which OpenLLMetry writes with an index: `gen_ai.prompt.0.content`).
    QUERY_RESPONSE = "db.vector.query.response.documents"
    # The documents the chat client's advisors retrieved, which Spring AI keeps in the chat client response's
    # context only (under these advisors' context keys): the filter copies them onto the chat_client span as
    # the OTel GenAI conventions name retrieved documents (a JSON list of {id, score, content}).
    ADVISED_DOCUMENTS = GenAI.RETRIEVAL_DOCUMENTS
    ADVISOR_CONTEXT_KEYS = {
        "QuestionAnswerAdvisor": "qa_retrieved_documents",
        "RetrievalAugmentationAdvisor": "rag_document_context",
    }
    PROMPT = OpenLLMetry.PROMPT
    COMPLETION = OpenLLMetry.COMPLETION
    # The system text the filter adds with log-prompt, as the OTel GenAI conventions name it (a JSON list of
    # text parts, or text).
    SYSTEM_INSTRUCTIONS = GenAI.SYSTEM_INSTRUCTIONS
    CONVERSATION_ID = "spring.ai.chat.client.conversation.id"
    # What Spring AI itself records of a chat client call: its advisors' names and its tools' (JSON lists).
    ADVISORS = "spring.ai.chat.client.advisors"
    TOOL_NAMES = "spring.ai.chat.client.tool.names"
    # Spring AI's advisors that retrieve, each with a vector_store query span below the chat client span.
    RETRIEVING_ADVISORS = frozenset(ADVISOR_CONTEXT_KEYS)
    TOOL_NAME = "spring.ai.tool.definition.name"
    TOOL_ARGUMENTS = "spring.ai.tool.call.arguments"
    TOOL_RESULT = "spring.ai.tool.call.result"
    # The chat model's call: no `spring.ai.kind`, OTel GenAI's operation name, and the instrumentation scope
    # of Spring Boot's tracer (Micrometer Tracing's OpenTelemetry bridge, as Spring Boot sets it up).
    LLM_OPERATION = (GenAI.OPERATION_NAME, "chat")
    SPRING_BOOT_SCOPE = "org.springframework.boot"
    # Spring AI's settings that decide what the filter puts on the spans.
    LOG_PROMPT = "spring.ai.chat.client.observations.log-prompt"
    LOG_COMPLETION = "spring.ai.chat.client.observations.log-completion"
    LOG_QUERY_RESPONSE = "spring.ai.vectorstore.observations.log-query-response"
    TOOL_CONTENT = "spring.ai.tools.observations.include-content"
    # The filter that puts them there: its class on the integration page (the recording app's own).
    FILTER = "SpanContentObservationFilter"
    PAGE = "docs/integrations/spring-ai.md"
    INTERACTION_KINDS = frozenset({CHAT_CLIENT})
    LLM_KINDS = frozenset({"chat"})
    TOOL_KINDS = frozenset({TOOL_CALL})
    MARKER = KIND
    LLM_CALL = "chat model call"
    LOOKED_IN = {
        "question": f"{PROMPT} of the chat_client span, and {QUERY_CONTENT} of its vector_store queries",
        "answer": f"{COMPLETION} of the chat_client span",
        "documents": f"{ADVISED_DOCUMENTS} of the chat_client span (its advisors'), else {QUERY_RESPONSE} of "
        f"the vector_store query spans below it, and {TOOL_RESULT} of its tool_call spans",
    }

    RUN_TOOL_NAME = (TOOL_NAME,)
    RUN_TOOL_ARGUMENTS = (TOOL_ARGUMENTS,)
    RUN_TOOL_RESULT = (TOOL_RESULT,)

    def kind(self, span: DecodedSpan) -> str:
        kind = span.attributes.get(self.KIND)
        if isinstance(kind, str):
            return kind
        key, chat = self.LLM_OPERATION
        return chat if span.attributes.get(key) == chat else ""

    def present(self, trace: Trace) -> bool:
        """A span of Spring AI's own, or a chat model call from Spring Boot's tracer."""
        # Runs on every trace, and most have no Spring AI span: one plain loop.
        for span in trace.spans:  # noqa: SIM110
            if self.KIND in span.attributes or self._bare_chat(span):
                return True
        return False

    def candidates(self, trace: Trace) -> Iterator[Reading]:
        """The chat client calls; without one, each chat model call of Spring AI's that recorded no message,
        read only to say what puts the content on the spans."""
        found = False
        for reading in super().candidates(trace):
            found = True
            yield reading
        if found:
            return
        for chat in trace.outermost(self._bare_chat):
            yield self.collect(Reading(trace, self, chat, list(trace.descendants(chat))))

    def _bare_chat(self, span: DecodedSpan) -> bool:
        """A chat model call from Spring Boot's tracer with no message on it, as attributes or events."""
        return (
            span.scope_name == self.SPRING_BOOT_SCOPE
            and self.kind(span) == self.LLM_OPERATION[1]
            and not span.events
            and not any(key in span.attributes for key in GenAI.CONTENT_KEYS)
        )

    def collect(self, reading: Reading) -> Reading:
        queries = [
            s
            for s in reading.around
            if self.kind(s) == self.VECTOR_STORE and s.attributes.get(self.OPERATION) == self.QUERY
        ]
        llms = [s for s in reading.around if self.is_llm(s)]
        tools = [s for s in reading.around if self.is_tool(s)]
        recorded = [s for s in queries if self.QUERY_RESPONSE in s.attributes]
        # A query the app's advisors made (not a tool's search) may name the question.
        advised = not_inside(reading.trace, queries, reading.anchor, self.is_tool)
        read = [(s, ContextSourceKind.RETRIEVER) for s in queries]
        if self.ADVISED_DOCUMENTS in reading.anchor.attributes:
            # The advisors' documents as they went into the prompt (joined, post-processed), read once: their
            # queries' results are not read again; a tool's own query still is.
            by_advisors = {s.span_id for s in advised}
            read = [
                (reading.anchor, ContextSourceKind.SPAN),
                *(r for r in read if r[0].span_id not in by_advisors),
            ]
        return reading.found(
            retrievals=read,
            asked=advised,
            tools=tools,
            tool_results=without_wrappers(reading.trace, tools, recorded),
            llms=llms,
            sources=[*queries, *tools, *llms],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        return documents_of(span.attributes.get(self._documents_key(kind)))

    def _documents_key(self, kind: ContextSourceKind) -> str:
        """Where a retrieval read keeps its documents: the chat client span its advisors', a query its own."""
        return self.ADVISED_DOCUMENTS if kind == ContextSourceKind.SPAN else self.QUERY_RESPONSE

    def question(self, reading: Reading) -> str | None:
        return _text(reading.anchor, self.PROMPT)

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """The chat client's system text (`gen_ai.system_instructions`) and user text (`gen_ai.prompt`), with
        log-prompt on and the integration page's filter."""
        if not self.is_interaction(span):
            return None
        system = message_prompt(None, span.attributes.get(self.SYSTEM_INSTRUCTIONS))
        return Prompt(system.instructions if system else None, _text(span, self.PROMPT))

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return _text(span, self.QUERY_CONTENT)

    def own_answer(self, span: DecodedSpan) -> str | None:
        return _text(span, self.COMPLETION)

    def content_not_captured(self, reading: Reading) -> str | None:
        if self.is_llm(reading.anchor):  # a chat model call read alone: its content is never on its span
            hint = self._hint(self.LOG_PROMPT, self.LOG_COMPLETION)
            return (
                "this Spring AI chat model call recorded no message, and the spring_ai chat_client span "
                f"around it, where its content is judged, is not in this trace (or this part of it): {hint}"
            )
        missing = []
        if self.COMPLETION not in reading.anchor.attributes:
            missing.append((self.COMPLETION, "chat_client span", self.LOG_COMPLETION))
        documents = any(self._documents_key(k) in s.attributes for s, k in reading.retrievals) or any(
            self.TOOL_RESULT in s.attributes for s in reading.tools
        )
        if reading.retrievals and not documents:
            where = (
                f"chat_client span (its advisors'), nor {self.QUERY_RESPONSE} on its vector_store query span"
            )
            missing.append((self.ADVISED_DOCUMENTS, where, self.LOG_QUERY_RESPONSE))
        if reading.tools and not documents:
            missing.append((self.TOOL_RESULT, "tool_call span", self.TOOL_CONTENT))
        if missing:
            keys = "; and no ".join(f"{key} on its {where}" for key, where, _ in missing)
            return f"it recorded no {keys}: {self._hint(*(setting for _, _, setting in missing))}"
        return self._read_apart(reading) if not reading.around else None

    def _read_apart(self, reading: Reading) -> str | None:
        """A chat client span read with no span below it (it reached Kafka in a message of its own and was
        read before the rest of its trace), whose advisors retrieved documents that are not on it, or whose
        model was given tools: where its documents are, none of which is here. None when it names neither
        (nothing retrieved, or its advisors' documents on it and none found)."""
        attributes = reading.anchor.attributes
        advisors = sorted(self.RETRIEVING_ADVISORS.intersection(_names(attributes.get(self.ADVISORS))))
        tools = _names(attributes.get(self.TOOL_NAMES))
        held = []  # (what holds the documents, the setting that puts them on a span)
        if advisors and self.ADVISED_DOCUMENTS not in attributes:
            kept = " and ".join(f"{a}'s {self.ADVISOR_CONTEXT_KEYS[a]}" for a in advisors)
            held.append(
                (
                    f"its {' and '.join(advisors)} retrieved documents that are not on the chat_client span "
                    f"({self.ADVISED_DOCUMENTS}; Spring AI keeps them in the chat client response's context "
                    f"only: {kept}) but on the vector_store query spans below it ({self.QUERY_RESPONSE})",
                    self.LOG_QUERY_RESPONSE,
                )
            )
        if tools:
            held.append(
                (
                    f"its model was given tools ({', '.join(tools)}) whose results are on their tool_call "
                    f"spans ({self.TOOL_RESULT})",
                    self.TOOL_CONTENT,
                )
            )
        if not held:
            return None
        where = "; and ".join(place for place, _ in held)
        return (
            f"this Spring AI chat_client call's documents are not on its span: {where}, and none of the "
            "spans below it is in this trace (or this part of it: the span reached Kafka in a message of its "
            f"own and was read before the rest of its trace). {self._hint(*(s for _, s in held))}"
        )

    @classmethod
    def _hint(cls, *settings: str) -> str:
        """What to turn on for Spring AI to put the content on its spans (the one place this is said)."""
        turn_on = ", ".join(f"{setting}=true" for setting in settings)
        return (
            "Spring AI writes prompts, completions and retrieved documents only to the application log; set "
            f"{turn_on} and add the ObservationFilter of tracescore's Spring AI page ({cls.FILTER}, "
            f"{cls.PAGE}), which puts them on the spans (the question, the answer and the documents its "
            "advisors retrieved, copied from the chat client response's context, on the chat_client span: "
            f"{cls.ADVISED_DOCUMENTS}), to judge this call"
        )

    def named_conversation(self, anchor: DecodedSpan) -> tuple[str | None, str | None]:
        return _text(anchor, self.CONVERSATION_ID), None


def _names(value: Any) -> list[str]:
    """The names in a JSON list of names (or an array attribute)."""
    listed = parse_json(value)
    return [name for name in listed if isinstance(name, str)] if isinstance(listed, list | tuple) else []


def _text(span: DecodedSpan, key: str) -> str | None:
    value = span.attributes.get(key)
    return value if isinstance(value, str) and value else None
