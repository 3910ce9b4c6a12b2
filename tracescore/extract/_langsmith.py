"""LangSmith's OpenTelemetry export (`langsmith` with LANGSMITH_OTEL_ENABLED, or
LANGSMITH_TRACING_MODE=otel): its LangChain tracer writes each run of a LangChain or LangGraph app (a chain or
graph node, a retriever, a chat model call, a tool, a prompt template, a parser) as one span named by the run,
`langsmith.span.kind` its run type, with the run's inputs and outputs as JSON in `gen_ai.prompt` /
`gen_ai.completion`, its metadata as `langsmith.metadata.<key>` and a model call's usage as `gen_ai.usage.*`.

The interaction is the outermost `chain` run with a model call, a retriever or a tool below it (the chain or
graph the app invoked); without one, each `llm` run (a model the app called by itself; one that asked for a
tool with the one that answered after it). The question is the chain's input: a question-like field (a chain
invoked with text records it as `input`) or, for a graph, the last user message of its `messages`; else the
first model call's last user message. The answer is the chain's output: an answer-like field (`output`) or the
last AI message with text of a graph's `messages`; else the last model call's text. Model calls record their
messages as LangChain-serialised messages (`{"messages": [[...]]}`, each message's fields under `kwargs`) and
their output as an LLMResult (`generations`), both read here. The documents are the retrievers' output
(`documents[].page_content`) and the tools' results (a ToolMessage's `content`), without a tool run that
recorded one the tool messages passed to the last model call, and the tool results of the conversation's
earlier turns in its input; with none of those, documents under a label in its prompt. With the runs'
outputs hidden (LANGSMITH_HIDE_OUTPUTS, a Client's `hide_outputs`) every span records `{}`: the interaction
is skipped as `content_not_captured`, naming the setting.

Each span is named by its run (`run_name` in the run's config names it): the route, unless the shared rule
finds an explicit one (an HTTP route around it). LangSmith's own `session` is its
project (`langsmith.trace.session_name`), not a conversation: the conversation is the thread LangSmith groups
runs by, `thread_id`, `session_id` or `conversation_id` in the run's metadata (LangChain copies a LangGraph
checkpointer's `configurable.thread_id` there), and the user `user_id` in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.extract._convention import Convention, Reading, first_text, not_inside, without_wrappers
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._openllmetry import OpenLLMetry
from tracescore.extract._read import (
    USER_ROLES,
    Prompt,
    answer_text,
    assistant_text,
    documents_of,
    message_prompt,
    parse_json,
    question_text,
    user_text,
)
from tracescore.model import ContextSourceKind, DecodedSpan, Trace

__all__ = ["LangSmith"]


class LangSmith(Convention):
    """The keys LangSmith's OTel exporter writes (`langsmith.*`, the run's IO in `gen_ai.prompt` /
    `gen_ai.completion`) and their readers."""

    name = "langsmith"
    RUN_TYPE = "langsmith.span.kind"
    METADATA = "langsmith.metadata"  # `langsmith.metadata.<key>`, one key per metadata entry
    # The run's inputs and outputs as JSON, under the keys OpenLLMetry's flattened messages start with.
    INPUTS = OpenLLMetry.PROMPT
    OUTPUTS = OpenLLMetry.COMPLETION
    # The metadata keys LangSmith groups a conversation's traces by (its threads), and the user.
    THREAD_KEYS = (f"{METADATA}.thread_id", f"{METADATA}.session_id", f"{METADATA}.conversation_id")
    USER_KEYS = (f"{METADATA}.user_id",)
    CHAIN, LLM, TOOL, RETRIEVER = "chain", "llm", "tool", "retriever"
    INTERACTION_KINDS = frozenset({CHAIN})
    LLM_KINDS = frozenset({LLM})
    TOOL_KINDS = frozenset({TOOL})
    LLM_WORK = frozenset({LLM, TOOL, RETRIEVER})  # what makes a chain an LLM interaction
    MARKER = RUN_TYPE
    HIDE_OUTPUTS = "LANGSMITH_HIDE_OUTPUTS"  # the setting that empties every run's outputs
    LONE_LLM_CALLS = True
    # A chat model's input (a batch of message lists) and output (an LLMResult); a text model's prompts.
    MESSAGES, PROMPTS, GENERATIONS = "messages", "prompts", "generations"
    TEXT, MESSAGE, KWARGS, TOOL_CALLS = "text", "message", "kwargs", "tool_calls"
    LC = "lc"  # what marks a LangChain-serialised object (its fields under `kwargs`)
    ROLE, CONTENT = "role", "content"  # a chat message's, for a text model's prompt
    LLM_CALL = "model call"
    LOOKED_IN = {
        "question": f"the chain's input ({INPUTS}: a question-like field, or the last user message of a "
        "graph's messages), and the first model call's last user message",
        "answer": f"the chain's output ({OUTPUTS}: an answer-like field, or the last AI message of a graph's "
        "messages), and the last model call's generation",
        "documents": f"the {OUTPUTS} of the retriever and tool runs, the tool messages in the last model "
        f"call's {INPUTS}, and documents under a label in its prompt",
    }

    RUN_TOOL_ARGUMENTS = (INPUTS,)
    RUN_TOOL_RESULT = (OUTPUTS,)
    RUN_MODEL_OUTPUT = (OUTPUTS,)

    def kind(self, span: DecodedSpan) -> str:
        kind = span.attributes.get(self.RUN_TYPE)
        return kind.lower() if isinstance(kind, str) else ""

    def anchors(self, trace: Trace) -> list[DecodedSpan]:
        """The outermost chains with LLM work below them (a chain that only formats text is no
        interaction)."""
        return [
            anchor
            for anchor in trace.outermost(self.is_interaction)
            if any(self.kind(span) in self.LLM_WORK for span in trace.descendants(anchor))
        ]

    def collect(self, reading: Reading) -> Reading:
        trace, anchor, around = reading.trace, reading.anchor, reading.around
        retrievers = [s for s in around if self.kind(s) == self.RETRIEVER]
        tools = reading.loop_tools([s for s in around if self.is_tool(s)])
        llms = reading.loop_llms([s for s in around if self.is_llm(s)])
        return reading.found(
            retrievals=[(span, ContextSourceKind.RETRIEVER) for span in retrievers],
            # The app's own retrieval; a retriever tool's is the model's search, not the question.
            asked=not_inside(trace, retrievers, anchor, self.is_tool),
            tools=tools,
            tool_results=without_wrappers(trace, tools, retrievers),
            llms=llms,
            answering=not_inside(trace, llms, anchor, self.is_tool),
            sources=[*retrievers, *tools, *llms],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        return documents_of(span.attributes.get(self.OUTPUTS))

    def reads_tool_messages(self, reading: Reading) -> bool:
        return self.no_tool_result(reading.tools)

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        return genai_tool_results(self._input_messages(llm))

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        messages = self._input_messages(span)
        return message_prompt(messages) if messages else None

    def question(self, reading: Reading) -> str | None:
        if reading.group is None:
            question = self._chain_question(reading.anchor)
            if question is not None:
                return question
        return user_text(self._input_messages(reading.llms[0])) if reading.llms else None

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return question_text(span.attributes.get(self.INPUTS))

    def own_answer(self, span: DecodedSpan) -> str | None:
        if self.is_llm(span):
            return self.llm_output(span)
        outputs = parse_json(span.attributes.get(self.OUTPUTS))
        if isinstance(outputs, Mapping) and isinstance(outputs.get(self.MESSAGES), list):
            return assistant_text(_plain_messages(outputs[self.MESSAGES]))
        return answer_text(outputs)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        generation = self._generation(llm)
        if generation is None:
            return None
        text = generation.get(self.TEXT)
        if isinstance(text, str) and text.strip():
            return text
        message = _plain_message(generation.get(self.MESSAGE))
        return assistant_text([message]) if message is not None else None

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        generation = self._generation(span)
        message = _plain_message(generation.get(self.MESSAGE)) if generation is not None else None
        if message is not None and message.get(self.TOOL_CALLS):
            return True
        return self.llm_output(span) is None

    def content_not_captured(self, reading: Reading) -> str | None:
        """The runs' outputs were hidden: every span read records `{}` (or nothing) as its outputs."""
        spans = (reading.anchor, *reading.around)
        if any(parse_json(span.attributes.get(self.OUTPUTS)) for span in spans):
            return None
        return (
            f"none of its {len(spans)} run(s) recorded an output ({self.OUTPUTS} empty): LangSmith hid them "
            f"({self.HIDE_OUTPUTS}=true, or a Client's hide_outputs); unset it to judge this interaction"
        )

    def named_conversation(self, anchor: DecodedSpan) -> tuple[str | None, str | None]:
        return first_text([anchor], self.THREAD_KEYS), first_text([anchor], self.USER_KEYS)

    def _chain_question(self, span: DecodedSpan) -> str | None:
        inputs = parse_json(span.attributes.get(self.INPUTS))
        if isinstance(inputs, Mapping) and isinstance(inputs.get(self.MESSAGES), list):
            return user_text(_plain_messages(inputs[self.MESSAGES]))
        return question_text(inputs)

    def _input_messages(self, llm: DecodedSpan) -> list[Mapping[str, Any]] | None:
        """A model call's input as plain messages: a chat model's first message list (LangChain-serialised),
        a text model's first prompt as a user message."""
        inputs = parse_json(llm.attributes.get(self.INPUTS))
        if not isinstance(inputs, Mapping):
            return None
        batch = inputs.get(self.MESSAGES)
        if isinstance(batch, list) and batch:
            messages = batch[0] if isinstance(batch[0], list) else batch
            return _plain_messages(messages)
        prompts = inputs.get(self.PROMPTS)
        if isinstance(prompts, list) and prompts and isinstance(prompts[0], str):
            return [{self.ROLE: USER_ROLES[0], self.CONTENT: prompts[0]}]
        return None

    def _generation(self, llm: DecodedSpan) -> Mapping[str, Any] | None:
        """The first generation of a model call's LLMResult."""
        outputs = parse_json(llm.attributes.get(self.OUTPUTS))
        generations = outputs.get(self.GENERATIONS) if isinstance(outputs, Mapping) else None
        while isinstance(generations, list) and generations:
            generations = generations[0]
        return generations if isinstance(generations, Mapping) else None


def _plain_messages(messages: Sequence[Any]) -> list[Mapping[str, Any]]:
    return [plain for message in messages if (plain := _plain_message(message)) is not None]


def _plain_message(message: Any) -> Mapping[str, Any] | None:
    """A message as its fields: a LangChain-serialised one (`{"lc": 1, "type": "constructor", "kwargs":
    {...}}`) is its `kwargs`, whose `type` (human, ai, tool, system) is its role."""
    if not isinstance(message, Mapping):
        return None
    kwargs = message.get(LangSmith.KWARGS)
    return kwargs if isinstance(kwargs, Mapping) and LangSmith.LC in message else message
