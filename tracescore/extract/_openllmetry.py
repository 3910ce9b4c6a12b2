"""OpenLLMetry (traceloop-sdk): `traceloop.span.kind` workflow / task spans and `gen_ai.prompt.N.*` LLM spans.

The interaction is the outermost `workflow` (or `agent`) span: the question is read from its
`traceloop.entity.input` (the decorated function's arguments as JSON), the answer from its
`traceloop.entity.output`, or else from the last LLM completion (`gen_ai.completion.0.content`). Documents
come from the retrieval tasks below it: a task whose name says it retrieves (retrieve, search, ...) and whose
output is a list of documents, and `tool` spans (any result: one not document-like is one context, noted);
without tool spans, tool messages passed to the last LLM call; after them, the earlier turns' tool messages in
its input. LLM spans are read in both forms traceloop
has written: `gen_ai.prompt.N.*` / `gen_ai.completion.N.*` (before 0.5x) and `gen_ai.input.messages` /
`gen_ai.output.messages` (0.6x). Where no retrieval was recorded (traceloop's LangChain mode puts the
documents only inside the prompt), the workflow is skipped with that explanation: the prompt's text is not
a reliable split into question and documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from tracescore import semconv
from tracescore.extract._context import Contexts
from tracescore.extract._history import genai_tool_results, indexed_tool_results
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import (
    ANSWER_KEYS,
    QUESTION_KEYS,
    documents_of,
    indexed,
    is_repr,
    last_message_text,
    parse_json,
    text_of,
)
from tracescore.extract._tools import (
    add_earlier_turns,
    add_tool_result,
    called_by_tool,
    genai_tool_messages,
    indexed_tool_messages,
)
from tracescore.model import DecodedSpan, Interaction, Trace

__all__ = ["OpenLLMetryRecognizer"]

SPAN_KIND = "traceloop.span.kind"
ENTITY_NAME = "traceloop.entity.name"
ENTITY_INPUT = "traceloop.entity.input"
ENTITY_OUTPUT = "traceloop.entity.output"
_ANSWERING = frozenset({"workflow", "agent"})
_RETRIEVAL_NAME = re.compile(r"retriev|search|lookup|fetch_?doc|get_?doc|context|knowledge", re.IGNORECASE)


def _kind(span: DecodedSpan) -> str:
    kind = span.attributes.get(SPAN_KIND)
    return kind.lower() if isinstance(kind, str) else ""


class OpenLLMetryRecognizer:
    name = "openllmetry"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        for anchor in trace.outermost(lambda s: _kind(s) in _ANSWERING):
            yield self._read(trace, anchor)

    def _read(self, trace: Trace, anchor: DecodedSpan) -> Interaction | Skip:
        below = list(trace.descendants(anchor))
        retrievals = [s for s in below if _is_retrieval(s)]
        contexts = Contexts()
        for retrieval in retrievals:
            if contexts.full:
                contexts.skip_span()
            else:
                docs = documents_of(retrieval.attributes.get(ENTITY_OUTPUT))
                contexts.add(retrieval, "retriever", docs or ())
        tool_spans = [s for s in below if _kind(s) == "tool"]
        tools = [s for s in tool_spans if not any(s is r for r in retrievals)]
        for tool in tools:
            attrs = tool.attributes
            add_tool_result(
                contexts, tool, "tool", attrs.get(ENTITY_OUTPUT), "tool result", attrs.get(ENTITY_INPUT)
            )
        llms = [s for s in below if _completion(s) is not None or _has_messages(s)]
        if not tool_spans:  # the messages repeat what tool spans returned
            _add_tool_messages(contexts, llms)
        answering = [llm for llm in llms if not called_by_tool(trace, llm, anchor, _is_tool)]
        add_earlier_turns(contexts, answering, _input_tool_results)
        question = _question(anchor.attributes.get(ENTITY_INPUT))
        answer = _answer(anchor.attributes.get(ENTITY_OUTPUT))
        if answer is None or is_repr(answer):
            # No answer, or an object's repr where text belongs: the text of the LLM call that wrote it.
            answer = (
                next((a for s in reversed(llms) if (a := _completion(s)) and not is_repr(a)), None) or answer
            )
        asked = [r for r in retrievals if not _is_tool(r) and not called_by_tool(trace, r, anchor, _is_tool)]
        if question is None and asked:
            # A retrieval task's query; a tool's arguments are the model's search, not the question.
            question = _question(asked[0].attributes.get(ENTITY_INPUT))
        if not (retrievals or tools or contexts) and question and answer:
            where = (
                "no retrieval task recorded its documents (traceloop's LangChain instrumentation puts "
                "them only inside the LLM prompt); decorate the retriever with @task(name='retrieve') or "
                "use tracescore's decorators"
            )
            return Skip(
                "no_retrieval",
                f"openllmetry workflow {anchor.span_id} '{anchor.name}' of trace {trace.trace_id} "
                f"({anchor.service_name}): {where}",
                span=anchor,
                convention=self.name,
            )
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*retrievals, *tools, *llms],
            tools=tool_spans,
            llm_outputs=[(llm, _completion(llm)) for llm in llms],
        )


def _completion(span: DecodedSpan) -> str | None:
    """The LLM's answer: the last `gen_ai.completion.N.content`, else `gen_ai.output.messages`."""
    completions = indexed(span.attributes, "gen_ai.completion", "content")
    if completions:
        return str(completions[-1])
    messages = span.attributes.get(semconv.GEN_AI_OUTPUT_MESSAGES)
    return last_message_text(messages, roles=("assistant", "ai", "model")) if messages is not None else None


