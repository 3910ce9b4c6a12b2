"""Langfuse SDK v3+ (OpenTelemetry-based): `langfuse.observation.type` spans written by `@observe`,
`start_as_current_observation`, the `langfuse.openai` drop-in client and Langfuse's framework handlers.

The interaction is the outermost `agent`, `chain` or `span` observation that is an LLM interaction (an agent
or chain, or a span with a generation, retriever, tool, agent or chain below it). Its question is its
`langfuse.observation.input`: text, a question-like field, chat messages (the last user message) or the
decorated function's arguments (`{"args": [...], "kwargs": {...}}`); else `langfuse.trace.input`; else the
first generation's last user message. Its answer is its `langfuse.observation.output`, else
`langfuse.trace.output`, else (also when the output is a program repr, or an object that is not text, as
when the function returns the model's stream) the assistant text of the last generation that did not ask
for a tool. Documents come from the outputs of the `retriever` and `tool` observations below it; without
tool observations that recorded a result, from the tool messages passed to its last generation; after them,
the tool messages of the conversation's earlier turns in the generation's input. A tool
that only echoes the answer (its arguments carry the answer, or it returns the answer itself rather than
documents), and a tool or retriever that ran after the answer was written, are not evidence (the shared rule,
`drop_answer_carriers`).
Without such an interaction each generation is one (a generation that asks for a tool with the one that
answers after it), with the retrievals inside it or beside it. Observations inside an `evaluator`,
`guardrail`, `tool`, `retriever` or `embedding` never give the question or the answer, nor are they an
interaction of their own; `event` observations are not read. The session is `session.id` (v3's
`update_current_trace` may put it on a span below the interaction) or `langfuse.session.id`; the user
likewise `user.id` or `langfuse.user.id`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._convention import Convention, Reading, UsageFields, first_text, without_wrappers
from tracescore.extract._history import TurnResult, genai_tool_results
from tracescore.extract._read import (
    Prompt,
    answer_text,
    assistant_text,
    call_arguments,
    is_repr,
    keyword_question,
    message_prompt,
    parse_json,
    question_text,
    user_text,
)
from tracescore.extract._tools import add_tool_result, answering_groups
from tracescore.model import ContextSourceKind, DecodedSpan, Trace, start_order

__all__ = ["Langfuse"]

# (span, its observation type, the enclosing non-answering observation type below the interaction or None)
_Below = list[tuple[DecodedSpan, str, str | None]]


class Langfuse(Convention):
    """Langfuse's keys (as its `LangfuseOtelSpanAttributes` names them) and readers."""

    name = "langfuse"
    SCOPE = "langfuse-sdk"
    OBSERVATION_TYPE = "langfuse.observation.type"
    INPUT = "langfuse.observation.input"
    OUTPUT = "langfuse.observation.output"
    LEVEL = "langfuse.observation.level"
    STATUS_MESSAGE = "langfuse.observation.status_message"
    USAGE_DETAILS = "langfuse.observation.usage_details"
    TRACE_INPUT = "langfuse.trace.input"
    TRACE_OUTPUT = "langfuse.trace.output"
    SESSION_KEYS = (semconv.SESSION_ID, "langfuse.session.id")
    USER_KEYS = (semconv.USER_ID, "langfuse.user.id")
    INTERACTION_KINDS = frozenset({"agent", "chain", "span"})
    LLM_KINDS = frozenset({"generation"})
    TOOL_KINDS = frozenset({"tool"})
    LLM_WORK = frozenset({"generation", "retriever", "tool", "agent", "chain"})
    # What happens inside these is theirs: a tool's or a judge's LLM call is not the app's answer.
    ENCLOSING = frozenset({"tool", "retriever", "evaluator", "guardrail", "embedding", "generation"})
    LLM_CALL = "generation"
    LOOKED_IN = {
        "question": f"{INPUT} of the span, {TRACE_INPUT}, and the last user message of its first generation",
        "answer": f"{OUTPUT} of the span (text, not a program repr), {TRACE_OUTPUT}, and the assistant "
        "message of its last generation's output",
        "documents": f"{OUTPUT} of the retriever and tool observations below the span and the tool messages "
        "in its last generation's input; with content capture off (capture_input/capture_output=False) none "
        "are recorded",
    }

    RUN_TOOL_ARGUMENTS = (INPUT,)
    RUN_TOOL_RESULT = (OUTPUT,)
    RUN_USAGE_JSON = {USAGE_DETAILS: UsageFields(("input", "prompt_tokens"), ("output", "completion_tokens"))}
    RUN_MODEL_OUTPUT = (OUTPUT,)
    RUN_ERROR_LEVEL = (LEVEL, STATUS_MESSAGE)

    def kind(self, span: DecodedSpan) -> str:
        kind = span.attributes.get(self.OBSERVATION_TYPE)
        if isinstance(kind, str):
            return kind.lower()
        return "span" if span.scope_name == self.SCOPE else ""

    def present(self, trace: Trace) -> bool:
        # Runs on every trace, and most have no Langfuse span.
        for span in trace.spans:
            if span.scope_name == self.SCOPE or self.OBSERVATION_TYPE in span.attributes:
                return True
        return False

    def candidates(self, trace: Trace) -> Iterator[Reading]:
        if not self.present(trace):
            return
        read: set[str] = set()
        for anchor in trace.outermost(self.is_interaction):
            below = self._below(trace, trace.children(anchor))
            if self.kind(anchor) == "span" and not any(kind in self.LLM_WORK for _, kind, _ in below):
                continue  # a traced function that is not an LLM interaction
            read.add(anchor.span_id)
            read.update(s.span_id for s, _, _ in below)
            yield self._collect(Reading(trace, self, anchor), below)
        # No interaction around them: each generation answers (with the call that asked for a tool).
        generations = [
            g
            for g in trace.outermost(lambda s: self.is_llm(s) and s.span_id not in read)
            if not any(self.kind(a) in self.ENCLOSING for a in trace.ancestors(g))  # a judge's or a tool's
        ]
        for group, since in answering_groups(generations, self.asks_for_tool):
            yield self.collect(Reading(trace, self, group[-1], group=group, since=since))

    def collect(self, reading: Reading) -> Reading:
        """An interaction observation with what is below it; a lone generation with what is beside it."""
        trace = reading.trace
        if reading.group is None:
            start = trace.children(reading.anchor)
        else:
            parent = trace.by_id.get(reading.anchor.parent_span_id or "")
            start = trace.children(parent) if parent is not None else trace.roots
        return self._collect(reading, self._below(trace, start))

    def _collect(self, reading: Reading, below: _Below) -> Reading:
        """`below`: the spans around the candidate, each with its type and the observation it is inside."""
        trace = reading.trace
        reading.around = [s for s, _, _ in below]
        retrievers, tools = _retrievers_and_tools(below)
        group = reading.group
        if group is not None:
            # Those that ran beside the calls before the answer, and those inside the calls themselves
            # (`@observe(as_type="generation")` on a function that retrieves).
            inside_retrievers, inside_tools = _retrievers_and_tools(
                [item for g in group for item in self._below(trace, trace.children(g))]
            )
            retrievers = _once([*reading.loop_tools(retrievers), *inside_retrievers])
            tools = _once([*reading.loop_tools(tools), *inside_tools])
            generations = list(group)
        else:
            generations = sorted(
                (s for s, kind, inside in below if kind == "generation" and inside is None), key=start_order
            )
        recorded = [r for r in retrievers if r.attributes.get(self.OUTPUT) is not None]
        return reading.found(
            retrievals=[(r, ContextSourceKind.RETRIEVER) for r in retrievers],
            asked=retrievers,
            tools=tools,
            # Except a retriever tool's, read from its retriever.
            tool_results=without_wrappers(trace, tools, recorded),
            llms=generations,
            sources=[*retrievers, *tools, *generations],
        )

    def _below(self, trace: Trace, start: Iterable[DecodedSpan]) -> _Below:
        """Every span from `start` down, each with its observation type and the enclosing non-answering
        observation type (None when only answering observations or other conventions' spans lie between)."""
        found: _Below = []
        seen: set[str] = set()
        stack: list[tuple[DecodedSpan, str | None]] = [(s, None) for s in reversed(list(start))]
        while stack:
            span, inside = stack.pop()
            if span.span_id in seen:
                continue  # parent ids that form a cycle
            seen.add(span.span_id)
            kind = self.kind(span)
            found.append((span, kind, inside))
            inner = inside if inside is not None or kind not in self.ENCLOSING else kind
            stack.extend((child, inner) for child in reversed(trace.children(span)))
        return found

    def read_retrieval(self, reading: Reading, span: DecodedSpan, kind: ContextSourceKind) -> None:
        """A retriever's output, read as a tool's result (one that ran after the answer was written is dropped
        by the shared rule: a lookup of sources for the answer cannot support it)."""
        output = span.attributes.get(self.OUTPUT)
        if output is None:
            reading.contexts.note(self._no_output(span))
        else:
            add_tool_result(reading.contexts, span, ContextSourceKind.RETRIEVER, output, "retriever output")

    def read_tool_result(self, reading: Reading, tool: DecodedSpan) -> None:
        if tool.attributes.get(self.OUTPUT) is None:
            reading.contexts.note(self._no_output(tool))
        else:
            super().read_tool_result(reading, tool)

    def reads_tool_messages(self, reading: Reading) -> bool:
        return self.no_tool_result(reading.tools if reading.tool_results is None else reading.tool_results)

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        return genai_tool_results(_messages(llm))

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """A generation's input messages."""
        messages = _messages(span)
        return message_prompt(messages) if messages else None

    def question(self, reading: Reading) -> str | None:
        if reading.group is not None:
            first = reading.group[0]
            return _user_message(first) or _call_input_question(first)
        first_user = _user_message(reading.llms[0]) if reading.llms else None
        hints = [
            h for h in (first_user, *(self.retrieval_question(s) for s, _ in reading.retrievals[:1])) if h
        ]
        return (
            _question(reading.anchor.attributes.get(self.INPUT), hints)
            or _question(self._trace_io(reading, self.TRACE_INPUT), hints)
            or first_user
        )

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        return _question(span.attributes.get(self.INPUT))

    def answer(self, reading: Reading) -> str | None:
        if reading.group is not None:
            return self.llm_output(reading.anchor)
        recorded = (
            answer_text(reading.anchor.attributes.get(self.OUTPUT)),
            answer_text(self._trace_io(reading, self.TRACE_OUTPUT)),
        )
        own = next((text for text in recorded if text is not None and not is_repr(text)), None)
        if own is not None:
            return own
        answered = [g for g in reading.llms if not self.asks_for_tool(g)]
        if answered:
            return self.llm_output(answered[-1])
        return next((text for text in recorded if text is not None), None)  # a repr, named in the skip

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        output = parse_json(span.attributes.get(self.OUTPUT))
        if isinstance(output, Mapping) and output.get("tool_calls"):
            return True
        return self.llm_output(span) is None

    def llm_output(self, llm: DecodedSpan) -> str | None:
        output = parse_json(llm.attributes.get(self.OUTPUT))
        if isinstance(output, list):
            return assistant_text(output)
        return answer_text(output)

    def more_conversation(self, reading: Reading) -> tuple[str | None, str | None]:
        """Langfuse's own keys, and the standard ones set with `update_current_trace` on a span below the
        interaction (v3), where the shared lineage rule found none."""
        anchor = reading.anchor
        spans = [anchor, *reading.trace.ancestors(anchor), *reading.around]
        return first_text(spans, self.SESSION_KEYS), first_text(spans, self.USER_KEYS)

    def _trace_io(self, reading: Reading, key: str) -> Any:
        """`update_current_trace(input=..., output=...)` (v3) writes the trace's IO on whichever span was
        current: the interaction's or one below it."""
        value = reading.anchor.attributes.get(key)
        if value is not None:
            return value
        return next((s.attributes[key] for s in reading.around if key in s.attributes), None)

    def _no_output(self, span: DecodedSpan) -> str:
        return (
            f"{self.kind(span)} span {span.span_id} '{span.name}' recorded no output (content capture off?)"
        )


