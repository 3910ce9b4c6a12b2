"""OpenInference (Phoenix, Arize; LangChain, LangGraph, LlamaIndex, Haystack, openai, manual tracers).

The interaction is the outermost CHAIN or AGENT span: its `input.value` is the question and its `output.value`
the answer (when that is a program repr, as in Haystack and LlamaIndex streams, the last LLM call's output).
The documents are those of the RETRIEVER / RERANKER spans below it, read from
`retrieval.documents.N.document.content` (a reranker's `reranker.output_documents`), or from their
`output.value` JSON when the flattened attributes are absent (manual tracers); and the results of its TOOL
spans (`output.value`), or without tool spans the `tool` messages passed to its last LLM call; without any
of these, a list of documents its chains were given as input (`context`, `documents`, ...); after them, the
tool messages of the conversation's earlier turns in its LLM calls' `llm.input_messages` (`earlier_turn`).
Without a CHAIN or AGENT, an LLM span is the interaction, with the retrievals and tools that ran beside it; an
LLM call that asks for a tool is one interaction with the call that answers after the tool ran. RETRIEVER,
EMBEDDING, RERANKER, TOOL and PROMPT spans are never read as answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from tracescore import semconv
from tracescore.extract._context import Contexts
from tracescore.extract._history import indexed_tool_results
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
    answering_groups,
    called_by_tool,
    indexed_tool_messages,
    ran_between,
)
from tracescore.model import DecodedSpan, Interaction, Trace

__all__ = ["OpenInferenceRecognizer"]

_KIND = semconv.OPENINFERENCE_SPAN_KIND
_ANSWERING = frozenset({"CHAIN", "AGENT"})
_RETRIEVING = frozenset({"RETRIEVER", "RERANKER"})
_FIRST_DOCUMENT = semconv.document_content_key(0)
_TOOL_CALL = "llm.output_messages.0.message.tool_calls.0.tool_call.function.name"


def _kind(span: DecodedSpan) -> str:
    kind = span.attributes.get(_KIND)
    return kind.upper() if isinstance(kind, str) else ""


class OpenInferenceRecognizer:
    name = "openinference"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        if not trace.select(lambda s: _KIND in s.attributes):
            return
        anchors = trace.outermost(lambda s: _kind(s) in _ANSWERING)
        if anchors:
            for anchor in anchors:
                yield self._read(trace, anchor, list(trace.descendants(anchor)))
            return
        # No chain: each LLM call answers, except one that asks for a tool, which is one interaction with
        # the call that answers after the tool ran (OpenAI function calling).
        llms = trace.outermost(lambda s: _kind(s) == "LLM")
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
        by_kind: dict[str, list[DecodedSpan]] = {}
        for span in around:  # one pass: `around` is every span below an agent
            by_kind.setdefault(_kind(span), []).append(span)
        retrievers, rerankers = by_kind.get("RETRIEVER", []), by_kind.get("RERANKER", [])
        retrievals = [s for s in around if _kind(s) in _RETRIEVING] if rerankers else retrievers
        # A reranker's output is what the model saw; fall back to every retriever's documents.
        used = [s for s in rerankers if _documents(s, "RERANKER")] or retrievers
        kind = "reranker" if used is not retrievers else "retriever"
        contexts = Contexts()
        for retrieval in used:
            if contexts.full:
                contexts.skip_span()
            else:
                contexts.add(retrieval, kind, _documents(retrieval, kind.upper()) or ())
        if _FIRST_DOCUMENT in anchor.attributes:
            contexts.add(
                anchor, "span", indexed(anchor.attributes, semconv.RETRIEVAL_DOCUMENTS, "document.content")
            )
        tools = by_kind.get("TOOL", [])
        if group is not None:
            tools = ran_between(tools, since, anchor)
        llms = group if group is not None else by_kind.get("LLM", [])
        _add_tools(trace, contexts, tools, used, llms)
        if not contexts and _kind(anchor) in _ANSWERING:
            _add_input_documents(contexts, [anchor, *by_kind.get("CHAIN", [])])
        asking = [llm for llm in llms if not _called_by_tool(trace, llm, anchor)]
        add_earlier_turns(contexts, asking, _input_tool_results)
        if _kind(anchor) == "LLM":
            first = llms[0] if llms else anchor
            question = _last_user_message(first) or _io(first, semconv.INPUT_VALUE, QUESTION_KEYS)
            answer = _output_message(anchor) or _io(anchor, semconv.OUTPUT_VALUE, ANSWER_KEYS)
        else:
            question = _io(anchor, semconv.INPUT_VALUE, QUESTION_KEYS)
            answer = _io(anchor, semconv.OUTPUT_VALUE, ANSWER_KEYS)
            if answer is None or is_repr(answer):
                # Haystack, LlamaIndex streams: the chain's output is a repr; the LLM's text is right.
                answer = _llm_answer(llms) or answer
            if (
                question is None
                and llms
                and (tools or _kind(anchor) == "AGENT" or contexts.from_earlier_turns)
            ):
                # The agent's first LLM call that was given messages (LlamaIndex first prepares them in an
                # LLM span of its own); never one inside a tool, whose prompt is the tool's. Its input.value
                # messages only when no call has flattened ones from index 0 (an OpenAI Agents SDK agent
                # without instructions starts them at 1). A follow-up turn that called no tool is a
                # conversation too: its input holds earlier turns' results.
                question = _first_read(asking, _last_user_message) or _first_read(asking, _user_input)
        asked = [r for r in retrievals if not _called_by_tool(trace, r, anchor)]
        if question is None and asked:
            # A chain called with several inputs: the retriever's query is the question it answered. Not
            # a tool's: its query is what the model wrote, not what the user asked.
            question = _io(asked[0], semconv.INPUT_VALUE, QUESTION_KEYS)
        return interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*used, *llms, *tools],
            tools=tools,
            looked_in=_UNANSWERED if group is not None and _asks_for_tool(anchor) else None,
            llm_outputs=[
                (llm, _output_message(llm) or _io(llm, semconv.OUTPUT_VALUE, ANSWER_KEYS)) for llm in llms
            ],
        )


_UNANSWERED = {
    "answer": "the LLM call's output: it asked for a tool and no later LLM call beside it answered (the "
    "trace may be incomplete)"
}


def _add_tools(
    trace: Trace,
    contexts: Contexts,
    tools: list[DecodedSpan],
    used: list[DecodedSpan],
    llms: list[DecodedSpan],
) -> None:
    """Tool results as context: each TOOL span's output (a retriever tool's documents were read from its
    RETRIEVER already); without tool spans, the tool messages passed to the last LLM call."""
    used_ids = {s.span_id for s in used}
    for tool in tools:
        if used_ids and any(d.span_id in used_ids for d in trace.descendants(tool)):
            continue
        attrs = tool.attributes
        result, arguments = attrs.get(semconv.OUTPUT_VALUE), attrs.get(semconv.INPUT_VALUE)
        add_tool_result(contexts, tool, "tool", result, "tool result", arguments)
    if tools:
        return
    for llm in reversed(llms):
        messages = indexed_tool_messages(
            llm.attributes, "llm.input_messages", "message.role", "message.content"
        )
        if messages:
            for message in messages:
                add_tool_result(contexts, llm, "tool_message", message, "tool message passed to LLM")
            return


def _input_tool_results(llm: DecodedSpan) -> list[tuple[object, int]]:
    return indexed_tool_results(llm.attributes, "llm.input_messages", "message.role", "message.content")


def _add_input_documents(contexts: Contexts, chains: list[DecodedSpan]) -> None:
    """Documents handed to a step as its input, when no retriever or tool span recorded them: a chain's
    `input.value` JSON with a list of documents under `context`/`documents`/... (a DSPy program whose search
    is a plain function passes `context=[...]` to its `ChainOfThought`). Nested steps pass the same list on:
    each text is taken once."""
    seen: set[str] = set()
    for chain in chains:
        value = parse_json(chain.attributes.get(semconv.INPUT_VALUE))
        docs = documents_of(value) if isinstance(value, Mapping) else None
        if docs:
            contexts.add(chain, "input", [d for d in docs if d not in seen])
            seen.update(docs)


def _called_by_tool(trace: Trace, span: DecodedSpan, anchor: DecodedSpan) -> bool:
    return called_by_tool(trace, span, anchor, lambda s: _kind(s) == "TOOL")


def _asks_for_tool(span: DecodedSpan) -> bool:
    attrs = span.attributes
    if _TOOL_CALL in attrs:
        return True
    return _output_message(span) is None and _io(span, semconv.OUTPUT_VALUE, ANSWER_KEYS) is None


def _llm_answer(llms: list[DecodedSpan]) -> str | None:
    """The last LLM call's text output that is not a repr (the innermost call of a LlamaIndex stream)."""
    for llm in reversed(llms):
        if _TOOL_CALL in llm.attributes:
            continue
        text = _output_message(llm) or _io(llm, semconv.OUTPUT_VALUE, ANSWER_KEYS)
        if text is not None and not is_repr(text):
            return text
    return None


