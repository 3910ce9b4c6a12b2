"""Firebase Genkit's own tracing (JS `genkit`, tracer `genkit-tracer`): every action Genkit runs is a span
whose `genkit:*` attributes say what it is (`genkit:type`, and `genkit:metadata:subtype` for an action:
`flow`, `agent`, `retriever`, `model`, `tool`...; `generate` is a `util`) and what went in and out
(`genkit:input`, `genkit:output`, JSON).

The interaction is the outermost flow (`ai.defineFlow`) or agent turn (`ai.defineAgent` in `genkit/beta`,
`agent.chat().send()`), or, outside both, the outermost `generate` (an `ai.generate` call). The question is
the flow's `genkit:input` (its text, or a question-like field of its input object), else the last user message
the first model action was given, without the documents Genkit appended to it (the text parts
`ai.generate({docs})` adds, marked `metadata.purpose: "context"`). The answer is the flow's `genkit:output`
(its text, or an answer-like field), an agent turn's output `message`, else the last model action's reply
(`genkit:output`'s `message`): the model actions (`/model/...`) are read, not the `generate` spans around
them, which repeat them.

The documents: each retriever's output (`ai.retrieve`: `{documents: [{content: [{text}]}]}`); each tool's
`genkit:output` (with its `genkit:input`, so one that merely carries the answer is dropped by the shared
rule); without tool spans, the `toolResponse` parts in the model action's input messages; the documents handed
to the model (`ai.generate({docs})`: the model action's input `docs`) when nothing else recorded any; and the
earlier turns' `toolResponse` parts in those messages (an agent's session state resent), with their turn. A
`toolResponse` (`{name, ref, output}`) is named and argued by the `toolRequest` (`{name, ref, input}`) the
model made before it in the same messages: by `ref` (the model's call id), else by tool and order (a plugin
that sets no `ref`), as Gemini's parts are paired (`_history`): a run's calls read from the messages compare
by arguments as tool spans' do.
Genkit records content always: it has no setting that leaves inputs and outputs out.

The route is the flow's or agent's name (`genkit:name`); the session an agent turn's
`genkit:metadata:agent:sessionId` (the chat state's `sessionId`). Genkit records no user, nor a session for a
flow (a flow called from outside Genkit is a root span: an app's span around it is not its parent).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tracescore.extract._convention import Convention, Reading, UsageFields
from tracescore.extract._history import Gemini, TurnResult, genai_tool_results
from tracescore.extract._read import Prompt, answer_text, message_prompt, parse_json, question_text, user_text
from tracescore.model import ContextSourceKind, DecodedSpan, start_order

__all__ = ["Genkit"]


class Genkit(Convention):
    """Genkit's span attributes (`genkit:*`) and readers."""

    name = "genkit"
    MARKER = "genkit:type"
    SUBTYPE = "genkit:metadata:subtype"
    NAME = "genkit:name"
    INPUT = "genkit:input"
    OUTPUT = "genkit:output"
    # The kinds: an action's subtype, or the type of a span that is not an action (`generate` is a `util`).
    FLOW, AGENT, GENERATE = "flow", "agent", "generate"
    MODEL, TOOL, RETRIEVER = "model", "tool", "retriever"
    UTIL = "util"
    INTERACTION_KINDS = frozenset({FLOW, AGENT, GENERATE})
    NAMED = frozenset({FLOW, AGENT})  # the kinds whose name is the route
    # The session of an agent's chat (`agent.chat()`: the state's `sessionId`, or one Genkit made up).
    SESSION_ID = "genkit:metadata:agent:sessionId"
    LLM_KINDS = frozenset({MODEL})
    TOOL_KINDS = frozenset({TOOL})
    # The shapes of Genkit's messages and documents (`genkit:input` / `genkit:output` JSON).
    MESSAGES, MESSAGE, CONTENT, TEXT = "messages", "message", "content", "text"
    DOCS, DOCUMENTS, QUERY = "docs", "documents", "query"
    TOOL_REQUEST, TOOL_RESPONSE, TOOL_OUTPUT, TOOL_NAME = "toolRequest", "toolResponse", "output", "name"
    TOOL_INPUT, TOOL_REF = "input", "ref"  # a `toolRequest`'s arguments; the id a `toolResponse` answers
    PART_METADATA, PURPOSE, CONTEXT_PURPOSE = "metadata", "purpose", "context"
    TOOLS, USAGE = "tools", "usage"
    LLM_CALL = "model action"
    TOOL_MESSAGE = "toolResponse part passed to the model"
    LOOKED_IN = {
        "question": f"{INPUT} of the flow, else the last user message of its first model action's {INPUT}",
        "answer": f"{OUTPUT} of the flow, else the message of its last model action's {OUTPUT}",
        "documents": f"{OUTPUT} of its retriever and tool actions, {TOOL_RESPONSE} parts and {DOCS} in its "
        f"model actions' {INPUT}",
    }

    RUN_TOOL_NAME = (NAME,)
    RUN_TOOL_ARGUMENTS = (INPUT,)
    RUN_TOOL_RESULT = (OUTPUT,)
    RUN_USAGE_JSON = {OUTPUT: UsageFields(("inputTokens",), ("outputTokens",), (USAGE,))}
    RUN_MODEL_OUTPUT = (OUTPUT,)
    RUN_TOOL_DEFINITIONS = {INPUT: (TOOLS,)}

    def kind(self, span: DecodedSpan) -> str:
        attributes = span.attributes
        kind = attributes.get(self.MARKER)
        if kind is None:
            return ""
        if kind == self.UTIL:
            return str(attributes.get(self.NAME) or "")
        return str(attributes.get(self.SUBTYPE) or kind)

    def collect(self, reading: Reading) -> Reading:
        around = reading.around
        tools = [s for s in around if self.is_tool(s)]
        inside_tools = {d.span_id for tool in tools for d in reading.trace.descendants(tool)}
        # A retriever a tool ran is read as the tool's result: that is what the model saw.
        retrievals = [
            (s, ContextSourceKind.RETRIEVER)
            for s in around
            if self.kind(s) == self.RETRIEVER and s.span_id not in inside_tools
        ]
        llms = sorted((s for s in around if self.is_llm(s)), key=start_order)
        return reading.found(
            retrievals=retrievals,
            asked=[s for s, _ in retrievals],
            tools=tools,
            llms=llms,
            prompted=llms[-1:],
            sources=[*llms, *tools, *(s for s, _ in retrievals)],
        )

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> Sequence[Any] | None:
        output = parse_json(span.attributes.get(self.OUTPUT))
        if not isinstance(output, Mapping):
            return None
        return self._texts(output.get(self.DOCUMENTS))

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        given = parse_json(span.attributes.get(self.INPUT))
        query = given.get(self.QUERY) if isinstance(given, Mapping) else None
        texts = self._texts([query])
        return texts[0] if texts else None

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        # Genkit's `toolRequest` / `toolResponse` parts as the call and result parts the shared reader pairs.
        messages = self._messages(llm)
        return genai_tool_results([self._tool_parts(m) for m in messages]) if messages else []

    def input_documents(self, reading: Reading) -> None:
        answering = reading.llms[-1:]
        for llm in answering:
            given = parse_json(llm.attributes.get(self.INPUT))
            docs = self._texts(given.get(self.DOCS)) if isinstance(given, Mapping) else None
            if docs:
                reading.contexts.add(llm, ContextSourceKind.INPUT, docs)

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """A model action's system messages and last user message (the documents Genkit appended left out)."""
        messages = self._messages(span)
        return message_prompt([self._without_context(m) for m in messages]) if messages else None

    def prompt_spans(self, reading: Reading) -> Iterator[DecodedSpan]:
        yield from reversed(reading.llms)

    def question(self, reading: Reading) -> str | None:
        anchor = reading.anchor
        if self.kind(anchor) == self.FLOW and (asked := question_text(anchor.attributes.get(self.INPUT))):
            return asked
        messages = self._messages(reading.llms[0]) if reading.llms else []
        return user_text([self._without_context(m) for m in messages])

    def own_answer(self, span: DecodedSpan) -> str | None:
        kind = self.kind(span)
        if kind == self.AGENT:
            return self.llm_output(span)  # its output's `message`, as a model action's
        return answer_text(span.attributes.get(self.OUTPUT)) if kind == self.FLOW else None

    def llm_output(self, llm: DecodedSpan) -> str | None:
        """The text of the `message` in the span's output (a model action's reply, an agent turn's)."""
        output = parse_json(llm.attributes.get(self.OUTPUT))
        message = output.get(self.MESSAGE) if isinstance(output, Mapping) else None
        if not isinstance(message, Mapping):
            return None
        texts = [p[self.TEXT] for p in self._parts(message) if isinstance(p.get(self.TEXT), str)]
        joined = "".join(texts)
        return joined if joined.strip() else None

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        output = parse_json(span.attributes.get(self.OUTPUT))
        message = output.get(self.MESSAGE) if isinstance(output, Mapping) else None
        return isinstance(message, Mapping) and any(self.TOOL_REQUEST in p for p in self._parts(message))

    def route(self, anchor: DecodedSpan) -> str | None:
        name = anchor.attributes.get(self.NAME)
        return name if self.kind(anchor) in self.NAMED and isinstance(name, str) and name else None

    def named_conversation(self, anchor: DecodedSpan) -> tuple[str | None, str | None]:
        session = anchor.attributes.get(self.SESSION_ID)
        return (session if isinstance(session, str) and session else None), None

    def _messages(self, span: DecodedSpan) -> list[Mapping[str, Any]]:
        given = parse_json(span.attributes.get(self.INPUT))
        messages = given.get(self.MESSAGES) if isinstance(given, Mapping) else None
        return [m for m in messages if isinstance(m, Mapping)] if isinstance(messages, list) else []

    def _parts(self, message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        content = message.get(self.CONTENT)
        return [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []

    def _without_context(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """The message without the text parts Genkit added from `docs` (not what the user asked)."""
        parts = [p for p in self._parts(message) if not self._is_context(p)]
        return {**message, self.CONTENT: parts}

    def _is_context(self, part: Mapping[str, Any]) -> bool:
        metadata = part.get(self.PART_METADATA)
        return isinstance(metadata, Mapping) and metadata.get(self.PURPOSE) == self.CONTEXT_PURPOSE

    def _tool_parts(self, message: Mapping[str, Any]) -> Mapping[str, Any]:
        """The message with its `toolRequest` / `toolResponse` parts in Gemini's shape, which pairs a result
        with its call the way Genkit does: by `ref` (the model's call id, where the plugin gave one), else
        the n-th response of a tool answers its n-th request (`_history`)."""
        parts: list[Mapping[str, Any]] = []
        for part in self._parts(message):
            request, response = part.get(self.TOOL_REQUEST), part.get(self.TOOL_RESPONSE)
            if isinstance(request, Mapping):
                parts.append(
                    {Gemini.CALL: {**self._call(request), Gemini.ARGUMENTS: request.get(self.TOOL_INPUT)}}
                )
            elif isinstance(response, Mapping):
                parts.append(
                    {Gemini.RESPONSE: {**self._call(response), Gemini.RESULT: response.get(self.TOOL_OUTPUT)}}
                )
            else:
                parts.append(part)
        return {**message, self.CONTENT: parts}

    def _call(self, part: Mapping[str, Any]) -> dict[str, Any]:
        """The tool and the call id (`ref`) of a `toolRequest` / `toolResponse`, under Gemini's names."""
        return {Gemini.NAME: part.get(self.TOOL_NAME), Gemini.ID: part.get(self.TOOL_REF)}

    def _texts(self, documents: Any) -> list[str] | None:
        """The texts of Genkit documents (`{content: [{text}, ...]}`: the text parts joined)."""
        if not isinstance(documents, list):
            return None
        texts = []
        for document in documents:
            if isinstance(document, Mapping):
                parts = self._parts(document)
                text = "".join(p[self.TEXT] for p in parts if isinstance(p.get(self.TEXT), str))
                if text.strip():
                    texts.append(text)
        return texts
