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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._convention import Convention, Reading, not_inside, without_wrappers
from tracescore.extract._history import TurnResult, indexed_tool_results
from tracescore.extract._read import (
    REDACTED,
    USER_ROLES,
    Prompt,
    answer_text,
    documents_of,
    indexed,
    indexed_prompt,
    is_repr,
    message_prompt,
    question_text,
    user_text,
)
from tracescore.extract._tools import tool_result_texts
from tracescore.model import ContextSourceKind, DecodedSpan
from tracescore.model import OpenInferenceSpanKind as Kind

__all__ = ["OpenInference"]


class OpenInference(Convention):
    """OpenInference's keys (as its `SpanAttributes` names them; the shared ones from `semconv`) and
    readers."""

    name = "openinference"
    SPAN_KIND = semconv.OPENINFERENCE_SPAN_KIND
    INPUT_VALUE = semconv.INPUT_VALUE
    OUTPUT_VALUE = semconv.OUTPUT_VALUE
    RETRIEVAL_DOCUMENTS = semconv.RETRIEVAL_DOCUMENTS  # .N.document.content
    RERANKER_OUTPUT_DOCUMENTS = "reranker.output_documents"  # .N.document.content
    DOCUMENT_CONTENT = "document.content"
    # .N.message.role / .N.message.content / .N.message.contents.M.message_content.text
    INPUT_MESSAGES = semconv.LLM_INPUT_MESSAGES
    OUTPUT_MESSAGES = semconv.LLM_OUTPUT_MESSAGES
    MESSAGE_ROLE = "message.role"
    MESSAGE_CONTENT = "message.content"
    MESSAGE_CONTENTS = "message.contents"
    MESSAGE_CONTENT_TEXT = "message_content.text"
    # A function message's results beside it: `.N.function.M` (AutoGen: JSON {name, content, call_id,
    # is_error}) or `.N.message.function.M` / `.N.message.function.content`.
    FUNCTION_RESULTS = ("function", "message.function")
    FUNCTION_CONTENT = "content"
    TOOL_CALL = f"{OUTPUT_MESSAGES}.0.message.tool_calls.0.tool_call.function.name"
    TOOL_NAME = "tool.name"
    TOOLS = "llm.tools"  # .N.tool.json_schema
    TOOL_JSON_SCHEMA = "tool.json_schema"
    TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
    TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
    CHAIN, AGENT, LLM, TOOL = Kind.CHAIN, Kind.AGENT, Kind.LLM, Kind.TOOL
    RETRIEVER, RERANKER = Kind.RETRIEVER, Kind.RERANKER
    INTERACTION_KINDS = frozenset({CHAIN, AGENT})
    LLM_KINDS = frozenset({LLM})
    TOOL_KINDS = frozenset({TOOL})
    RETRIEVING = frozenset({RETRIEVER, RERANKER})
    MARKER = SPAN_KIND
    LONE_LLM_CALLS = True
    OPEN = True

    RUN_TOOL_NAME = (TOOL_NAME,)
    RUN_TOOL_ARGUMENTS = (INPUT_VALUE,)
    RUN_TOOL_RESULT = (OUTPUT_VALUE,)
    RUN_PROMPT_TOKENS = (TOKEN_COUNT_PROMPT,)
    RUN_COMPLETION_TOKENS = (TOKEN_COUNT_COMPLETION,)
    RUN_MODEL_OUTPUT = (f"{OUTPUT_MESSAGES}.0.{MESSAGE_ROLE}",)
    RUN_INDEXED_TOOL_DEFINITIONS = ((TOOLS, TOOL_JSON_SCHEMA),)

    def kind(self, span: DecodedSpan) -> str:
        kind = span.attributes.get(self.SPAN_KIND)
        return kind.upper() if isinstance(kind, str) else ""

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        return self.TOOL_CALL in span.attributes or self.llm_output(span) is None

    def collect(self, reading: Reading) -> Reading:
        trace, anchor, around = reading.trace, reading.anchor, reading.around
        by_kind: dict[str, list[DecodedSpan]] = {}
        for span in around:  # one pass: `around` is every span below an agent
            by_kind.setdefault(self.kind(span), []).append(span)
        retrievers, rerankers = by_kind.get(self.RETRIEVER, []), by_kind.get(self.RERANKER, [])
        retrievals = [s for s in around if self.kind(s) in self.RETRIEVING] if rerankers else retrievers
        # A reranker's output is what the model saw; fall back to every retriever's documents.
        used = [s for s in rerankers if self.documents(s, ContextSourceKind.RERANKER)] or retrievers
        kind = ContextSourceKind.RERANKER if used is not retrievers else ContextSourceKind.RETRIEVER
        read = [(span, kind) for span in used]
        if f"{self.RETRIEVAL_DOCUMENTS}.0.{self.DOCUMENT_CONTENT}" in anchor.attributes:
            read.append((anchor, ContextSourceKind.SPAN))
        tools = reading.loop_tools(by_kind.get(self.TOOL, []))
        llms = reading.loop_llms(by_kind.get(self.LLM, []))
        return reading.found(
            retrievals=read,
            # A retrieval inside a tool searched what the model wrote, not what the user asked.
            asked=not_inside(trace, retrievals, anchor, self.is_tool),
            tools=tools,
            # A retriever tool's documents were read from its RETRIEVER.
            tool_results=without_wrappers(trace, tools, used),
            llms=llms,
            # Never an LLM call inside a tool: its prompt is the tool's.
            answering=not_inside(trace, llms, anchor, self.is_tool),
            sources=[*used, *llms, *tools],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        """Flattened `retrieval.documents.*` win; `output.value` is read only without them (it holds reprs in
        LlamaIndex and Haystack spans; reprs are dropped and noted by Contexts)."""
        attrs = span.attributes
        prefix = (
            self.RERANKER_OUTPUT_DOCUMENTS if kind == ContextSourceKind.RERANKER else self.RETRIEVAL_DOCUMENTS
        )
        flattened = indexed(attrs, prefix, self.DOCUMENT_CONTENT)
        if flattened:
            return [str(d) for d in flattened]
        return documents_of(attrs.get(self.OUTPUT_VALUE)) if kind != ContextSourceKind.SPAN else None

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        return indexed_tool_results(
            llm.attributes, self.INPUT_MESSAGES, self.MESSAGE_ROLE, self._tool_message
        )

    def _tool_message(self, attrs: Mapping[str, Any], message: str) -> list[Any]:
        """The results of one tool or function message: its content; else its content parts, one document
        each, a part that holds a list of documents (BeeAI writes a tool's returned list as one text part, its
        Python repr) giving them; else the function results recorded beside it."""
        content = attrs.get(f"{message}.{self.MESSAGE_CONTENT}")
        if content is not None:
            return [_observed(content)]
        parts = indexed(attrs, f"{message}.{self.MESSAGE_CONTENTS}", self.MESSAGE_CONTENT_TEXT)
        if parts:
            return [[text for part in parts for text in _part_documents(_observed(part))]]
        for key in self.FUNCTION_RESULTS:
            function = f"{message}.{key}"
            content = attrs.get(f"{function}.{self.FUNCTION_CONTENT}")
            results = [content] if content is not None else indexed(attrs, function)
            if results:
                return results
        return []

    def input_documents(self, reading: Reading) -> None:
        """Documents handed to a step as its input, when no retriever or tool span recorded them: a chain's
        `input.value` JSON with a list of documents under `context`/`documents`/... (a DSPy program whose
        search is a plain function passes `context=[...]` to its `ChainOfThought`). Nested steps pass the
        same list on: each text is taken once."""
        if not self.is_interaction(reading.anchor):
            return
        chains = [reading.anchor, *(s for s in reading.around if self.kind(s) == self.CHAIN)]
        reading.contexts.add_inputs((chain, chain.attributes.get(self.INPUT_VALUE)) for chain in chains)

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """Flattened `llm.input_messages`, else the call's `input.value` messages (the OpenAI Agents SDK)."""
        if not self.is_llm(span):
            return None
        prefix = self.INPUT_MESSAGES
        roles = indexed(span.attributes, prefix, self.MESSAGE_ROLE)
        if roles:
            return indexed_prompt(roles, lambda index: self._message_content(span, prefix, index))
        return message_prompt(span.attributes.get(self.INPUT_VALUE))

    def question(self, reading: Reading) -> str | None:
        anchor = reading.anchor
        if self.is_llm(anchor):
            first = reading.llms[0] if reading.llms else anchor
            return self._last_user_message(first) or question_text(first.attributes.get(self.INPUT_VALUE))
        question = question_text(anchor.attributes.get(self.INPUT_VALUE))
        if (
            question is None
            and reading.llms
            and (reading.tools or self.kind(anchor) == self.AGENT or reading.contexts.from_earlier_turns)
        ):
            # The agent's first LLM call that was given messages (LlamaIndex first prepares them in an LLM
            # span of its own); never one inside a tool, whose prompt is the tool's. Its input.value messages
            # only when no call has flattened ones from index 0 (an OpenAI Agents SDK agent without
            # instructions starts them at 1). A follow-up turn that called no tool is a conversation too:
            # its input holds earlier turns' results.
            asking = reading.answering or ()
            question = _first_read(asking, self._last_user_message) or _first_read(asking, self._user_input)
        return question

    def background_work(self, reading: Reading) -> str | None:
        """A chain that was asked no question, called no model, retrieved nothing, ran no tool and wrote no
        text: the app's own processing (LlamaIndex's ingestion, `SentenceSplitter.__call__` over the documents
        it indexes, which returns nodes), not an interaction whose answer went missing."""
        anchor = reading.anchor
        if reading.llms or reading.retrievals or reading.tools or self.is_llm(anchor):
            return None
        for text in (self.own_answer(anchor), question_text(anchor.attributes.get(self.INPUT_VALUE))):
            if text is not None and text.strip() and not is_repr(text):
                return None
        return (
            f"a {self.kind(anchor)} span with no question that called no model, retrieved nothing and ran no "
            "tool, with no text for an answer: the app's own processing (an indexing step), no interaction"
        )

    def content_not_captured(self, reading: Reading) -> str | None:
        """The app's TraceConfig hid what is to be judged: the answer (`output.value` masked, the LLM calls'
        output messages left out) or the retrieved documents (their content masked)."""
        if not (reading.answer or "").strip() or is_repr(reading.answer):
            if reading.anchor.attributes.get(self.OUTPUT_VALUE) == REDACTED:
                return _hidden("its answer", "OPENINFERENCE_HIDE_OUTPUTS")
        elif not reading.contexts and any(
            value == REDACTED
            for span, _ in reading.retrievals
            for key, value in span.attributes.items()
            if key.startswith(self.RETRIEVAL_DOCUMENTS) and key.endswith(self.DOCUMENT_CONTENT)
        ):
            return _hidden("its retrieved documents", "OPENINFERENCE_HIDE_RETRIEVAL_DOCUMENTS")
        return None

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return question_text(span.attributes.get(self.INPUT_VALUE))

    def own_answer(self, span: DecodedSpan) -> str | None:
        if self.is_llm(span):
            return self.llm_output(span)
        return answer_text(span.attributes.get(self.OUTPUT_VALUE))

    def llm_answer(self, llm: DecodedSpan) -> str | None:
        return None if self.TOOL_CALL in llm.attributes else self.llm_output(llm)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        return self._message_content(llm, self.OUTPUT_MESSAGES, 0) or answer_text(
            llm.attributes.get(self.OUTPUT_VALUE)
        )

    def _last_user_message(self, span: DecodedSpan) -> str | None:
        roles = indexed(span.attributes, self.INPUT_MESSAGES, self.MESSAGE_ROLE)
        for index in reversed(range(len(roles))):
            if str(roles[index]).lower() in USER_ROLES:
                return self._message_content(span, self.INPUT_MESSAGES, index)
        return None

    def _user_input(self, span: DecodedSpan) -> str | None:
        """The last user message of an LLM span's `input.value` message list, for flattened messages that do
        not start at index 0 (the OpenAI Agents instrumentation keeps 0 for instructions an agent may not
        have)."""
        return user_text(span.attributes.get(self.INPUT_VALUE))

    def _message_content(self, span: DecodedSpan, prefix: str, index: int) -> str | None:
        attrs = span.attributes
        content = attrs.get(f"{prefix}.{index}.{self.MESSAGE_CONTENT}")
        if isinstance(content, str) and content.strip():
            return content
        parts = indexed(attrs, f"{prefix}.{index}.{self.MESSAGE_CONTENTS}", self.MESSAGE_CONTENT_TEXT)
        joined = "".join(str(p) for p in parts)
        return joined if joined.strip() else None


def _hidden(what: str, setting: str) -> str:
    return (
        f"{what} recorded only as OpenInference's {REDACTED} mask: the instrumentation hides it "
        f"({setting}=true, or a TraceConfig hiding it); unset it to judge this interaction"
    )


_OBSERVATION = "Observation:"


def _observed(result: Any) -> Any:
    """A ReAct observation's result without its label (smolagents' memory resends a tool's result as
    `Observation:\n<result>`), so a returned list still gives its documents."""
    if isinstance(result, str) and result.startswith(_OBSERVATION):
        return result.removeprefix(_OBSERVATION).lstrip()
    return result


def _part_documents(part: Any) -> list[str]:
    texts, document_like = tool_result_texts(part)
    return texts if document_like else [str(part)]


def _first_read(spans: Sequence[DecodedSpan], read: Callable[[DecodedSpan], str | None]) -> str | None:
    return next((text for span in spans if (text := read(span))), None)
