"""Haystack's own tracer (haystack-ai 2.x / 3.x through `opentelemetry-haystack`, or any tracer Haystack's
`tracing` is given): `haystack.pipeline.run` spans with a `haystack.component.run` span per component.

The interaction is the outermost `haystack.pipeline.run` (an AsyncPipeline's: `haystack.async_pipeline.run`
in Haystack 2.x). Its components are told apart by
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
convention's: this turn's without a tool span, earlier turns' as `earlier_turn`. What a prompt template put
into an earlier user message is prompt text, never split into guessed documents.

Haystack's tracer has no notion of a session: an app tags its own span around the pipeline
(`tracing.tracer.trace("chat.turn", tags={"session.id": ..., "user.id": ...})`), which the shared lineage
rule reads. With content tracing off no component input or output is recorded: the interaction is skipped as
`content_not_captured`, saying so, rather than judged on a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracescore.extract._convention import Convention, Reading
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._read import assistant_text, documents_of, parse_json, question_text
from tracescore.model import DecodedSpan

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
    REPLIES = "replies"  # a generator's output: chat messages, or strings
    MESSAGES = "messages"  # a chat generator's input
    PIPELINE, RETRIEVER, RANKER, GENERATOR = "pipeline", "retriever", "ranker", "generator"
    INTERACTION_KINDS = frozenset({PIPELINE})
    LLM_KINDS = frozenset({GENERATOR})
    MARKER = COMPONENT_TYPE
    LLM_CALL = "generator"
    LOOKED_IN = {
        "question": f"the question-like input of a component in {PIPELINE_INPUT}, and the first retriever's "
        f"query in its {COMPONENT_INPUT}",
        "answer": f"the {REPLIES} of a generator in {PIPELINE_OUTPUT}, and in the last generator's "
        f"{COMPONENT_OUTPUT}",
        "documents": f"the documents in the {COMPONENT_OUTPUT} of each ...Retriever (a ...Ranker's instead) "
        "and tool results in the generators' input messages",
    }

    RUN_MODEL_OUTPUT = (COMPONENT_OUTPUT,)

    def kind(self, span: DecodedSpan) -> str:
        component = span.attributes.get(self.COMPONENT_TYPE)
        if isinstance(component, str):
            return next((role for suffix, role in self.ROLES if component.endswith(suffix)), "component")
        return self.PIPELINE if span.name in self.PIPELINE_RUNS else ""

    def collect(self, reading: Reading) -> Reading:
        by_kind: dict[str, list[DecodedSpan]] = {}
        for span in reading.around:
            by_kind.setdefault(self.kind(span), []).append(span)
        retrievers = by_kind.get(self.RETRIEVER, [])
        # A ranker's output is what the model saw; else every retriever's documents.
        ranked = [s for s in by_kind.get(self.RANKER, []) if self.documents(s, "reranker")]
        generators = by_kind.get(self.GENERATOR, [])
        read = [(s, "reranker") for s in ranked] or [(s, "retriever") for s in retrievers]
        return reading.found(
            retrievals=read,
            asked=retrievers,
            llms=generators,
            sources=[*(s for s, _ in read), *generators],
        )

    def documents(self, span: DecodedSpan, kind: str) -> list[str] | None:
        return documents_of(span.attributes.get(self.COMPONENT_OUTPUT))

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        inputs = parse_json(llm.attributes.get(self.COMPONENT_INPUT))
        return genai_tool_results(inputs.get(self.MESSAGES)) if isinstance(inputs, Mapping) else []

    def question(self, reading: Reading) -> str | None:
        return question_text(reading.anchor.attributes.get(self.PIPELINE_INPUT))

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return question_text(span.attributes.get(self.COMPONENT_INPUT))

    def own_answer(self, span: DecodedSpan) -> str | None:
        """The generator's replies among the pipeline's outputs (by component name)."""
        outputs = parse_json(span.attributes.get(self.PIPELINE_OUTPUT))
        if not isinstance(outputs, Mapping):
            return None
        return next((text for text in map(self._replies, reversed(list(outputs.values()))) if text), None)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        return self._replies(parse_json(llm.attributes.get(self.COMPONENT_OUTPUT)))

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        return self.llm_output(span) is None

    def content_not_captured(self, reading: Reading) -> str | None:
        components = [s for s in reading.around if self.COMPONENT_TYPE in s.attributes]
        if self.PIPELINE_OUTPUT in reading.anchor.attributes or any(
            self.COMPONENT_INPUT in s.attributes or self.COMPONENT_OUTPUT in s.attributes for s in components
        ):
            return None
        return (
            f"none of its {len(components)} component(s) recorded {self.COMPONENT_INPUT} or "
            f"{self.COMPONENT_OUTPUT}, nor the pipeline {self.PIPELINE_OUTPUT}: Haystack's content tracing "
            "is off, so the documents and the answer are not in the trace (set "
            "HAYSTACK_CONTENT_TRACING_ENABLED=true to judge this pipeline)"
        )

    def _replies(self, output: Any) -> str | None:
        """The text of a generator's first reply: a chat message (its text parts) or a string."""
        replies = output.get(self.REPLIES) if isinstance(output, Mapping) else None
        if not isinstance(replies, Sequence) or isinstance(replies, str) or not replies:
            return None
        reply = replies[0]
        if isinstance(reply, str):
            return reply if reply.strip() else None
        return assistant_text([reply])
