"""Haystack's own tracer (haystack-ai 2.x / 3.x through `opentelemetry-haystack`, or any tracer Haystack's
`tracing` is given): `haystack.pipeline.run` spans with a `haystack.component.run` span per component.

The interaction is the outermost `haystack.pipeline.run` (an AsyncPipeline's: `haystack.async_pipeline.run`
in Haystack 2.x), or an `Agent` run on its own (`haystack.agent.run`, its question the last user message of
`haystack.agent.input`). Its components are told apart by
`haystack.component.type`, the component's class name: a `...Retriever` retrieves, a `...Ranker` reranks (its
output, when it recorded one, is what the next step saw: read in place of the retrievals), a
`...PromptBuilder` builds the prompt, a `...Generator` (`...ChatGenerator` too) calls the model and an
`...Embedder` embeds (never read as documents nor as an answer); any other component is passed over. With
content tracing on (`HAYSTACK_CONTENT_TRACING_ENABLED=true`) each component's input and output are JSON in
`haystack.component.input` / `haystack.component.output`, and the pipeline's output in
`haystack.pipeline.output_data`; the pipeline's input, `haystack.pipeline.input_data`, is recorded either way.

The question is the question-like input of a component in the pipeline's input (`prompt_builder.question`,
`retriever.query`, `text_embedder.text`), else the first retriever's query. The documents are the
retrievers' output `documents[].content` (a ranker's instead, when it has them). The answer is the text of the
generator's `replies` in the pipeline's output, else in the last generator's output. Tool results in a
generator's input messages (Haystack tool messages, `tool_call_result` parts) are read like every
convention's: this turn's without a tool span, earlier turns' as `earlier_turn`. An Agent's tool calls are
`haystack.agent.step.tool` spans (`haystack.tool.name`, the arguments and the result in
`haystack.agent.step.tool.input` / `.output`): their results are its documents, read as every convention's
tool results are, and its model calls (`haystack.agent.step.llm`) are the run's steps, the tools each was
offered in its input's `tools` (Haystack's serialised `Tool`s) the run's offered tools. Each model call's
token usage is in its replies' `meta.usage` (`prompt_tokens`, `completion_tokens`). With no documents recorded
any other way, those a prompt builder rendered under a label (`Context:`, `<context>` tags) are read as every
convention reads them (`_prompt`): from the last generator's input `messages` (a ChatPromptBuilder's chat
messages, or a PromptBuilder's prompt string: the user's message), else a prompt builder's rendered `prompt`.
What a prompt template put into an earlier user message is prompt text, never split into guessed documents.

Haystack's tracer has no notion of a session: an app tags its own span around the pipeline
(`tracing.tracer.trace("chat.turn", tags={"session.id": ..., "user.id": ...})`), which the shared lineage
rule reads. With content tracing off no component input or output is recorded: the interaction is skipped as
`content_not_captured`, saying so, rather than judged on a guess.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tracescore.extract._convention import Convention, Reading, UsageFields, not_inside, without_wrappers
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._read import (
    Prompt,
    assistant_text,
    documents_of,
    message_prompt,
    parse_json,
    question_text,
)
from tracescore.model import ContextSourceKind, DecodedSpan, Trace

__all__ = ["Haystack"]


class Haystack(Convention):
    """The keys Haystack's tracer writes (`haystack.*`) and their readers."""

    name = "haystack"
    # The pipeline's span: `haystack.pipeline.run` (an AsyncPipeline's too since 2.x's last releases,
    # `haystack.async_pipeline.run` before).
    PIPELINE_RUNS = frozenset({"haystack.pipeline.run", "haystack.async_pipeline.run"})
    PIPELINE_INPUT = "haystack.pipeline.input_data"
    PIPELINE_OUTPUT = "haystack.pipeline.output_data"
    COMPONENT_TYPE = "haystack.component.type"
    COMPONENT_INPUT = "haystack.component.input"
    COMPONENT_OUTPUT = "haystack.component.output"
    # What a component is, by the end of its class name.
    ROLES = (
        ("Retriever", "retriever"),
        ("Ranker", "ranker"),
        ("PromptBuilder", "prompt_builder"),
        ("Generator", "generator"),
        ("Embedder", "embedder"),
    )
    # An Agent's (an LLM component's) model call, run inside it rather than as a pipeline component, with the
    # chat generator's input and output as its own keys.
    AGENT_LLM = "haystack.agent.step.llm"
    AGENT_LLM_INPUT = "haystack.agent.step.llm.input"
    AGENT_LLM_OUTPUT = "haystack.agent.step.llm.output"
    # An Agent's run (on its own: the interaction; in a pipeline: below its component) and its tool calls.
    AGENT_RUN = "haystack.agent.run"
    AGENT_INPUT = "haystack.agent.input"
    AGENT_OUTPUT = "haystack.agent.output"
    AGENT_TOOL = "haystack.agent.step.tool"
    TOOL_NAME = "haystack.tool.name"
    AGENT_TOOL_INPUT = "haystack.agent.step.tool.input"
    AGENT_TOOL_OUTPUT = "haystack.agent.step.tool.output"
    REPLIES = "replies"  # a generator's output: chat messages, or strings
    MESSAGES = "messages"  # a chat generator's input: chat messages, or a prompt string
    DOCUMENTS, CONTENT = "documents", "content"  # Haystack documents handed to a prompt builder, their text
    PROMPT = "prompt"  # a prompt builder's output (chat messages, or a string), a 2.x text generator's input
    SYSTEM_PROMPT = "system_prompt"  # a 2.x text generator's input beside its prompt
    PIPELINE, RETRIEVER, RANKER, GENERATOR = "pipeline", "retriever", "ranker", "generator"
    PROMPT_BUILDER, AGENT, TOOL = "prompt_builder", "agent", "tool"
    # Where a component records the prompt it was given or rendered.
    PROMPT_CARRIERS = {GENERATOR: COMPONENT_INPUT, PROMPT_BUILDER: COMPONENT_OUTPUT}
    INTERACTION_KINDS = frozenset({PIPELINE, AGENT})
    LLM_KINDS = frozenset({GENERATOR})
    TOOL_KINDS = frozenset({TOOL})
    # The spans Haystack itself names (a component's kind is its class name's).
    SPAN_KINDS = {
        **dict.fromkeys(PIPELINE_RUNS, PIPELINE),
        AGENT_RUN: AGENT,
        AGENT_LLM: GENERATOR,
        AGENT_TOOL: TOOL,
    }
    MARKER = COMPONENT_TYPE
    LLM_CALL = "generator"
    LOOKED_IN = {
        "question": f"the question-like input of a component in {PIPELINE_INPUT} (an Agent's: the last user "
        f"message of {AGENT_INPUT}), and the first retriever's query in its {COMPONENT_INPUT}",
        "answer": f"the {REPLIES} of a generator in {PIPELINE_OUTPUT}, and in the last generator's "
        f"{COMPONENT_OUTPUT}",
        "documents": f"the documents in the {COMPONENT_OUTPUT} of each ...Retriever (a ...Ranker's instead), "
        f"an Agent's tool results ({AGENT_TOOL_OUTPUT}), tool results in the generators' input messages, and "
        "documents under a label in the last generator's "
        f"{MESSAGES} (or a ...PromptBuilder's rendered {PROMPT})",
    }

    RUN_TOOL_NAME = (TOOL_NAME,)
    RUN_TOOL_ARGUMENTS = (AGENT_TOOL_INPUT,)
    RUN_TOOL_RESULT = (AGENT_TOOL_OUTPUT,)
    RUN_MODEL_OUTPUT = (COMPONENT_OUTPUT, AGENT_LLM_OUTPUT)
    # A chat generator's usage, in its (first) reply's meta.
    _REPLY_USAGE = UsageFields(("prompt_tokens",), ("completion_tokens",), (REPLIES, 0, "meta", "usage"))
    RUN_USAGE_JSON = {COMPONENT_OUTPUT: _REPLY_USAGE, AGENT_LLM_OUTPUT: _REPLY_USAGE}
    # The tools a chat generator was offered: its input's `tools`, Haystack `Tool`s (a `Toolset`) serialised.
    TOOLS = "tools"
    RUN_TOOL_DEFINITIONS = {COMPONENT_INPUT: (TOOLS,), AGENT_LLM_INPUT: (TOOLS,)}
    # What a span records only with content tracing on.
    CAPTURED = (
        PIPELINE_OUTPUT,
        COMPONENT_INPUT,
        COMPONENT_OUTPUT,
        AGENT_OUTPUT,
        AGENT_LLM_INPUT,
        AGENT_LLM_OUTPUT,
    )

    def present(self, trace: Trace) -> bool:
        """A component's span, or an Agent run on its own (no component span around it)."""
        # Runs on every trace, and most have no Haystack span: one plain loop.
        for span in trace.spans:
            if self.COMPONENT_TYPE in span.attributes or span.name == self.AGENT_RUN:
                return True
        return False

    def kind(self, span: DecodedSpan) -> str:
        component = span.attributes.get(self.COMPONENT_TYPE)
        if isinstance(component, str):
            return next((role for suffix, role in self.ROLES if component.endswith(suffix)), "component")
        return self.SPAN_KINDS.get(span.name, "")

    def collect(self, reading: Reading) -> Reading:
        trace, anchor = reading.trace, reading.anchor
        by_kind: dict[str, list[DecodedSpan]] = {}
        for span in reading.around:
            by_kind.setdefault(self.kind(span), []).append(span)
        retrievers = by_kind.get(self.RETRIEVER, [])
        # A ranker's output is what the model saw; else every retriever's documents.
        ranked = [s for s in by_kind.get(self.RANKER, []) if self.documents(s, ContextSourceKind.RERANKER)]
        generators = by_kind.get(self.GENERATOR, [])
        read = [(s, ContextSourceKind.RERANKER) for s in ranked] or [
            (s, ContextSourceKind.RETRIEVER) for s in retrievers
        ]
        # A tool that runs a pipeline of its own (a ComponentTool): its retrieval is the tool's result.
        tools = without_wrappers(trace, by_kind.get(self.TOOL, []), [s for s, _ in read])
        return reading.found(
            retrievals=read,
            asked=not_inside(trace, retrievers, anchor, self.is_tool),
            tools=tools,
            llms=generators,
            answering=not_inside(trace, generators, anchor, self.is_tool),
            sources=[*(s for s, _ in read), *generators, *tools],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        return documents_of(span.attributes.get(self.COMPONENT_OUTPUT))

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        inputs = self._generator_input(llm)
        return genai_tool_results(inputs.get(self.MESSAGES)) if isinstance(inputs, Mapping) else []

    def input_documents(self, reading: Reading) -> None:
        """The documents a prompt builder was handed as Haystack `Document`s (its input's `documents`, as the
        tracer records them: a list of `{"id", "content", ...}`), one document each, when no retriever
        recorded any: the app's own search, rendered into the prompt by the builder's template."""
        builders = (s for s in reading.around if self.kind(s) == self.PROMPT_BUILDER)
        reading.contexts.add_inputs((s, self._builder_documents(s)) for s in builders)

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """A generator's input `messages` (`prompt` and `system_prompt` in 2.x's text generators; an Agent's
        model call's, whose `system_prompt` is its system message), a prompt builder's rendered `prompt`: chat
        messages, or one prompt string (what a PromptBuilder renders), the user's message."""
        kind = self.kind(span)
        if kind == self.GENERATOR:
            given = self._generator_input(span)
        else:
            carrier = self.PROMPT_CARRIERS.get(kind)
            given = parse_json(span.attributes.get(carrier)) if carrier is not None else None
        if not isinstance(given, Mapping):
            return None
        messages = given.get(self.MESSAGES, given.get(self.PROMPT))
        if not isinstance(messages, str):
            return message_prompt(messages)
        system = given.get(self.SYSTEM_PROMPT)  # a 2.x text generator's run-time system prompt
        return Prompt(system if isinstance(system, str) else None, messages)

    def prompt_spans(self, reading: Reading) -> Iterator[DecodedSpan]:
        """The generators, last first, then the prompt builders' rendered prompts, last first (the model call
        may be a component of the app's own, not a ...Generator)."""
        yield from super().prompt_spans(reading)
        yield from (s for s in reversed(reading.around) if self.kind(s) == self.PROMPT_BUILDER)

    def question(self, reading: Reading) -> str | None:
        """A pipeline's question-like input; an Agent's last user message."""
        anchor = reading.anchor
        if anchor.name == self.AGENT_RUN:
            prompt = message_prompt(anchor.attributes.get(self.AGENT_INPUT))
            return prompt.user if prompt is not None else None
        return question_text(anchor.attributes.get(self.PIPELINE_INPUT))

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return question_text(span.attributes.get(self.COMPONENT_INPUT))

    def own_answer(self, span: DecodedSpan) -> str | None:
        """The generator's replies among the pipeline's outputs (by component name)."""
        outputs = parse_json(span.attributes.get(self.PIPELINE_OUTPUT))
        if not isinstance(outputs, Mapping):
            return None
        return next((text for text in map(self._replies, reversed(list(outputs.values()))) if text), None)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        get = llm.attributes.get
        return self._replies(parse_json(get(self.COMPONENT_OUTPUT, get(self.AGENT_LLM_OUTPUT))))

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        return self.llm_output(span) is None

    def content_not_captured(self, reading: Reading) -> str | None:
        spans = [reading.anchor, *reading.around]
        if any(key in s.attributes for s in spans for key in self.CAPTURED):
            return None
        if reading.anchor.name == self.AGENT_RUN:
            recorded, judged = (
                f"the Agent recorded no {self.AGENT_OUTPUT} nor its model calls any input or output",
                "Agent",
            )
        else:
            components = sum(self.COMPONENT_TYPE in s.attributes for s in reading.around)
            recorded = (
                f"none of its {components} component(s) recorded {self.COMPONENT_INPUT} or "
                f"{self.COMPONENT_OUTPUT}, nor the pipeline {self.PIPELINE_OUTPUT}"
            )
            judged = "pipeline"
        return (
            f"{recorded}: Haystack's content tracing is off, so the documents and the answer are not in the "
            f"trace (set HAYSTACK_CONTENT_TRACING_ENABLED=true to judge this {judged})"
        )

    def _generator_input(self, llm: DecodedSpan) -> Any:
        """A generator component's input, or an Agent's model call's."""
        get = llm.attributes.get
        return parse_json(get(self.COMPONENT_INPUT, get(self.AGENT_LLM_INPUT)))

    def _builder_documents(self, builder: DecodedSpan) -> dict[str, Any] | None:
        """A prompt builder's `documents` input when it is a list of Haystack documents (objects with their
        text under `content`), never a text variable that happens to be named like documents."""
        inputs = parse_json(builder.attributes.get(self.COMPONENT_INPUT))
        documents = inputs.get(self.DOCUMENTS) if isinstance(inputs, Mapping) else None
        if not isinstance(documents, list) or not documents:
            return None
        if not all(isinstance(d, Mapping) and isinstance(d.get(self.CONTENT), str) for d in documents):
            return None
        return {self.DOCUMENTS: documents}

    def _replies(self, output: Any) -> str | None:
        """The text of a generator's first reply: a chat message (its text parts) or a string."""
        replies = output.get(self.REPLIES) if isinstance(output, Mapping) else None
        if not isinstance(replies, Sequence) or isinstance(replies, str) or not replies:
            return None
        reply = replies[0]
        if isinstance(reply, str):
            return reply if reply.strip() else None
        return assistant_text([reply])
