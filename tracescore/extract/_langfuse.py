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

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from tracescore import semconv
from tracescore.extract._context import Contexts
from tracescore.extract._history import genai_tool_results
from tracescore.extract._protocol import Skip, interaction
from tracescore.extract._read import (
    ANSWER_KEYS,
    QUESTION_KEYS,
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

__all__ = ["LangfuseRecognizer"]

SCOPE = "langfuse-sdk"
OBSERVATION_TYPE = "langfuse.observation.type"
INPUT = "langfuse.observation.input"
OUTPUT = "langfuse.observation.output"
TRACE_INPUT = "langfuse.trace.input"
TRACE_OUTPUT = "langfuse.trace.output"
_SESSION_KEYS = (semconv.SESSION_ID, "langfuse.session.id")
_USER_KEYS = (semconv.USER_ID, "langfuse.user.id")
_ANSWERING = frozenset({"agent", "chain", "span"})
_LLM_WORK = frozenset({"generation", "retriever", "tool", "agent", "chain"})
# What happens inside these is theirs: a tool's or a judge's LLM call is not the app's answer.
_ENCLOSING = frozenset({"tool", "retriever", "evaluator", "guardrail", "embedding", "generation"})
_USER = ("user", "human")
_ASSISTANT = ("assistant", "ai", "model")

# (span, its observation type, the enclosing non-answering observation type below the interaction or None)
_Below = list[tuple[DecodedSpan, str, str | None]]


def _type(span: DecodedSpan) -> str:
    kind = span.attributes.get(OBSERVATION_TYPE)
    if isinstance(kind, str):
        return kind.lower()
    return "span" if span.scope_name == SCOPE else ""


def _has_observations(trace: Trace) -> bool:
    # Runs on every trace, and most have no Langfuse span.
    for span in trace.spans:  # noqa: SIM110 (any() over a generator costs more per trace)
        if span.scope_name == SCOPE or OBSERVATION_TYPE in span.attributes:
            return True
    return False


class LangfuseRecognizer:
    name = "langfuse"

    def recognize(self, trace: Trace) -> Iterator[Interaction | Skip]:
        if not _has_observations(trace):
            return
        read: set[str] = set()
        for anchor in trace.outermost(lambda s: _type(s) in _ANSWERING):
            below = _below(trace, trace.children(anchor))
            if _type(anchor) == "span" and not any(kind in _LLM_WORK for _, kind, _ in below):
                continue  # a traced function that is not an LLM interaction
            read.add(anchor.span_id)
            read.update(s.span_id for s, _, _ in below)
            yield self._read(trace, anchor, below)
        # No interaction around them: each generation answers (with the call that asked for a tool).
        generations = [
            g
            for g in trace.outermost(lambda s: _type(s) == "generation" and s.span_id not in read)
            if not any(_type(a) in _ENCLOSING for a in trace.ancestors(g))  # a judge's or a tool's call
        ]
        for group, since in answering_groups(generations, _asks_for_tool):
            anchor = group[-1]
            parent = trace.by_id.get(anchor.parent_span_id or "")
            beside = _below(trace, trace.children(parent) if parent is not None else trace.roots)
            yield self._read(trace, anchor, beside, group, since)

    def _read(
        self,
        trace: Trace,
        anchor: DecodedSpan,
        below: _Below,
        group: list[DecodedSpan] | None = None,
        since: int = 0,
    ) -> Interaction | Skip:
        retrievers, tools = _retrievers_and_tools(below)
        if group is not None:
            # Those that ran beside the calls before the answer, and those inside the calls themselves
            # (`@observe(as_type="generation")` on a function that retrieves).
            inside_retrievers, inside_tools = _retrievers_and_tools(
                [item for g in group for item in _below(trace, trace.children(g))]
            )
            retrievers = [*ran_between(retrievers, since, anchor), *inside_retrievers]
            tools = [*ran_between(tools, since, anchor), *inside_tools]
            generations = group
            question = _user_message(group[0]) or _call_input_question(group[0])
            answer = _generation_text(anchor)
        else:
            generations = sorted(
                (s for s, kind, inside in below if kind == "generation" and inside is None), key=_start
            )
            first_user = _user_message(generations[0]) if generations else None
            hints = [h for h in (first_user, *(_question(_input(r)) for r in retrievers[:1])) if h]
            question = (
                _question(_input(anchor), hints)
                or _question(_trace_io(anchor, below, TRACE_INPUT), hints)
                or first_user
            )
            answer = _answer(anchor, below, generations)
        contexts = Contexts()
        used = _add_retrievers(contexts, retrievers)
        if not _add_tools(trace, contexts, tools, used):
            _add_tool_messages(contexts, generations)
        add_earlier_turns(contexts, generations, lambda g: genai_tool_results(_messages(g)))
        if question is None and retrievers:
            question = _question(_input(retrievers[0]))
        found = interaction(
            trace,
            anchor,
            convention=self.name,
            question=question,
            contexts=contexts,
            answer=answer,
            sources=[*retrievers, *tools, *generations],
            tools=tools,
            llm_outputs=[(g, _generation_text(g)) for g in generations],
            looked_in=_UNANSWERED if group is not None and _asks_for_tool(anchor) else _LOOKED_IN,
        )
        if isinstance(found, Interaction) and (found.session_id is None or found.user_id is None):
            spans = [anchor, *trace.ancestors(anchor), *(s for s, _, _ in below)]
            session = found.session_id or _trace_attribute(spans, _SESSION_KEYS)
            user = found.user_id or _trace_attribute(spans, _USER_KEYS)
            if (session, user) != (found.session_id, found.user_id):
                return dataclasses.replace(found, session_id=session, user_id=user)
        return found


_LOOKED_IN = {
    "question": f"{INPUT} of the span, {TRACE_INPUT}, and the last user message of its first generation",
    "answer": f"{OUTPUT} of the span (text, not a program repr), {TRACE_OUTPUT}, and the assistant message "
    "of its last generation's output",
    "documents": f"{OUTPUT} of the retriever and tool observations below the span and the tool messages in "
    "its last generation's input; with content capture off (capture_input/capture_output=False) none are "
    "recorded",
}
_UNANSWERED = {
    **_LOOKED_IN,
    "answer": "the generation's output: it asked for a tool and no later generation beside it answered (the "
    "trace may be incomplete)",
}


def _below(trace: Trace, start: Iterable[DecodedSpan]) -> _Below:
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
        kind = _type(span)
        found.append((span, kind, inside))
        inner = inside if inside is not None or kind not in _ENCLOSING else kind
        stack.extend((child, inner) for child in reversed(trace.children(span)))
    return found


def _retrievers_and_tools(below: _Below) -> tuple[list[DecodedSpan], list[DecodedSpan]]:
    """The retrievers (also a tool's: it gives the tool's documents) and the tools of the interaction."""
    retrievers = [s for s, kind, inside in below if kind == "retriever" and inside in (None, "tool")]
    return retrievers, [s for s, kind, inside in below if kind == "tool" and inside is None]


def _normal(text: str) -> str:
    """`text` compared as words: whitespace and case do not count."""
    return " ".join(text.split()).casefold()


def _start(span: DecodedSpan) -> tuple[int, int]:
    return span.start_time_unix_nano, span.end_time_unix_nano


def _input(span: DecodedSpan) -> Any:
    return span.attributes.get(INPUT)


def _trace_io(anchor: DecodedSpan, below: _Below, key: str) -> Any:
    """`update_current_trace(input=..., output=...)` (v3) writes the trace's IO on whichever span was
    current: the interaction's or one below it."""
    value = anchor.attributes.get(key)
    if value is not None:
        return value
    return next((s.attributes[key] for s, _, _ in below if key in s.attributes), None)


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
            return last_message_text(messages, _USER)
        return text_of(value, QUESTION_KEYS)
    if isinstance(value, list):
        return last_message_text(value, _USER) or text_of(value, QUESTION_KEYS)
    return None


def _call_question(call: Mapping[str, Any], hints: Sequence[str]) -> str | None:
    """`@observe` records arguments by position (names unknown) and keyword: a question-like keyword, else
    the string argument (of several, the one the model or the retriever was given, else the first), else the
    last user message of a messages argument, else the question in a dict argument (a chain's input)."""
    kwargs = call.get("kwargs") if isinstance(call.get("kwargs"), Mapping) else {}
    for key in QUESTION_KEYS:
        if isinstance(kwargs.get(key), str) and kwargs[key].strip():
            return kwargs[key]
    args = call.get("args") if isinstance(call.get("args"), list) else []
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
    value = parse_json(_input(span))
    return _question(value) if isinstance(value, Mapping) else None


def _messages(span: DecodedSpan) -> list[Any] | None:
    """A generation's input messages: a list, or under `messages` with the tools beside them."""
    value = parse_json(_input(span))
    if isinstance(value, Mapping):
        value = value.get("messages")
    return value if isinstance(value, list) else None


def _user_message(span: DecodedSpan) -> str | None:
    messages = _messages(span)
    return last_message_text(messages, _USER) if messages else None


def _generation_text(span: DecodedSpan) -> str | None:
    output = parse_json(span.attributes.get(OUTPUT))
    if isinstance(output, list):
        return last_message_text(output, _ASSISTANT)
    return text_of(output, ANSWER_KEYS)


def _asks_for_tool(span: DecodedSpan) -> bool:
    output = parse_json(span.attributes.get(OUTPUT))
    if isinstance(output, Mapping) and output.get("tool_calls"):
        return True
    return _generation_text(span) is None


def _answer(anchor: DecodedSpan, below: _Below, generations: list[DecodedSpan]) -> str | None:
    answered = [g for g in generations if not _asks_for_tool(g)]
    recorded = (
        text_of(anchor.attributes.get(OUTPUT), ANSWER_KEYS),
        text_of(_trace_io(anchor, below, TRACE_OUTPUT), ANSWER_KEYS),
    )
    own = next((text for text in recorded if text is not None and not is_repr(text)), None)
    if own is not None:
        return own
    if answered:
        return _generation_text(answered[-1])
    return next((text for text in recorded if text is not None), None)  # a repr, named in the skip


def _add_retrievers(contexts: Contexts, retrievers: list[DecodedSpan]) -> set[str]:
    """Each retriever's output as documents (one that ran after the answer was written is dropped by the
    shared rule: a lookup of sources for the answer cannot support it); the ids of the retrievers read."""
    used = set()
    for retriever in retrievers:
        output = retriever.attributes.get(OUTPUT)
        if output is None:
            contexts.note(_no_output(retriever))
            continue
        used.add(retriever.span_id)
        add_tool_result(contexts, retriever, "retriever", output, "retriever output")
    return used


def _no_output(span: DecodedSpan) -> str:
    return f"{_type(span)} span {span.span_id} '{span.name}' recorded no output (content capture off?)"


def _add_tools(
    trace: Trace,
    contexts: Contexts,
    tools: list[DecodedSpan],
    used: set[str],
) -> bool:
    """Tool results as documents, except a retriever tool's (read from its retriever); with their call
    arguments, so one that only carries the answer is dropped by the shared rule. Whether any tool recorded
    its result (then the tool messages repeat them)."""
    recorded = False
    for tool in tools:
        if used and any(d.span_id in used for d in trace.descendants(tool)):
            continue
        output = tool.attributes.get(OUTPUT)
        if output is None:
            contexts.note(_no_output(tool))
            continue
        recorded = True
        add_tool_result(contexts, tool, "tool", output, "tool result", arguments=_input(tool))
    return recorded


def _add_tool_messages(contexts: Contexts, generations: list[DecodedSpan]) -> None:
    for generation in reversed(generations):
        results = genai_tool_messages(_messages(generation))
        if results:
            for result in results:
                add_tool_result(contexts, generation, "tool_message", result, "tool message passed to LLM")
            return


def _trace_attribute(spans: Sequence[DecodedSpan], keys: tuple[str, ...]) -> str | None:
    """A trace attribute (session, user) where the shared lineage rule did not find it: Langfuse's own key,
    or the standard one set with `update_current_trace` on a span below the interaction (v3)."""
    for key in keys:
        for span in spans:
            value = span.attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None
