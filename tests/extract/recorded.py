"""The fixtures recorded from the real instrumentation libraries (fixtures/record.py), with what each one
should become: an interaction read by a given convention, or an explained skip."""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tracescore.consume import assemble_messages, decode_message
from tracescore.extract import Extraction, extract
from tracescore.model import DecodedSpan, ExtractSkip, Interaction, RunToolCall, Trace
from tracescore.score import evaluate
from tracescore.score.judges import OfflineJudge

FIXTURES = Path(__file__).parent / "fixtures"
T = TypeVar("T")

# What a reader of each recording must produce. Decided by what the library records, not by the bytes:
# traceloop 0.45's LangChain mode records no retrieval, and GenAI documents given as ids carry no text.
EXPECTED = {
    "openinference_langchain": ("interaction", "openinference"),
    "openinference_langchain_tracescore": ("interaction", "tracescore"),
    "openinference_manual": ("interaction", "openinference"),
    "openllmetry/workflow": ("interaction", "openllmetry"),
    # traceloop 0.62's LangChain mode records the retriever (a vector_db_retrieve span): its documents.
    "openllmetry/langchain": ("interaction", "openllmetry"),
    "openllmetry_v045/workflow": ("interaction", "openllmetry"),
    # traceloop 0.45's LangChain mode records no retrieval: the documents are read from the system message
    # (`Context:`), and retrieval documents given as ids only from the instructions the same way.
    "openllmetry_v045/langchain": ("interaction", "openllmetry"),
    # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY: the util emits its operation-details
    # event as a log record, so no text at all is on the spans; read with its log records (`Recording.logs`,
    # as the consumer reads them from the spans topic), the chat span's event carries the messages.
    "otel_genai/event_only_": ("interaction", "genai"),
    "otel_genai": ("interaction", "genai"),
    # opentelemetry-instrumentation-openai-v2 on its default (v1.30) conventions, content capture `true`: each
    # message a v1.30 GenAI event as a log record (`event_name`, the message in the body), none on the chat
    # span; read with its log records (`Recording.logs`) as Pydantic AI's version 1 events. Pasted with no
    # label, the documents are never split into guessed ones.
    "openai_v2/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "openai_v2": ("interaction", "genai"),
    "openinference_openai_tools": ("interaction", "openinference"),
    # An agent that answered from no tool and no retriever: nothing to judge against.
    "langgraph_tool/no_tool": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "langgraph_tool": ("interaction", "openinference"),
    "pydantic_ai": ("interaction", "genai"),
    # Pydantic AI 1.x: its default span format (version 2), and version 1, whose chat spans hold the messages
    # as GenAI events in an `events` attribute, read alike; version 1 sending them to logs (event_mode='logs')
    # read with its log records (`Recording.logs`), each event on its chat span, alike.
    "pydantic_ai_v1": ("interaction", "genai"),
    "haystack": ("interaction", "openinference"),
    "llamaindex": ("interaction", "openinference"),
    "openllmetry_openai_tools": ("interaction", "openllmetry"),
    # One chat call whose prompt carries the documents under `Context:` (user or system message), no
    # retrieval: read from the prompt. Pasted with no label they are never split into guessed documents.
    "openinference_openai_stuffed/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "openinference_openai_stuffed": ("interaction", "openinference"),
    "openllmetry_openai_stuffed/unlabelled": ("skip", ExtractSkip.NO_RETRIEVAL),
    "openllmetry_openai_stuffed": ("interaction", "openllmetry"),
    # A RAG app with no framework: the app queries a vector database with its client and hands the results
    # to one chat call. traceloop's chromadb instrumentation records each result's text (db.query.result
    # events): the documents, whether the prompt names them or not, of the workflow or, under the app's own
    # request span, of the chat call after the query (read by OTel GenAI). Its qdrant one records no result:
    # read from the prompt's label, else skipped saying so.
    "openllmetry_vector_db/qdrant_faithful": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "openllmetry_vector_db/chroma_request": ("interaction", "genai"),
    "openllmetry_vector_db": ("interaction", "openllmetry"),
    # The same app under OpenLIT: its chroma and qdrant spans (`vectordb`) record no result's text (Chroma's
    # how many rows came back): read from the prompt's label, else skipped saying so.
    "openlit_vector_db/chroma_labelled": ("interaction", "genai"),
    "openlit_vector_db/qdrant_labelled": ("interaction", "genai"),
    "openlit_vector_db": ("skip", ExtractSkip.EMPTY_CONTEXT),
    # LiteLLM's own OTel callback writes GenAI messages (a tool message's result as text parts): read by OTel
    # GenAI, the documents from the prompt's label or the tool messages; pasted with no label, never split.
    "litellm_otel/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "litellm_otel": ("interaction", "genai"),
    # The same calls with OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental: each a `chat <model>` span
    # with the messages and gen_ai.provider.name, no raw_gen_ai_request child: read alike.
    "litellm_otel_latest/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "litellm_otel_latest": ("interaction", "genai"),
    # Its log events on, content capture `true`: no message (and no gen_ai.operation.name) on the
    # litellm_request span, each message a `gen_ai.content.prompt` / `.completion` log record named in an
    # `event_name` attribute; read with its log records (`Recording.logs`) as the v1.36 events, alike.
    "litellm_otel_events/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "litellm_otel_events": ("interaction", "genai"),
    # Both: on the latest conventions its one `gen_ai.client.inference.operation.details` log record per call
    # (the operation and the messages as its attributes, named in `event_name`), read as that event is.
    "litellm_otel_latest_events/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "litellm_otel_latest_events": ("interaction", "genai"),
    "litellm_proxy/joined_unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "litellm_proxy/detached_unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "litellm_proxy/joined": ("interaction", "openinference"),
    "litellm_proxy": ("interaction", "genai"),
    # A Haystack pipeline with no retriever: its prompt builder renders the app's documents under `Context:`
    # into the messages (or the prompt string) its chat generator is given: read from the generator's input.
    "haystack_otel_stuffed/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "haystack_otel_stuffed": ("interaction", "haystack"),
    # A Haystack Agent that calls a local tool, in a pipeline and on its own: the tool spans' results are the
    # documents.
    "haystack_otel_agent": ("interaction", "haystack"),
    "langchain_stream_history": ("interaction", "openinference"),
    # Content capture off on the decorated functions: the retrieval recorded no documents, the generation's
    # prompt holds them under `Context:` (the OpenAI integration records its messages): read from there.
    "langfuse": ("interaction", "langfuse"),
    "langfuse_v3": ("interaction", "langfuse"),
    # Langfuse spans around OpenInference ones: scored once, on the Langfuse interaction.
    "langfuse_openinference": ("interaction", "langfuse"),
    "langfuse_langchain": ("interaction", "langfuse"),
    # Delivered whole (<scenario>.binpb); its per-service messages (Recording.messages) are for lateness.
    "two_service": ("interaction", "openinference"),
    # The workflow's output is a StopEvent(...) repr cut short: the answer is the agent's last LLM call's.
    "llamaindex_agent": ("interaction", "openinference"),
    # The answer reaches the final_answer tool as its argument: that tool's result is never a document.
    "smolagents": ("interaction", "openinference"),
    # Semantic Kernel's model calls' messages are log lines its samples export as OTel log records: read with
    # its log records (`Recording.logs`), each GenAI event on its chat span, the question among them.
    "semantic_kernel": ("interaction", "genai"),
    # MLflow's GenAI-conventions export drops mlflow.spanOutputs: the retriever's documents are gone; the
    # pipeline put them into the system instructions under `Context:`, read from there.
    "mlflow/semconv_rag": ("interaction", "genai"),
    "mlflow/semconv_agent": ("interaction", "genai"),
    "mlflow": ("interaction", "mlflow"),
    # autogen-core's own spans carry names only: no answer (nor question or documents) to read.
    "autogen/core_only": ("skip", ExtractSkip.MISSING_ANSWER),
    "autogen": ("interaction", "genai"),
    # The Vercel AI SDK through the real Collector (one Kafka message per trace and scope). An app that puts
    # its documents only into the prompt records no retrieval (they are read from its system message, under
    # `Context:`); with content capture off, no text at all.
    "vercel_ai/no_content_": ("skip", ExtractSkip.MISSING_ANSWER),
    "vercel_ai": ("interaction", "vercel_ai"),
    # The Langfuse JS SDK's observations (langfuse.observation.*), read by the Langfuse recogniser.
    "langfuse_js": ("interaction", "langfuse"),
    # Agent and pipeline frameworks under their OpenInference instrumentations.
    "openai_agents": ("interaction", "openinference"),
    "dspy": ("interaction", "openinference"),
    # A streamed crew's kickoff returns a handle (its span's output is the handle's repr) and runs the crew
    # in a trace of its own, read as the interaction.
    "crewai/stream_handle": ("skip", ExtractSkip.MISSING_ANSWER),
    "crewai": ("interaction", "openinference"),
    # Two-turn conversations: each turn is its own trace; a follow-up that calls no tool is judged against
    # the first turn's tool result, kept in its LLM call's input.
    "pydantic_ai_conversation": ("interaction", "genai"),
    # The three-turn chat on a LangGraph agent (the thread_id its config names is `session.id`, the user
    # OpenInference's `using_user`) and on a LlamaIndex FunctionAgent (its Memory; the session and user
    # OpenInference's `using_attributes`): each turn read with its own tool result and the earlier turns'
    # `ToolMessage`s / tool messages its model call carried; a greeting answered without a lookup skipped.
    "langgraph_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "langgraph_conversation": ("interaction", "openinference"),
    "llamaindex_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "llamaindex_conversation": ("interaction", "openinference"),
    # Six turns of a LangChain RAG chain whose app resends only its last two questions and answers
    # (`trim_messages`) and names no conversation (only `user.id`): each turn read with its retriever's
    # documents, the window's pairs its history.
    "langchain_window_conversation": ("interaction", "openinference"),
    # The same on LlamaIndex's context chat engine, the window what its ChatMemoryBuffer's token limit keeps.
    "llamaindex_window_conversation": ("interaction", "openinference"),
    # A failed tool's message is what the model was given: judged (it supports nothing); the run says so.
    "langgraph_tool_error": ("interaction", "openinference"),
    # Three-turn support chats (scenarios/_multiturn.py), earlier results resent or only questions and answers
    # kept. A greeting answered without a lookup has nothing to be judged against. Each turn is read with its
    # own retrieval, plus the earlier turns' tool results its model call carried (`earlier_turn`); what
    # needs an earlier turn's trace is in `Recording.earlier_trace`.
    "autogen_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "autogen_conversation": ("interaction", "openinference"),
    "google_adk/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "google_adk": ("interaction", "openinference"),
    "google_adk_v1/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "google_adk_v1": ("interaction", "openinference"),
    "haystack_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "haystack_conversation": ("interaction", "openinference"),
    # Haystack's own tracer; with its content tracing off only the pipeline's input is recorded.
    "haystack_otel/content_off_": ("skip", ExtractSkip.CONTENT_NOT_CAPTURED),
    "haystack_otel/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "haystack_otel": ("interaction", "haystack"),
    "mlflow_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "mlflow_conversation/semconv_": ("interaction", "genai"),
    "mlflow_conversation": ("interaction", "mlflow"),
    "openinference_openai_conversation": ("interaction", "openinference"),
    # OpenLIT and Pydantic Logfire write OTel GenAI spans: chat calls with gen_ai.input/output.messages (the
    # search results a tool message), OpenLIT's LangChain retriever a `retrieval` span.
    "openlit": ("interaction", "genai"),
    "openlit_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "openlit_conversation": ("interaction", "genai"),
    "logfire": ("interaction", "genai"),
    "logfire_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "logfire_conversation": ("interaction", "genai"),
    "vercel_ai_conversation": ("interaction", "vercel_ai"),
    # Spring AI through Micrometer Tracing and the real Collector: the question, documents and answer are on
    # the spans only with its content settings on and the integration page's ObservationFilter.
    "spring_ai/no_content_": ("skip", ExtractSkip.CONTENT_NOT_CAPTURED),
    "spring_ai": ("interaction", "spring_ai"),
    # The same app on Spring AI 2.0 / Spring Boot 4.
    "spring_ai2/no_content_": ("skip", ExtractSkip.CONTENT_NOT_CAPTURED),
    "spring_ai2_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "spring_ai2_conversation": ("interaction", "spring_ai"),
    "spring_ai2": ("interaction", "spring_ai"),
    "spring_ai_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "spring_ai_conversation": ("interaction", "spring_ai"),
    # Strands Agents' own GenAI spans: the messages on them (OTEL_SEMCONV_STABILITY_OPT_IN=
    # gen_ai_latest_experimental,gen_ai_span_attributes_only) or as span events (its default, `legacy_` /
    # `default_`, and with gen_ai_latest_experimental alone, `events_`) read alike; redacted (on the spans or
    # in the default events, `redacted_legacy_`), the skip names the setting.
    "strands/redacted_": ("skip", ExtractSkip.CONTENT_NOT_CAPTURED),
    "strands": ("interaction", "strands"),
    "strands_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "strands_conversation": ("interaction", "strands"),
    # Multi-agent runs: scored once, on the span whose answer the user reads (the orchestrator, the Swarm, the
    # Graph), against the researcher's search; the researcher's own answer is neither the answer nor evidence.
    "strands_multiagent": ("interaction", "strands"),
    # The memory's entries are the documents, injected into the prompt or returned by its search tool; its
    # background extraction (a trace of its own: memory.extract around a model call) is no interaction, in
    # every mode (the messages on the spans, `default_` one event per message, `events_` operation details).
    "strands_memory/extract_faithful_background": ("skip", ExtractSkip.NOT_RAG),
    "strands_memory/extract_unfaithful_background": ("skip", ExtractSkip.NOT_RAG),
    "strands_memory/default_extract_faithful_background": ("skip", ExtractSkip.NOT_RAG),
    "strands_memory/default_extract_unfaithful_background": ("skip", ExtractSkip.NOT_RAG),
    "strands_memory/events_extract_faithful_background": ("skip", ExtractSkip.NOT_RAG),
    "strands_memory/events_extract_unfaithful_background": ("skip", ExtractSkip.NOT_RAG),
    "strands_memory": ("interaction", "strands"),
    # Mastra's OtelExporter through the real Collector: the question on the agent span's Mastra input.
    "mastra": ("interaction", "mastra"),
    "mastra_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "mastra_conversation": ("interaction", "mastra"),
    "mastra_workflow": ("interaction", "mastra"),
    # The chat with the history Mastra's memory keeps (`@mastra/memory`): the app sends the question alone.
    "mastra_memory/recall_greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "mastra_memory": ("interaction", "mastra"),
    # Genkit's own spans through the real Collector: a flow that retrieves (ai.retrieve) and hands the
    # documents to ai.generate({docs}), and a flow whose model calls a tool.
    "genkit": ("interaction", "genkit"),
    # The chat on Genkit's agent API (`defineAgent`, `agent.chat({state}).send()`): the state's session.
    "genkit_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "genkit_conversation": ("interaction", "genkit"),
    # LangChain.js under OpenInference's LangChain instrumentation through the real Collector: a retrieval
    # chain, a LangGraph ReAct agent whose tool result is a serialised ToolMessage, and a chat on that agent
    # whose session and user are OpenInference's context (`setSession`, `setUser`).
    "langchain_js": ("interaction", "openinference"),
    "langchain_js_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "langchain_js_conversation": ("interaction", "openinference"),
    # The same app under OpenLLMetry's LangChain.js instrumentation: its callbacks lose the parent context,
    # so every step is a childless sibling under the app's `POST /ask` span; the root workflow (the chain,
    # the LangGraph graph) is the interaction, read from the siblings that started within it.
    "openllmetry_js": ("interaction", "openllmetry"),
    # LangSmith's OTel export (LANGSMITH_OTEL_ENABLED): an LCEL RAG chain, a chat model called alone with
    # the documents in its prompt, a LangGraph agent and a two-turn thread; the runs' IO as JSON in
    # gen_ai.prompt / gen_ai.completion (read as GenAI chat spans without messages before its reader).
    # Pasted with no label, the documents are never split into guessed ones.
    "langsmith/unlabelled": ("skip", ExtractSkip.EMPTY_CONTEXT),
    # A Client that hides the runs' inputs and outputs: every span records `{}`, nothing to judge.
    "langsmith/hidden_": ("skip", ExtractSkip.CONTENT_NOT_CAPTURED),
    "langsmith": ("interaction", "langsmith"),
    # Agno under OpenInference's Agno instrumentation: the agent run (`AGENT`), its tools' `TOOL` spans (a
    # returned list recorded with `str()`, a Python repr), the chat with the run's `session_id` / `user_id`.
    "agno_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "agno_conversation": ("interaction", "openinference"),
    "agno": ("interaction", "openinference"),
    # Microsoft Agent Framework's own GenAI spans (`configure_otel_providers`); with sensitive data off (its
    # default) no message text is on them, and the skip names its setting. A session kept in the app has no
    # id on its spans: the chat's app span per turn carries `session.id` / `user.id`.
    "agent_framework/no_content_": ("skip", ExtractSkip.CONTENT_NOT_CAPTURED),
    "agent_framework_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "agent_framework_conversation": ("interaction", "genai"),
    "agent_framework": ("interaction", "genai"),
    # The chat on its Responses API client, the history kept by the service: its `gen_ai.conversation.id` is
    # the last response's id (a new one each turn); the `app_` chats' span per turn carries the session.
    "agent_framework_responses": ("interaction", "genai"),
    # BeeAI under OpenInference's BeeAI instrumentation: the RequirementAgent's span (`AGENT`, named after
    # it), its tools' `TOOL` spans (a returned list recorded with `str()`), the answer given to its
    # final_answer tool; the chat's session and user from OpenInference's `using_attributes`.
    "beeai_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "beeai_conversation": ("interaction", "openinference"),
    "beeai": ("interaction", "openinference"),
    # The OpenAI Agents SDK's chat: its Session resends the earlier runs' items (function calls and their
    # outputs), or the app passes only the questions and answers as the run's input; the session and user
    # from OpenInference's `using_session` / `using_user` (the SDK's `group_id` is not exported).
    "openai_agents_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "openai_agents_conversation": ("interaction", "openinference"),
    # smolagents' chat: one agent run with `reset=False`, its memory resending the earlier runs; the session
    # and user from `using_session` / `using_user`.
    "smolagents_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "smolagents_conversation": ("interaction", "openinference"),
    # The chats on a LangGraph agent under LangSmith's OTel export: the thread named by the checkpointer's
    # `configurable.thread_id` (resent: its checkpoint resends the earlier tool results) or by metadata
    # `session_id` (questions and answers only), the user by metadata `user_id`.
    "langsmith_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "langsmith_conversation": ("interaction", "langsmith"),
    # The chats under the Langfuse v3 SDK: an `@observe` turn naming its session with
    # `update_current_trace`, a `tool` observation per search, the langfuse.openai client's generations.
    "langfuse_v3_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "langfuse_v3_conversation": ("interaction", "langfuse"),
    # Current OpenLLMetry on the openai client: each turn an @workflow, the session and user its association
    # properties (`traceloop.association.properties.session_id` / `.user_id`; the greeting chat's session its
    # conversation id, `gen_ai.conversation.id`). The greeting, offered the search tool, called none.
    "openllmetry_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "openllmetry_conversation": ("interaction", "openllmetry"),
    # A Semantic Kernel ChatCompletionAgent's thread: its spans name no conversation (the `unnamed_` chats are
    # no conversation; the others' app span per turn carries `session.id` / `user.id`), and its model calls'
    # messages are log records: a resent result is in no span.
    "semantic_kernel_conversation/greeting_turn1": ("skip", ExtractSkip.EMPTY_CONTEXT),
    "semantic_kernel_conversation": ("interaction", "genai"),
}

