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

from collections.abc import Mapping
from typing import Any

from tracescore.extract._convention import Convention, Reading, UsageFields, without_wrappers
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._read import (
    Prompt,
    answer_text,
    assistant_text,
    documents_of,
    message_prompt,
    parse_json,
    question_text,
    user_text,
)
from tracescore.extract._tools import add_tool_result
from tracescore.model import ContextSourceKind, DecodedSpan, Trace

__all__ = ["MLflow"]


class MLflow(Convention):
    """MLflow Tracing's keys (`mlflow.*`, values JSON-encoded) and readers."""

    name = "mlflow"
    SPAN_TYPE = "mlflow.spanType"
    SPAN_INPUTS = "mlflow.spanInputs"
    SPAN_OUTPUTS = "mlflow.spanOutputs"
    TOKEN_USAGE = "mlflow.chat.tokenUsage"
    CHAT_TOOLS = "mlflow.chat.tools"
    UNTYPED = "UNKNOWN"  # what `@mlflow.trace` without a span_type records
    # (An UNKNOWN span is an interaction by what it encloses: see `anchors`.)
    AGENT, TOOL, RETRIEVER, RERANKER = "AGENT", "TOOL", "RETRIEVER", "RERANKER"
    INTERACTION_KINDS = frozenset({"CHAIN", AGENT, "WORKFLOW"})
    LLM_KINDS = frozenset({"LLM", "CHAT_MODEL"})
    TOOL_KINDS = frozenset({TOOL})
    EVIDENCE = frozenset({RETRIEVER, RERANKER, TOOL})
    # Chat-style inputs: OpenAI messages, Responses / ResponsesAgent input.
    MESSAGE_KEYS = ("messages", "input")
    MARKER = SPAN_TYPE
    LONE_LLM_CALLS = True
    LOOKED_IN = {
        "question": f"{SPAN_INPUTS} of the span (a string, a question-like argument or the last user "
        "message), of its first LLM call, or of its first retriever",
        "answer": f"{SPAN_OUTPUTS} of the span, else of its last LLM / CHAT_MODEL call",
        "documents": f"{SPAN_OUTPUTS} of RETRIEVER / RERANKER and TOOL spans, and tool messages in "
        f"{SPAN_INPUTS} of the last LLM call",
    }

    RUN_TOOL_ARGUMENTS = (SPAN_INPUTS,)
    RUN_TOOL_RESULT = (SPAN_OUTPUTS,)
    RUN_USAGE_JSON = {TOKEN_USAGE: UsageFields(("input_tokens",), ("output_tokens",))}
    RUN_MODEL_OUTPUT = (SPAN_OUTPUTS,)
    RUN_TOOL_DEFINITIONS = {CHAT_TOOLS: ()}

    def kind(self, span: DecodedSpan) -> str:
        value = span.attributes.get(self.SPAN_TYPE)
        # JSON-encoded by MLflow ('"RETRIEVER"'); plain when another exporter converted the span.
        return value.strip('"').upper() if isinstance(value, str) else ""

    def anchors(self, trace: Trace) -> list[DecodedSpan]:
        """CHAIN / AGENT / WORKFLOW spans, and UNKNOWN spans that enclose an LLM call, or a retrieval or tool
        and have a text output (a helper returning a string does not)."""
        typed = [s for s in trace.spans if self.SPAN_TYPE in s.attributes]
        enclose_llm: set[str] = set()
        enclose_evidence: set[str] = set()
        for span in typed:
            kind = self.kind(span)
            marked = (
                enclose_llm if kind in self.LLM_KINDS else enclose_evidence if kind in self.EVIDENCE else None
            )
            if marked is not None:
                for ancestor in trace.ancestors(span):
                    if ancestor.span_id in marked:
                        break  # marked up to the root already
                    marked.add(ancestor.span_id)
        answering = set()
        for span in typed:
            kind = self.kind(span)
            if kind in self.INTERACTION_KINDS or (
                kind == self.UNTYPED
                and (
                    span.span_id in enclose_llm
                    or (span.span_id in enclose_evidence and self.own_answer(span) is not None)
                )
            ):
                answering.add(span.span_id)
        return trace.outermost(lambda s: s.span_id in answering)

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        value = parse_json(span.attributes.get(self.SPAN_OUTPUTS))
        if isinstance(value, Mapping):
            choices = value.get("choices")
            first = choices[0] if isinstance(choices, list) and choices else None
            message = first.get("message") if isinstance(first, Mapping) else None
            if isinstance(message, Mapping) and message.get("tool_calls"):
                return True
            if [*_items(value.get("output"), "function_call"), *_items(value.get("content"), "tool_use")]:
                return True
        return _answer_text(value) is None

    def collect(self, reading: Reading) -> Reading:
        trace, around = reading.trace, reading.around
        by_type: dict[str, list[DecodedSpan]] = {}
        for span in around:  # one pass: `around` is every span below an agent
            by_type.setdefault(self.kind(span), []).append(span)
        retrievers, rerankers = by_type.get(self.RETRIEVER, []), by_type.get(self.RERANKER, [])
        # A reranker's output is what the model saw; else every retriever's documents.
        reranked = [s for s in rerankers if self.documents(s, ContextSourceKind.RERANKER)]
        tools = reading.loop_tools(by_type.get(self.TOOL, []))
        llms = reading.loop_llms([s for s in around if self.kind(s) in self.LLM_KINDS])
        return reading.found(
            retrievals=[(s, ContextSourceKind.RERANKER) for s in reranked]
            or [(s, ContextSourceKind.RETRIEVER) for s in retrievers],
            asked=retrievers or rerankers,
            tools=tools,
            # A tool that wraps a retriever was read through it.
            tool_results=without_wrappers(trace, tools, reranked or retrievers),
            llms=llms,
            sources=[*retrievers, *rerankers, *llms, *tools],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> list[str] | None:
        return documents_of(span.attributes.get(self.SPAN_OUTPUTS))

    def read_tool_result(self, reading: Reading, tool: DecodedSpan) -> None:
        # Without its inputs: an MLflow tool's arguments are not compared with the answer.
        add_tool_result(
            reading.contexts,
            tool,
            ContextSourceKind.TOOL,
            tool.attributes.get(self.SPAN_OUTPUTS),
            "tool result",
        )

    def reads_tool_messages(self, reading: Reading) -> bool:
        return self.no_tool_result(reading.tools)

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        inputs = parse_json(llm.attributes.get(self.SPAN_INPUTS))
        return genai_tool_results(inputs.get("messages")) if isinstance(inputs, Mapping) else []

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        messages = self._messages(parse_json(span.attributes.get(self.SPAN_INPUTS)))
        return message_prompt(messages) if messages is not None else None

    def question(self, reading: Reading) -> str | None:
        anchor, llms = reading.anchor, reading.llms
        kind = self.kind(anchor)
        if kind in self.LLM_KINDS:
            return self._question(llms[0] if reading.group else anchor)
        question = self._question(anchor)
        if question is None and llms and (reading.tools or kind == self.AGENT):
            question = self._question(llms[0])
        return question

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return question_text(span.attributes.get(self.SPAN_INPUTS))

    def own_answer(self, span: DecodedSpan) -> str | None:
        return _answer_text(parse_json(span.attributes.get(self.SPAN_OUTPUTS)))

    def llm_answer(self, llm: DecodedSpan) -> str | None:
        return None if self.asks_for_tool(llm) else self.own_answer(llm)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        # Not read: MLflow's LLM outputs do not tell when the answer was written.
        return None

    def _question(self, span: DecodedSpan) -> str | None:
        value = parse_json(span.attributes.get(self.SPAN_INPUTS))
        messages = self._messages(value)
        return user_text(messages) if messages is not None else question_text(value)

    def _messages(self, inputs: Any) -> list[Any] | None:
        """A call's chat messages in its inputs (`messages`, or a Responses API `input` list)."""
        if isinstance(inputs, Mapping):
            for key in self.MESSAGE_KEYS:
                messages = parse_json(inputs.get(key))
                if isinstance(messages, list):
                    return messages
        return None


def _answer_text(value: Any) -> str | None:
    """The text of a span's output: plain text or an answer-like field, or an LLM response as the client
    returned it (OpenAI chat / Responses, LangChain, Anthropic)."""
    if isinstance(value, Mapping):
        choices = value.get("choices")
        if isinstance(choices, list):
            first = choices[0] if choices and isinstance(choices[0], Mapping) else {}
            text = assistant_text([first.get("message")])
            return text if text is not None else _text(first.get("text"))
        generations = value.get("generations")
        if isinstance(generations, list):
            generation = generations[0] if generations else None
            generation = generation[0] if isinstance(generation, list) and generation else generation
            return _text(generation.get("text")) if isinstance(generation, Mapping) else None
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
    return answer_text(value)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _items(value: Any, kind: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping) and item.get("type") == kind]