def _io(span: DecodedSpan, key: str, keys: tuple[str, ...]) -> str | None:
    return text_of(span.attributes.get(key), keys)


def _documents(span: DecodedSpan, kind: str) -> list[str] | None:
    """Flattened `retrieval.documents.*` win; `output.value` is read only without them (it holds reprs in
    LlamaIndex and Haystack spans; reprs are dropped and noted by Contexts)."""
    attrs = span.attributes
    prefix = "reranker.output_documents" if kind == "RERANKER" else semconv.RETRIEVAL_DOCUMENTS
    flattened = indexed(attrs, prefix, "document.content")
    if flattened:
        return [str(d) for d in flattened]
    return documents_of(attrs.get(semconv.OUTPUT_VALUE))


def _last_user_message(span: DecodedSpan) -> str | None:
    roles = indexed(span.attributes, "llm.input_messages", "message.role")
    for index in reversed(range(len(roles))):
        if str(roles[index]).lower() in ("user", "human"):
            return _message_content(span, "llm.input_messages", index)
    return None


def _first_read(spans: list[DecodedSpan], read: Callable[[DecodedSpan], str | None]) -> str | None:
    return next((text for span in spans if (text := read(span))), None)


def _user_input(span: DecodedSpan) -> str | None:
    """The last user message of an LLM span's `input.value` message list, for flattened messages that do not
    start at index 0 (the OpenAI Agents instrumentation keeps 0 for instructions an agent may not have)."""
    return last_message_text(span.attributes.get(semconv.INPUT_VALUE), roles=("user", "human"))


def _output_message(span: DecodedSpan) -> str | None:
    return _message_content(span, "llm.output_messages", 0)


def _message_content(span: DecodedSpan, prefix: str, index: int) -> str | None:
    attrs = span.attributes
    content = attrs.get(f"{prefix}.{index}.message.content")
    if isinstance(content, str) and content.strip():
        return content
    parts = indexed(attrs, f"{prefix}.{index}.message.contents", "message_content.text")
    joined = "".join(str(p) for p in parts)
    return joined if joined.strip() else None