def _retrievers_and_tools(below: _Below) -> tuple[list[DecodedSpan], list[DecodedSpan]]:
    """The retrievers (also a tool's: it gives the tool's documents) and the tools of the interaction, also
    those inside a generation (a model call that ran its tools itself ran them for the interaction)."""
    retrievers = [s for s, kind, inside in below if kind == "retriever" and inside in _RETRIEVERS_INSIDE]
    return retrievers, [s for s, kind, inside in below if kind == "tool" and inside in _TOOLS_INSIDE]


# What the interaction's retrievers and tools may sit inside (None: nothing that encloses them).
_TOOLS_INSIDE = (None, "generation")
_RETRIEVERS_INSIDE = (None, "tool", "generation")


def _once(spans: Iterable[DecodedSpan]) -> list[DecodedSpan]:
    return list({span.span_id: span for span in spans}.values())


def _normal(text: str) -> str:
    """`text` compared as words: whitespace and case do not count."""
    return " ".join(text.split()).casefold()


def _question(value: Any, hints: Sequence[str] = ()) -> str | None:
    """The question in an observation's input: text, a question-like field, chat messages (the last user
    message), or a decorated function's arguments."""
    value = parse_json(value)
    if isinstance(value, str):
        return value if value.strip() else None
    if isinstance(value, Mapping):
        if set(value) <= {"args", "kwargs"} and value:
            return _call_question(value, hints)
        messages = value.get("messages")
        if isinstance(messages, list):
            return user_text(messages)
        return question_text(value)
    if isinstance(value, list):
        return user_text(value) or question_text(value)
    return None


