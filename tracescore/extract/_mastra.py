"""Mastra's tracing exported by its OtelExporter (`@mastra/otel-exporter`): OTel GenAI-convention spans, each
with its Mastra span type (`mastra.span.type`), an agent call being `invoke_agent {name}` (`agent_run`) ->
`model_generation` -> `agent_step` per model step -> the model call (`chat`, `model_inference`) and the tools
it asked for (`execute_tool`).

Read as the OTel GenAI conventions are (`_genai`: the agent span the interaction, the documents the tools'
`gen_ai.tool.call.result`, the answer the last chat's `gen_ai.output.messages`), with what the exporter writes
its own way: the agent span's input and output are not GenAI messages but `mastra.agent_run.input` (the text
the agent was called with, or its message list) and `mastra.agent_run.output` (`{"text": ...}`), and its
model calls record no input messages, so the question is read from the agent span's input, and the
earlier turns' tool results from what the model was given: the `model_generation` span's
`mastra.model_generation.input` (`{"messages": [...]}`: the system prompt, the history the app sent or the
memory recalled, the question).
With Mastra's memory (`@mastra/memory`) that input holds the thread's messages the memory recalled (its last
messages, or semantic recall's), tool results included, read the same way. A `ToolCallFilter` processor
leaves the earlier tool calls out of the prompt the model gets after that input was recorded: they are read
all the same, as the same user's earlier retrieval, which grounding across turns counts as evidence whether or
not the app resent it; read here, the follow-up needs no second judgement.
The conversation is the memory's thread (`gen_ai.conversation.id`), its user the memory's resource
(`mastra.metadata.resourceId`).

A workflow run (`invoke_workflow {id}`, `workflow_run`) is the interaction around its steps
(`workflow_step`) and the agents they call: its question is its input, `mastra.workflow_run.input` (the
text, or a question-like field of the input object), its answer its last chat's. A step that retrieves hands
its documents on to the next step, whose input (`mastra.workflow_step.input`) then holds them: read, when no
tool or retrieval recorded any, as the documents an answering step was given (a step's output is not read:
only what was handed on is what the answer could rest on). After `.parallel()` (and `.branch()`) a step is
handed the outputs of the steps that ran, keyed by their step ids (`mastra.workflow_step.step_id`): each
is read as handed on.

Without any of these, the documents an app put into the answering model call's prompt under a label that
names them are read by the shared rule (`_reader.read_prompt_documents`): Mastra's prompt is the system and
last user message of `mastra.model_generation.input`, else the agent span's `gen_ai.system_instructions`.
Instructions without such a label are never read (a greeting answered with none would read as unsupported).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tracescore.extract._convention import Reading, unlabelled_note
from tracescore.extract._genai import GenAI
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._read import Prompt, message_prompt, parse_json, question_text, user_text
from tracescore.model import DecodedSpan

__all__ = ["Mastra"]


class Mastra(GenAI):
    """The keys Mastra's OtelExporter writes beyond the OTel GenAI ones, and their readers."""

    name = "mastra"
    MARKER = "mastra.span.type"
    AGENT_INPUT = "mastra.agent_run.input"
    AGENT_OUTPUT = "mastra.agent_run.output"
    OUTPUT_TEXT = "text"
    RESOURCE_ID = "mastra.metadata.resourceId"
    GENERATION = "model_generation"  # the span type whose input is the conversation the model was given
    GENERATION_INPUT = "mastra.model_generation.input"
    GENERATION_MESSAGES = "messages"
    WORKFLOW_INPUT = "mastra.workflow_run.input"
    STEP = "workflow_step"  # a workflow's step: its input is what the step before handed it
    STEP_INPUT = "mastra.workflow_step.input"
    STEP_ID = "mastra.workflow_step.step_id"
    LOOKED_IN = {
        "question": f"{AGENT_INPUT} of the invoke_agent span (its text, or its last user message), "
        f"{WORKFLOW_INPUT} of the invoke_workflow span",
        "answer": f"{AGENT_OUTPUT} of the invoke_agent span, or the assistant message of "
        f"{GenAI.OUTPUT_MESSAGES} of its last chat",
        "documents": f"{GenAI.TOOL_RESULT[0]} of its execute_tool spans and {GenAI.RETRIEVAL_DOCUMENTS} of "
        f"retrieval spans; earlier turns' tool results in {GENERATION_INPUT}; a list of documents in a "
        f"workflow step's {STEP_INPUT}",
    }

    def kind(self, span: DecodedSpan) -> str:
        # Only Mastra's own spans: another producer's GenAI spans in the trace are the GenAI reader's.
        return super().kind(span) if self.MARKER in span.attributes else ""

    def collect(self, reading: Reading) -> Reading:
        found = super().collect(reading)
        # Its chat spans record no input: the model generation's input is the conversation the model had.
        generations = [s for s in reading.around if s.attributes.get(self.MARKER) == self.GENERATION]
        if generations:
            found.answering = generations
            found.sources = [*found.sources, *generations]
        return found

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        given = parse_json(llm.attributes.get(self.GENERATION_INPUT))
        if isinstance(given, Mapping):
            return genai_tool_results(given.get(self.GENERATION_MESSAGES))
        return super().input_tool_results(llm)

    def input_documents(self, reading: Reading) -> None:
        steps = [s for s in reading.around if s.attributes.get(self.MARKER) == self.STEP]
        ids = {s.attributes.get(self.STEP_ID) for s in steps}
        reading.contexts.add_inputs((step, value) for step in steps for value in self._handed_on(step, ids))

    def no_documents_note(self, reading: Reading) -> str | None:
        if not any(self.SYSTEM_INSTRUCTIONS in s.attributes for s in (reading.anchor, *reading.around)):
            return None
        return unlabelled_note(self.SYSTEM_INSTRUCTIONS)

    def _handed_on(self, step: DecodedSpan, ids: set[Any]) -> list[Any]:
        """What the step was handed: its input, or after `.parallel()` / `.branch()` each output of the steps
        that ran (its input keyed by their step ids)."""
        given = parse_json(step.attributes.get(self.STEP_INPUT))
        if isinstance(given, Mapping) and given and all(key in ids for key in given):
            return list(given.values())
        return [given]

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """A generation's: the messages of its input; another span's: its GenAI messages and instructions."""
        given = parse_json(span.attributes.get(self.GENERATION_INPUT))
        if isinstance(given, Mapping):
            return message_prompt(given.get(self.GENERATION_MESSAGES))
        return super().prompt(span)

    def prompt_spans(self, reading: Reading) -> Iterator[DecodedSpan]:
        """The generations, last first, then each agent span's `gen_ai.system_instructions` (a generation that
        recorded no input)."""
        yield from reversed(reading.answering or ())
        for span in reversed((reading.anchor, *reading.around)):
            if self.SYSTEM_INSTRUCTIONS in span.attributes:
                yield span

    def question(self, reading: Reading) -> str | None:
        attributes = reading.anchor.attributes
        asked = parse_json(attributes.get(self.AGENT_INPUT))
        if isinstance(asked, str) and asked:
            return asked
        if self.WORKFLOW_INPUT in attributes:
            return question_text(attributes[self.WORKFLOW_INPUT]) or super().question(reading)
        return user_text(asked) or super().question(reading)

    def own_answer(self, span: DecodedSpan) -> str | None:
        output = parse_json(span.attributes.get(self.AGENT_OUTPUT))
        text = output.get(self.OUTPUT_TEXT) if isinstance(output, Mapping) else None
        return text if isinstance(text, str) and text else super().own_answer(span)

    def named_conversation(self, anchor: DecodedSpan) -> tuple[str | None, str | None]:
        # The session is the shared rule's (`gen_ai.conversation.id`, the memory's thread).
        user = anchor.attributes.get(self.RESOURCE_ID)
        return None, user if isinstance(user, str) and user else None