# Interactions read right whose verdict the offline judge (lexical alignment: the consumer's first tier) gets
# wrong, by scenario: the LLM judge decides these. Strict: a judge that gets one right fails until it goes.
# (quiet_long_faithful_turn1, "You can cancel the plan" for "can be cancelled", went when the judge's keys
# stopped telling a doubled "l" from a single one.)
OFFLINE_JUDGE_MISSES: dict[str, str] = {}

# Apps that resend earlier turns' documents only as prompt text (their template puts them into an earlier user
# message, `Context: ... Question: ...`): prompt text is never split into documents, so those documents are
# read from the earlier turn's own trace (grounding across traces), not from this one.
RESENT_AS_PROMPT_TEXT = {
    "haystack_conversation": "the ChatPromptBuilder template puts them into earlier user messages",
    "haystack_otel": "the ChatPromptBuilder template puts them into earlier user messages",
}

# Chats whose traces record the earlier turns' tool results though the model was not sent them: Mastra's
# memory recalls them into the generation's input, and its ToolCallFilter leaves them out of the prompt after
# that. They are read as the earlier turns' documents (the same user's retrieval, which grounding across turns
# counts whether or not the app resent it).
RECALLED_NOT_SENT = {
    "mastra_memory/filtered_": "ToolCallFilter removes the recalled tool results after Mastra recorded them",
}