def _has_messages(span: DecodedSpan) -> bool:
    return semconv.GEN_AI_OUTPUT_MESSAGES in span.attributes or "gen_ai.prompt.0.role" in span.attributes


def _add_tool_messages(contexts: Contexts, llms: list[DecodedSpan]) -> None:
    for llm in reversed(llms):
        attrs = llm.attributes
        results = indexed_tool_messages(attrs, "gen_ai.prompt", "role", "content") or genai_tool_messages(
            attrs.get(semconv.GEN_AI_INPUT_MESSAGES)
        )
        if results:
            for result in results:
                add_tool_result(contexts, llm, "tool_message", result, "tool message passed to LLM")
            return


def _input_tool_results(llm: DecodedSpan) -> list[tuple[object, int]]:
    attrs = llm.attributes
    return indexed_tool_results(attrs, "gen_ai.prompt", "role", "content") or genai_tool_results(
        attrs.get(semconv.GEN_AI_INPUT_MESSAGES)
    )


def _is_tool(span: DecodedSpan) -> bool:
    return _kind(span) == "tool"


def _is_retrieval(span: DecodedSpan) -> bool:
    if _kind(span) not in ("task", "tool"):
        return False
    name = str(span.attributes.get(ENTITY_NAME) or span.name)
    return bool(_RETRIEVAL_NAME.search(name)) and documents_of(span.attributes.get(ENTITY_OUTPUT)) is not None


def _answer(entity_output: Any) -> str | None:
    """The return value as JSON; traceloop's LangChain mode wraps it as {"outputs": ...}."""
    output = parse_json(entity_output)
    if isinstance(output, Mapping) and "outputs" in output:
        output = output["outputs"]
    return text_of(output, ANSWER_KEYS)


def _question(entity_input: Any) -> str | None:
    """traceloop records a call as {"args": [...], "kwargs": {...}}: a question keyword, else the first
    string argument, else the text of a single dict argument (a LangChain chain's input). Its LangChain
    mode records {"inputs": ..., "kwargs": {...}} instead."""
    call = parse_json(entity_input)
    if isinstance(call, Mapping) and "inputs" in call:
        return text_of(call["inputs"], QUESTION_KEYS)
    if not isinstance(call, Mapping):
        return text_of(call, QUESTION_KEYS)
    kwargs = call.get("kwargs") if isinstance(call.get("kwargs"), Mapping) else {}
    for key in QUESTION_KEYS:
        if isinstance(kwargs.get(key), str) and kwargs[key].strip():
            return kwargs[key]
    args = call.get("args") if isinstance(call.get("args"), list) else []
    for arg in args:
        if isinstance(arg, str) and arg.strip():
            return arg
    for arg in args:
        if (text := text_of(arg, QUESTION_KEYS)) is not None:
            return text
    if "args" not in call and "kwargs" not in call:
        return text_of(call, QUESTION_KEYS)
    return None