def _call_question(call: Mapping[str, Any], hints: Sequence[str]) -> str | None:
    """`@observe` records arguments by position (names unknown) and keyword: a question-like keyword, else
    the string argument (of several, the one the model or the retriever was given, else the first), else the
    last user message of a messages argument, else the question in a dict argument (a chain's input)."""
    args, kwargs = call_arguments(call)
    if (keyword := keyword_question(kwargs)) is not None:
        return keyword
    values = [*args, *kwargs.values()]
    strings = [v for v in values if isinstance(v, str) and v.strip()]
    if len(strings) > 1:
        given = {_normal(hint) for hint in hints}
        return next((s for s in strings if _normal(s) in given), strings[0])
    if strings:
        return strings[0]
    for value in values:
        if isinstance(value, (Mapping, list)) and (text := _question(value, hints)) is not None:
            return text
    return None


def _call_input_question(span: DecodedSpan) -> str | None:
    """The question of a generation whose input is not messages: a decorated function's arguments or a
    dict with a question field; never a raw prompt string, which may hold the documents too."""
    value = parse_json(span.attributes.get(Langfuse.INPUT))
    return _question(value) if isinstance(value, Mapping) else None


def _messages(span: DecodedSpan) -> list[Any] | None:
    """A generation's input messages: a list, or under `messages` with the tools beside them."""
    value = parse_json(span.attributes.get(Langfuse.INPUT))
    if isinstance(value, Mapping):
        value = value.get("messages")
    return value if isinstance(value, list) else None


def _user_message(span: DecodedSpan) -> str | None:
    messages = _messages(span)
    return user_text(messages) if messages else None