# Recordings whose library writes down no question (only the model's own search query, in the tool call's
# arguments, which is not the user's question): judged for faithfulness, the record says why it has none.
# (None now: Semantic Kernel's chat, called with `messages=`, records its question in the log records kept
# with each turn, read with them.)
QUESTION_NOT_RECORDED: dict[str, str] = {}

# Shapes the extractor does not read yet, as a strict-xfail reason per source (or source/scenario): a
# recording that starts passing fails until its line goes.
NOT_YET_READ: dict[str, str | None] = {
    "langgraph_tool/no_tool": None,  # read right today (a skip); must stay so
}


@dataclass(frozen=True)
class Message:
    """One service's part of a recorded trace, as its exporter sent it, and how late it reaches Kafka."""

    service: str
    payload: bytes
    delay_s: float


@dataclass(frozen=True)
class Recording:
    source: str
    scenario: str
    payload: bytes
    trace_id: str
    question: str
    # What this trace records of what the model was given (`given`), as a reader must find it.
    documents: tuple[str, ...]
    answer: str
    faithful: bool
    expected: tuple[str, str]
    # The span a reader must score, by name, where the trace has no single obvious root (agents, loops).
    interaction_span: str | None
    not_yet_read: str | None
    # Per-service messages of a multi-service trace (empty: the library's one process exported it whole).
    messages: tuple[Message, ...] = ()
    # The log records the library emitted with the trace (one ExportLogsServiceRequest, <scenario>.logs.pb),
    # None when it wrote none: read with the trace (`spans_of`), their GenAI events on their spans.
    logs: bytes | None = None
    # Why the library records no question, when it does not (QUESTION_NOT_RECORDED).
    question_not_recorded: str | None = None
    # Everything the model was given (the manifest's documents: earlier turns' results it was resent too,
    # whether or not the trace records them).
    given: tuple[str, ...] = ()
    # The manifest's conversation entry (session, user, turn, what was retrieved, resent, grounded in).
    conversation: dict[str, Any] | None = None
    # Why this faithful turn's verdict rests on an earlier turn's trace: it is grounded in what an earlier
    # turn retrieved, which this trace does not record in a form read as documents. Judged on this trace
    # alone it reads as hallucinated; grounding across traces (the conversations service) revises it.
    earlier_trace: str | None = None

    @property
    def label_in_this_trace(self) -> str:
        """The verdict this trace alone supports (see `earlier_trace`)."""
        return "faithful" if self.faithful and self.earlier_trace is None else "hallucinated"

    @property
    def offline_label(self) -> str:
        """The offline judge's verdict on this trace: `label_in_this_trace`, but where it is known to miss
        (OFFLINE_JUDGE_MISSES)."""
        right = self.label_in_this_trace
        if self.scenario not in OFFLINE_JUDGE_MISSES:
            return right
        return "hallucinated" if right == "faithful" else "faithful"

    @property
    def recorded_question(self) -> str | None:
        """The question a reader can find: the app's, unless the library did not record it."""
        return None if self.question_not_recorded else self.question

    @property
    def param(self) -> object:
        """This recording as a pytest parameter, marked xfail (strict) while the extractor lacks its shape."""
        marks = [pytest.mark.xfail(strict=True, reason=self.not_yet_read)] if self.not_yet_read else []
        return pytest.param(self, id=self.id, marks=marks)

    @property
    def id(self) -> str:
        return f"{self.source}/{self.scenario}"


