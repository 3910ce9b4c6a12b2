"""MLflow Tracing exported over OTLP: `mlflow.spanType`, `mlflow.spanInputs`, `mlflow.spanOutputs`.

MLflow writes each of these JSON-encoded (a string output is a JSON string). The interaction is the outermost
CHAIN, AGENT or WORKFLOW span, or UNKNOWN span (a bare `@mlflow.trace`) that encloses an LLM call, or has a
text output and encloses a retrieval or tool; without one, each LLM / CHAT_MODEL call (a call that asks for a
tool is one interaction with the call that answers after the tool ran) with the retrievals and tools beside
it. The question is the span's inputs: a string, a question-like argument, or the last user message of a
message list; for an agent, an LLM call or a chain that called tools, else the first LLM call's last user
message; else the first retriever's query. The answer is the span's output as text; when that is missing,
not text (a generator's list of streamed chunks) or a program repr, the last LLM call's answer (OpenAI
`choices`, Responses `output`, LangChain `generations`, Anthropic content blocks). The documents are the
RETRIEVER outputs (MLflow Documents: `page_content`), a RERANKER's in place of the retrievals it reranked,
and the TOOL outputs; without a tool output, the tool messages passed to the last LLM call; after them, the
earlier turns' tool messages in its input. No other span
type is read as an answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from tracescore.extract._context import Contexts
from tracescore.extract._history import genai_tool_results
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import (
    ANSWER_KEYS,
    QUESTION_KEYS,
    documents_of,
    is_repr,
    last_message_text,
    parse_json,
    text_of,
)
from tracescore.extract._tools import (
    add_earlier_turns,
    add_tool_result,
    answering_groups,
    genai_tool_messages,
    ran_between,
)
from tracescore.model import DecodedSpan, Interaction, Trace

__all__ = ["MLflowRecognizer"]

SPAN_TYPE = "mlflow.spanType"
SPAN_INPUTS = "mlflow.spanInputs"
SPAN_OUTPUTS = "mlflow.spanOutputs"
_ANSWERING = frozenset({"CHAIN", "AGENT", "WORKFLOW"})
_UNTYPED = "UNKNOWN"  # what `@mlflow.trace` without a span_type records
_LLMS = frozenset({"LLM", "CHAT_MODEL"})
_RETRIEVER, _RERANKER, _TOOL = "RETRIEVER", "RERANKER", "TOOL"
_EVIDENCE = frozenset({_RETRIEVER, _RERANKER, _TOOL})
_USER = ("user", "human")
_ASSISTANT = ("assistant", "ai", "model")
_MESSAGE_KEYS = ("messages", "input")  # chat-style inputs: OpenAI messages, Responses / ResponsesAgent input


def _type(span: DecodedSpan) -> str:
    value = span.attributes.get(SPAN_TYPE)
    # JSON-encoded by MLflow ('"RETRIEVER"'); plain when another exporter converted the span.
    return value.strip('"').upper() if isinstance(value, str) else ""


class MLflowRecognizer:
    name = "mlflow"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        typed = [s for s in trace.spans if SPAN_TYPE in s.attributes]
        if not typed:
            return
        answering = _answering(trace, typed)
        anchors = trace.outermost(lambda s: s.span_id in answering)
        if anchors:
            for anchor in anchors:
                yield self._read(trace, anchor, list(trace.descendants(anchor)))
            return
        llms = trace.outermost(lambda s: _type(s) in _LLMS)
        for group, since in answering_groups(llms, _asks_for_tool):
            yield self._read(trace, group[-1], trace.beside(group[-1]), group, since)

    def _read(
        self,
        trace: Trace,
        anchor: DecodedSpan,
        around: list[DecodedSpan],
        group: list[DecodedSpan] | None = None,
        since: int = 0,
    ) -> Interaction | Skip:
        by_type: dict[str, list[DecodedSpan]] = {}
        for span in around:  # one pass: `around` is every span below an agent
            by_type.setdefault(_type(span), []).append(span)
        retrievers, rerankers = by_type.get(_RETRIEVER, []), by_type.get(_RERANKER, [])
        contexts = Contexts()
        # A reranker's output is what the model saw; else every retriever's documents.
        reranked = [(s, docs) for s in rerankers if (docs := documents_of(s.attributes.get(SPAN_OUTPUTS)))]
        used = [s for s, _ in reranked] or retrievers
        for span, docs in reranked:
            contexts.add(span, "reranker", docs)
        for retrieval in () if reranked else retrievers:
            if contexts.full:
                contexts.skip_span()
            else:
                contexts.add(
                    retrieval, "retriever", documents_of(retrieval.attributes.get(SPAN_OUTPUTS)) or ()
                )
        tools = by_type.get(_TOOL, [])
        if group is not None:
            tools = ran_between(tools, since, anchor)
        llms = group if group is not None else [s for s in around if _type(s) in _LLMS]
        _add_tools(trace, contexts, tools, used, llms)
        add_earlier_turns(contexts, llms, _input_tool_results)
        kind = _type(anchor)
        if kind in _LLMS:
            question = _question(llms[0] if group else anchor)
            answer = _answer(anchor)
        else:
            question = _question(anchor)
            answer = _answer(anchor)
            if answer is None or is_repr(answer):
                answer = _llm_answer(llms) or answer
            if question is None and llms and (tools or kind == "AGENT"):
                question = _question(llms[0])
        if question is None and (retrievers or rerankers):
            question = text_of((retrievers or rerankers)[0].attributes.get(SPAN_INPUTS), QUESTION_KEYS)
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*retrievers, *rerankers, *llms, *tools],
            tools=tools,
            llms=llms,
            looked_in=_UNANSWERED if group is not None and _asks_for_tool(anchor) else _LOOKED_IN,
        )


_LOOKED_IN = {
    "question": f"{SPAN_INPUTS} of the span (a string, a question-like argument or the last user message), "
    "of its first LLM call, or of its first retriever",
    "answer": f"{SPAN_OUTPUTS} of the span, else of its last LLM / CHAT_MODEL call",
    "documents": f"{SPAN_OUTPUTS} of RETRIEVER / RERANKER and TOOL spans, and tool messages in "
    f"{SPAN_INPUTS} of the last LLM call",
}
_UNANSWERED = {
    **_LOOKED_IN,
    "answer": "the LLM call's output: it asked for a tool and no later LLM call beside it answered (the "
    "trace may be incomplete)",
}


def _answering(trace: Trace, typed: list[DecodedSpan]) -> set[str]:
    """Ids of the spans that can be an interaction: CHAIN / AGENT / WORKFLOW, and UNKNOWN spans that enclose
    an LLM call, or a retrieval or tool and have a text output (a helper returning a string does not)."""
    enclose_llm: set[str] = set()
    enclose_evidence: set[str] = set()
    for span in typed:
        kind = _type(span)
        marked = enclose_llm if kind in _LLMS else enclose_evidence if kind in _EVIDENCE else None
        if marked is not None:
            for ancestor in trace.ancestors(span):
                if ancestor.span_id in marked:
                    break  # marked up to the root already
                marked.add(ancestor.span_id)
    answering = set()
    for span in typed:
        kind = _type(span)
        if kind in _ANSWERING or (
            kind == _UNTYPED
            and (
                span.span_id in enclose_llm
                or (span.span_id in enclose_evidence and _answer(span) is not None)
            )
        ):
            answering.add(span.span_id)
    return answering


def _add_tools(
    trace: Trace,
    contexts: Contexts,
    tools: list[DecodedSpan],
    used: list[DecodedSpan],
    llms: list[DecodedSpan],
) -> None:
    """Each TOOL span's output (a tool that wraps a retriever was read through it); when no tool span
    recorded an output, the tool messages passed to the last LLM call."""
    used_ids = {s.span_id for s in used}
    recorded = False
    for tool in tools:
        output = tool.attributes.get(SPAN_OUTPUTS)
        recorded = recorded or output is not None
        if used_ids and any(d.span_id in used_ids for d in trace.descendants(tool)):
            continue
        add_tool_result(contexts, tool, "tool", output, "tool result")
    if recorded:
        return
    for llm in reversed(llms):
        inputs = parse_json(llm.attributes.get(SPAN_INPUTS))
        results = genai_tool_messages(inputs.get("messages")) if isinstance(inputs, Mapping) else []
        if results:
            for result in results:
                add_tool_result(contexts, llm, "tool_message", result, "tool message passed to LLM")
            return


def _input_tool_results(llm: DecodedSpan) -> list[tuple[object, int]]:
    inputs = parse_json(llm.attributes.get(SPAN_INPUTS))
    return genai_tool_results(inputs.get("messages")) if isinstance(inputs, Mapping) else []


def _question(span: DecodedSpan) -> str | None:
    value = parse_json(span.attributes.get(SPAN_INPUTS))
    if isinstance(value, Mapping):
        for key in _MESSAGE_KEYS:
            messages = parse_json(value.get(key))
            if isinstance(messages, list):
                return last_message_text(messages, roles=_USER)
    return text_of(value, QUESTION_KEYS)


def _answer(span: DecodedSpan) -> str | None:
    return _answer_text(parse_json(span.attributes.get(SPAN_OUTPUTS)))


def _answer_text(value: Any) -> str | None:
    """The text of a span's output: plain text or an answer-like field, or an LLM response as the client
    returned it (OpenAI chat / Responses, LangChain, Anthropic)."""
    if isinstance(value, Mapping):
        choices = value.get("choices")
        if isinstance(choices, list):
            first = choices[0] if choices and isinstance(choices[0], Mapping) else {}
            text = last_message_text([first.get("message")], roles=_ASSISTANT)
            return text if text is not None else _text(first.get("text"))
        generations = value.get("generations")
        if isinstance(generations, list):
            first = generations[0] if generations else None
            first = first[0] if isinstance(first, list) and first else first
            return _text(first.get("text")) if isinstance(first, Mapping) else None
        output = value.get("output")
        if isinstance(output, list):
            texts = [
                str(part.get("text"))
                for item in output
                if isinstance(item, Mapping) and item.get("type") == "message"
                for part in item.get("content") or ()
                if isinstance(part, Mapping) and part.get("type") == "output_text"
            ]
            return _text("".join(texts))
    return text_of(value, ANSWER_KEYS)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _asks_for_tool(span: DecodedSpan) -> bool:
    value = parse_json(span.attributes.get(SPAN_OUTPUTS))
    if isinstance(value, Mapping):
        choices = value.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else None
        message = first.get("message") if isinstance(first, Mapping) else None
        if isinstance(message, Mapping) and message.get("tool_calls"):
            return True
        calls = [*_items(value.get("output"), "function_call"), *_items(value.get("content"), "tool_use")]
        if calls:
            return True
    return _answer_text(value) is None


def _items(value: Any, kind: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping) and item.get("type") == kind]


def _llm_answer(llms: list[DecodedSpan]) -> str | None:
    """The last LLM call's answer that is text (not a call that asked for a tool)."""
    for llm in reversed(llms):
        if _asks_for_tool(llm):
            continue
        text = _answer(llm)
        if text is not None and not is_repr(text):
            return text
    return None