def _first_match(table: dict[str, T], source: str, scenario: str) -> T | None:
    return next(
        (
            value
            for key, value in table.items()
            if key.split("/")[0] == source and scenario.startswith(key.partition("/")[2])
        ),
        None,
    )


def _recorded_documents(
    source: str, entry: dict[str, Any], retrieved: dict[tuple[str, int], list[str]]
) -> tuple[str, ...]:
    """What the trace records of the documents the model was given: this turn's retrieval when its content
    was recorded, and the earlier turns' results resent in a form read as documents (a tool result), or
    recalled into the trace without being sent (`RECALLED_NOT_SENT`)."""
    conversation = entry.get("conversation")
    if conversation is None:
        return tuple(entry["documents"])
    documents = list(conversation["retrieved"]) if conversation["retrieved_recorded"] else []
    if conversation["resent_recorded"] and source not in RESENT_AS_PROMPT_TEXT:
        documents += [text for resent in conversation["resent"] for text in resent["documents"]]
    if _first_match(RECALLED_NOT_SENT, source, entry["scenario"]):
        name = conversation["name"]
        documents += [text for turn in range(1, conversation["turn"]) for text in retrieved[(name, turn)]]
    return tuple(documents)


def _earlier_trace(
    entry: dict[str, Any], documents: tuple[str, ...], retrieved: dict[tuple[str, int], list[str]]
) -> str | None:
    """Why a faithful turn needs an earlier turn's trace (see `Recording.earlier_trace`), from the manifest:
    an earlier turn it is grounded in retrieved documents this trace does not hold."""
    conversation = entry.get("conversation")
    if conversation is None or not entry["faithful"]:
        return None
    missing = [
        turn
        for turn in conversation["grounded_in"]
        if turn < conversation["turn"]
        and not set(earlier := retrieved.get((conversation["name"], turn), [])) <= set(documents)
        and earlier
    ]
    if not missing:
        return None
    return f"grounded in what turn(s) {missing} retrieved, in their own traces: {conversation['why']}"


def recordings() -> list[Recording]:
    """Every recording, a new list each call (callers filter it). Read once per process: some thirty test
    modules ask at import, and each of pytest's workers collects them all."""
    return list(_read_recordings())


@functools.cache
def _read_recordings() -> tuple[Recording, ...]:
    found = []
    for manifest_path in sorted(FIXTURES.glob("*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        retrieved = {
            (c["name"], c["turn"]): c["retrieved"]
            for entry in manifest["scenarios"].values()
            if (c := entry.get("conversation")) is not None
        }
        for file_name, entry in sorted(manifest["scenarios"].items()):
            source, scenario = manifest["source"], entry["scenario"]
            expected = _first_match(EXPECTED, source, scenario)
            assert expected is not None, f"{source}/{scenario}: no EXPECTED entry"
            documents = _recorded_documents(source, entry, retrieved)
            found.append(
                Recording(
                    source=source,
                    scenario=scenario,
                    payload=(manifest_path.parent / file_name).read_bytes(),
                    trace_id=entry["trace_id"],
                    question=entry["question"],
                    documents=documents,
                    given=tuple(entry["documents"]),
                    conversation=entry.get("conversation"),
                    earlier_trace=_earlier_trace(entry, documents, retrieved),
                    answer=entry["answer"],
                    faithful=entry["faithful"],
                    expected=expected,
                    interaction_span=entry.get("interaction_span"),
                    not_yet_read=_first_match(NOT_YET_READ, source, scenario),
                    question_not_recorded=_first_match(QUESTION_NOT_RECORDED, source, scenario),
                    messages=tuple(
                        Message(
                            service=message["service"],
                            payload=(manifest_path.parent / message["file"]).read_bytes(),
                            delay_s=message["delay_s"],
                        )
                        for message in entry.get("messages", [])
                    ),
                    logs=(manifest_path.parent / entry["logs"]["file"]).read_bytes()
                    if "logs" in entry
                    else None,
                )
            )
    assert len(found) >= 60, f"fixtures missing under {FIXTURES}: run fixtures/record.py"
    return tuple(found)


def spans_of(recording: Recording) -> list[DecodedSpan]:
    """The recording's spans as the consumer reads them: with its log records' GenAI events, if it has any."""
    if recording.logs is None:
        return decode_message(recording.payload)
    [trace] = assemble_messages([recording.logs, recording.payload])
    return list(trace.spans)


def extracted(spans: list[DecodedSpan]) -> Extraction:
    return extract(Trace(spans[0].trace_id, tuple(spans)))


def repeats_label(recording: Recording, *calls: RunToolCall) -> str:
    """`repeated_tool_calls` on the recording's run as if it had made `calls` (each as a recorded run read
    it), in order."""
    rag = extracted(spans_of(recording)).interactions[0].record
    assert rag.run is not None
    run = rag.run.model_copy(update={"tool_calls": calls, "tool_calls_total": len(calls)})
    [result] = evaluate(rag.model_copy(update={"run": run}), ["repeated_tool_calls"], OfflineJudge())
    return result.label


def without(spans: list[DecodedSpan], *keys: str) -> list[DecodedSpan]:
    """The recorded spans as an app without that part of the content capture would have sent them."""
    return [
        dataclasses.replace(s, attributes={k: v for k, v in s.attributes.items() if k not in keys})
        for s in spans
    ]


def replaced(spans: list[DecodedSpan], key: str, value: Any) -> list[DecodedSpan]:
    """The recorded spans with another value of `key` where they carry it (another shape the library
    writes)."""
    return [
        dataclasses.replace(s, attributes={**s.attributes, key: value}) if key in s.attributes else s
        for s in spans
    ]


def read_as_run(recording: Recording, convention: str, span_name: str) -> Interaction:
    """The recording's one interaction: read by `convention` on the span named `span_name`, with the question,
    answer and documents the app ran with."""
    [interaction] = extracted(spans_of(recording)).interactions
    assert interaction.convention == convention and interaction.span.name == span_name
    assert (interaction.record.query, interaction.record.answer) == (recording.question, recording.answer)
    assert sorted(interaction.record.contexts) == sorted(recording.documents)
    return interaction


def read_resent_turn(recording: Recording) -> Interaction:
    """A recorded chat turn whose history an agent resends, read in the session and user the app set, with
    this turn's tool results (kind `tool`) and the earlier turns' its model call carried (`earlier_turn`)."""
    interaction, conversation = read_chat_turn(recording)
    assert (interaction.session_id, interaction.user_id) == (
        conversation["session_id"],
        conversation["user_id"],
    )
    own = [s for s in interaction.context_sources if s.kind == "tool"]
    earlier = [s for s in interaction.context_sources if s.kind == "earlier_turn"]
    resent = [text for item in conversation["resent"] for text in item["documents"]]
    assert (len(own), len(earlier)) == (len(conversation["retrieved"]), len(resent))
    assert sorted(interaction.record.contexts) == sorted([*conversation["retrieved"], *resent])
    return interaction


def read_chat_turn(recording: Recording) -> tuple[Interaction, dict[str, Any]]:
    """A recorded chat turn's one interaction and its manifest's conversation entry; an earlier answer in its
    prompt is never among its documents (an answer never supports itself). Its session and user:
    test_sessions.py, for every producer's chats."""
    [interaction] = extracted(spans_of(recording)).interactions
    conversation = recording.conversation
    assert conversation is not None
    assert not set(conversation["earlier_answers_in_prompt"]) & set(interaction.record.contexts)
    return interaction, conversation
