"""A convention adapter: one instrumentation convention's attribute keys and the small functions that read
them, for the shared reader (`_reader`) to apply the rules every convention follows.

An adapter says which spans are the interactions (`candidates`) and what each one is read from
(`Reading.found`: retrievals, tool calls, LLM calls), and reads single values: a span's documents, a tool
call's result and arguments, the tool results in an LLM call's input, the question, the answer. It never
decides what is evidence, when to skip, or where a session comes from: those are the reader's steps, the
same for every convention. `Convention` holds the defaults most conventions share; an adapter overrides what
its instrumentation records differently. Its keys are class constants (as langfuse-python's
`LangfuseOtelSpanAttributes` and OpenInference's `SpanAttributes` hold theirs); the keys an agent's run is
read from (tool name, arguments, result, tokens, offered tools) are the `RUN_*` ones, which `_run` gathers
from every adapter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from tracescore.extract._context import Contexts
from tracescore.extract._history import MadeCall, TurnResult
from tracescore.extract._prompt import PromptDocuments
from tracescore.extract._protocol import Skip
from tracescore.extract._read import Prompt, is_repr
from tracescore.extract._tools import add_tool_result, answering_groups, called_by_tool, ran_between
from tracescore.model import (
    ChatTurn,
    ContextSourceKind,
    ConversationSource,
    DecodedSpan,
    ExtractSkip,
    Run,
    Trace,
)

__all__ = [
    "PROMPT_DOCUMENTS_DOCS",
    "Convention",
    "Reading",
    "UsageFields",
    "first_text",
    "first_value",
    "last_text",
    "not_inside",
    "unlabelled_note",
    "without_wrappers",
]


# `Reading.chat_turn` before `_reader.read_turn` read it (None: read, and no chat turn to know).
UNREAD = object()


@dataclass(slots=True)
class Reading:
    """One interaction as it is read: the candidate its convention found, what the convention found it is
    read from, and what the reader's steps made of it.

    The candidate: `anchor`, the spans `around` it that its convention looks through, and for a lone LLM
    call its `group` (the calls of one function-calling loop, ask for a tool, run it, answer, the last of
    which is `anchor`, whose tools ran after `since`). What the convention `found`: `retrievals`, the spans
    whose documents are read, each with its kind (`retriever`, `reranker`, `span`); `asked`, the retrievals
    the app made itself (not a tool's search), the first of which may name the question; `tools`, the run's
    tool calls, and `tool_results` those whose results are read as documents (None: all of them); `llms`,
    the LLM calls, `answering` those whose input is the conversation (None: all of them), `prompted` those
    whose tool messages may stand in for tool spans (None: all of them); `sources`, every span read (two
    conventions that read a shared span describe one interaction). The rest is the steps' (`_reader`).
    """

    trace: Trace
    convention: Convention
    anchor: DecodedSpan
    around: Sequence[DecodedSpan] = ()
    group: Sequence[DecodedSpan] | None = None
    since: int = 0
    retrievals: Sequence[tuple[DecodedSpan, str]] = ()
    asked: Sequence[DecodedSpan] = ()
    tools: Sequence[DecodedSpan] = ()
    tool_results: Sequence[DecodedSpan] | None = None
    llms: Sequence[DecodedSpan] = ()
    answering: Sequence[DecodedSpan] | None = None
    prompted: Sequence[DecodedSpan] | None = None
    sources: Sequence[DecodedSpan] = ()
    contexts: Contexts = field(default_factory=Contexts)
    question: str | None = None
    answer: str | None = None
    run: Run | None = None
    question_missing: str | None = None
    route_name: str | None = None
    session_id: str | None = None
    user_id: str | None = None
    session_scrubbed: str | None = None  # the session key a redacting exporter replaced (`_lineage`)
    # Where no conversation was named, what its resent history shows (`_reader.read_history`).
    history: tuple[str, ...] = ()
    turn_digest: str | None = None
    conversation_source: ConversationSource | None = None
    opens_conversation: str | None = None
    response_id: str | None = None  # a history the model's service keeps: the response that answered
    previous_response_id: str | None = None  # and the one the turn's request named before it
    chat_turn: ChatTurn | object | None = UNREAD  # what `_reader.read_turn` read of it, once
    events_lost: str | None = None  # what the spans read lost of their events past the limits (`_decode`)
    # The documents read from the user message of the prompt, and its text outside them (`_reader`).
    prompt_asked: PromptDocuments | None = None

    def found(
        self,
        *,
        retrievals: Sequence[tuple[DecodedSpan, str]] = (),
        asked: Sequence[DecodedSpan] = (),
        tools: Sequence[DecodedSpan] = (),
        tool_results: Sequence[DecodedSpan] | None = None,
        llms: Sequence[DecodedSpan] = (),
        answering: Sequence[DecodedSpan] | None = None,
        prompted: Sequence[DecodedSpan] | None = None,
        sources: Sequence[DecodedSpan] = (),
    ) -> Reading:
        """This reading with what the convention found."""
        self.retrievals, self.asked, self.tools, self.tool_results = retrievals, asked, tools, tool_results
        self.llms, self.answering, self.prompted, self.sources = llms, answering, prompted, sources
        return self

    def loop_tools(self, tools: list[DecodedSpan]) -> list[DecodedSpan]:
        """Of `tools`, those of this interaction: for a lone LLM call, those that ran in its loop, beside its
        calls or inside one of them (a model call that runs its tools itself, or stays open while they run,
        is their parent), whenever they started."""
        if self.group is None or not tools:
            return tools
        looped = ran_between(tools, self.since, self.anchor)
        if len(looped) == len(tools):
            return looped
        taken = {t.span_id for t in looped}
        inside = {d.span_id for llm in self.group for d in self.trace.descendants(llm)}
        return [*looped, *(t for t in tools if t.span_id in inside and t.span_id not in taken)]

    def loop_llms(self, llms: list[DecodedSpan]) -> list[DecodedSpan]:
        """The interaction's LLM calls: for a lone LLM call, its loop's; else `llms`."""
        return llms if self.group is None else list(self.group)

    @property
    def name(self) -> str:
        return self.convention.name

    def place(self, noun: str = "span") -> str:
        """Where the interaction is, for a skip's detail."""
        anchor = self.anchor
        return (
            f"{self.name} {noun} {anchor.span_id} '{anchor.name}' of trace {self.trace.trace_id} "
            f"({anchor.service_name})"
        )

    def missing(self, reason: ExtractSkip, part: str, what: str) -> Skip:
        """The skip naming the missing `part` and where it was looked for."""
        # Built only for a skip: most interactions are scored, and this text is then never read.
        looked_in = self.looked_in()
        where = f" (looked in {looked_in[part]})" if part in looked_in else ""
        return Skip(reason, f"{self.place()} has {what}{where}", span=self.anchor, convention=self.name)

    def looked_in(self) -> Mapping[str, str]:
        convention = self.convention
        if self.group is not None and convention.asks_for_tool(self.anchor):
            call = convention.LLM_CALL
            unanswered = (
                f"the {call}'s output: it asked for a tool and no later {call} beside it answered (the "
                "trace may be incomplete)"
            )
            return {**convention.LOOKED_IN, "answer": unanswered}
        return convention.LOOKED_IN


class UsageFields(NamedTuple):
    """Where a JSON attribute holds a model call's token usage: the input and output token fields (the first
    present wins), in the object at `path` inside it (keys and list indices; empty: the attribute itself)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    path: tuple[str | int, ...] = ()


class Convention:
    """The adapter protocol, with the defaults most conventions share. An adapter defines `name`, `kind`
    and its kinds, and `collect`, and overrides the readers its convention records differently."""

    name: ClassVar[str]
    # Span kinds (`kind`): the interaction spans, LLM calls and tool calls.
    INTERACTION_KINDS: ClassVar[frozenset[str]] = frozenset()
    LLM_KINDS: ClassVar[frozenset[str]] = frozenset()
    TOOL_KINDS: ClassVar[frozenset[str]] = frozenset()
    # Whether the convention records tool or LLM calls (tracescore's own spans do not: no run to read).
    CALLS: ClassVar[bool] = True
    # A key every span of the convention carries (None: none does, `present` says otherwise).
    MARKER: ClassVar[str | None] = None
    # Without an interaction span, each LLM call (`is_llm`) is an interaction of its own.
    LONE_LLM_CALLS: ClassVar[bool] = False
    # Where the question, answer and documents were looked for, named in a skip's detail.
    LOOKED_IN: ClassVar[Mapping[str, str]] = {}
    LLM_CALL: ClassVar[str] = "LLM call"  # what the convention calls one model call, in skip details
    TOOL_MESSAGE: ClassVar[str] = "tool message passed to LLM"  # what a tool result in a prompt is called
    # The keys an agent's run is read from (`_run`); the first present on a span wins.
    RUN_TOOL_NAME: ClassVar[tuple[str, ...]] = ()
    RUN_TOOL_ARGUMENTS: ClassVar[tuple[str, ...]] = ()
    RUN_TOOL_RESULT: ClassVar[tuple[str, ...]] = ()
    RUN_PROMPT_TOKENS: ClassVar[tuple[str, ...]] = ()
    RUN_COMPLETION_TOKENS: ClassVar[tuple[str, ...]] = ()
    # Usage in a JSON attribute: key -> where in it, and its token fields.
    RUN_USAGE_JSON: ClassVar[Mapping[str, UsageFields]] = {}
    # What a model call that answered records (an LLM span without any of these only prepared a call).
    RUN_MODEL_OUTPUT: ClassVar[tuple[str, ...]] = ()
    # The tools a model was offered: key -> where in its JSON the list is (keys and list indices; empty: the
    # attribute is the list), and flattened (prefix, suffix) lists.
    RUN_TOOL_DEFINITIONS: ClassVar[Mapping[str, tuple[str | int, ...]]] = {}
    RUN_INDEXED_TOOL_DEFINITIONS: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Tools offered as flattened fields, not JSON: (prefix, name suffix, description suffix).
    RUN_FIELDED_TOOL_DEFINITIONS: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    # (level key, message key) of an observation level that reports a failure as "ERROR".
    RUN_ERROR_LEVEL: ClassVar[tuple[str, str] | None] = None
    # An open convention many instrumentations write beside their own keys: its run keys are read first.
    OPEN: ClassVar[bool] = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    # Finding the interactions.

    def present(self, trace: Trace) -> bool:
        """Whether the trace may hold this convention's spans (a cheap test: it runs on every trace): by
        default, whether a span carries the convention's `MARKER` key."""
        key = self.MARKER
        if key is None:
            return True
        # A plain loop, not any() over a generator: this runs for every convention on every trace.
        for span in trace.spans:  # noqa: SIM110
            if key in span.attributes:
                return True
        return False

    def kind(self, span: DecodedSpan) -> str:
        """The span's kind in this convention ("" when it is not one of its spans)."""
        return ""

    def is_interaction(self, span: DecodedSpan) -> bool:
        return self.kind(span) in self.INTERACTION_KINDS

    def is_llm(self, span: DecodedSpan) -> bool:
        """An LLM call (an interaction of its own, with `LONE_LLM_CALLS`, when no interaction span encloses
        it)."""
        return self.kind(span) in self.LLM_KINDS

    def is_tool(self, span: DecodedSpan) -> bool:
        return self.kind(span) in self.TOOL_KINDS

    def asks_for_tool(self, span: DecodedSpan) -> bool:
        """Whether an LLM call asked for a tool rather than answered (it is one interaction with the call
        that answers after the tool ran)."""
        return False

    def anchors(self, trace: Trace) -> list[DecodedSpan]:
        return trace.outermost(self.is_interaction)

    def candidates(self, trace: Trace) -> Iterable[Reading]:
        """The outermost interaction spans, each with everything below it; without any, each lone LLM call
        (one that asks for a tool with the call that answers after it) with what ran beside it."""
        if not self.present(trace):
            return
        anchors = self.anchors(trace)
        if anchors:
            for anchor in anchors:
                yield self.collect(Reading(trace, self, anchor, list(trace.descendants(anchor))))
            return
        if not self.LONE_LLM_CALLS:
            return
        for group, since in answering_groups(trace.outermost(self.is_llm), self.asks_for_tool):
            yield self.collect(Reading(trace, self, group[-1], trace.beside(group[-1]), group, since))

    def collect(self, reading: Reading) -> Reading:
        """What the candidate is read from (`Reading.found`)."""
        raise NotImplementedError

    def background_work(self, reading: Reading) -> str | None:
        """Why the candidate is no interaction (the producer's own work nobody reads as an answer, such as a
        memory's extraction), to count it with the traces that hold none; None for an interaction."""
        return None

    def interleaved(self, reading: Reading) -> str | None:
        """Why the candidate's spans hold more than one interaction that nothing on them tells apart (runs
        at once whose steps lost their parent), to skip it rather than read a mix; None when they do not."""
        return None

    # Reading documents and tool results.

    def documents(self, span: DecodedSpan, kind: ContextSourceKind) -> Sequence[Any] | None:
        """A retrieval span's documents (`kind` as in `Reading.retrievals`)."""
        return None

    def read_retrieval(self, reading: Reading, span: DecodedSpan, kind: ContextSourceKind) -> None:
        """One retrieval's documents into the reading's contexts, which had room when called."""
        reading.contexts.add(span, kind, self.documents(span, kind) or ())

    def tool_call(self, span: DecodedSpan) -> tuple[Any, Any]:
        """(result, arguments) of a tool span, as recorded (None: not recorded)."""
        return first_value(span, self.RUN_TOOL_RESULT), first_value(span, self.RUN_TOOL_ARGUMENTS)

    def read_tool_result(self, reading: Reading, tool: DecodedSpan) -> None:
        result, arguments = self.tool_call(tool)
        add_tool_result(reading.contexts, tool, ContextSourceKind.TOOL, result, "tool result", arguments)

    def input_tool_results(self, llm: DecodedSpan) -> list[TurnResult]:
        """Every tool result in an LLM call's input messages, with how many turns back it was given."""
        return []

    def output_tool_calls(self, llm: DecodedSpan) -> Mapping[str, MadeCall]:
        """The tool calls an LLM call's output made, by id: where its input left out the calls its tool
        results answer, the reader names them by these (`_history.answered_earlier`)."""
        return {}

    def reads_tool_messages(self, reading: Reading) -> bool:
        """Whether the tool messages passed to the model are read: by default only without tool spans (they
        repeat what the tool spans returned)."""
        return not reading.tools

    def no_tool_result(self, tools: Sequence[DecodedSpan]) -> bool:
        """Whether none of `tools` recorded its result (an alternative rule for `reads_tool_messages`)."""
        return all(self.tool_call(tool)[0] is None for tool in tools)

    def input_documents(self, reading: Reading) -> None:
        """Documents the interaction was handed as input, read when nothing else recorded any."""

    def prompt(self, span: DecodedSpan) -> Prompt | None:
        """The instructions and last user message a model call (or the interaction span) was given as text,
        where an app may have put its documents under a label; None when the span records neither."""
        return None

    def prompt_spans(self, reading: Reading) -> Iterable[DecodedSpan]:
        """The spans whose prompts may carry the documents, nearest the answer first: the answering model
        calls, last first, then the interaction span."""
        answering = reading.llms if reading.answering is None else reading.answering
        yield from reversed(answering)
        if not any(span is reading.anchor for span in answering):
            yield reading.anchor

    def no_documents_note(self, reading: Reading) -> str | None:
        """Why no documents were read, when the convention can tell (e.g. instructions are not documents)."""
        return None

    # Reading the question and the answer.

    def question(self, reading: Reading) -> str | None:
        """The question the interaction answered (the reader falls back to a retrieval's query)."""
        return None

    def retrieval_question(self, span: DecodedSpan) -> str | None:
        """The query of a retrieval the app made itself: the question, when the interaction names none."""
        return None

    def own_answer(self, span: DecodedSpan) -> str | None:
        """The answer the interaction span itself records."""
        return None

    def llm_answer(self, llm: DecodedSpan) -> str | None:
        """An LLM call's text answer (None when it asked for a tool instead)."""
        return self.llm_output(llm)

    def llm_output(self, llm: DecodedSpan) -> str | None:
        """An LLM call's text output, as compared with the answer to tell when the answer was written."""
        return None

    def answer(self, reading: Reading) -> str | None:
        """The interaction span's answer; when it has none, or a program repr, the last LLM call's that is
        text (Haystack, LlamaIndex streams)."""
        answer = self.own_answer(reading.anchor)
        if reading.llms and (answer is None or is_repr(answer)):
            answer = last_text(reading.llms, self.llm_answer) or answer
        return answer

    def content_not_captured(self, reading: Reading) -> str | None:
        """Why the interaction recorded nothing to judge when its producer's content capture was off (its
        spans are there, their inputs and outputs are not), to skip it as `content_not_captured` rather than
        as missing an answer or documents; None when capture was on or the convention cannot tell."""
        return None

    def prompt_only(self, reading: Reading) -> str | None:
        """Why the interaction's documents can only be inside its prompt (it recorded no retrieval and no
        tool), to skip it as `no_retrieval`; None when the convention does not say so."""
        return None

    # Lineage.

    def route(self, anchor: DecodedSpan) -> str | None:
        """The name the convention gives the interaction (grouped by it when there is no explicit route)."""
        return None

    def named_conversation(self, anchor: DecodedSpan) -> tuple[str | None, str | None]:
        """(session, user) the convention names itself, before the shared lineage rule."""
        return None, None

    def more_conversation(self, reading: Reading) -> tuple[str | None, str | None]:
        """(session, user) where the shared lineage rule found none."""
        return None, None

    def response_chain(self, reading: Reading) -> tuple[str | None, str | None]:
        """(previous, own) response ids of a turn whose history the model's service keeps (the OpenAI
        Responses API): the response its request named before it (`previous_response_id`), and the one that
        answered, which its follow-up names; None where the convention records neither."""
        return None, None


# Where the docs say how documents put into the prompt are read (the label forms).
PROMPT_DOCUMENTS_DOCS = "docs/integrations/index.md#documents-in-the-prompt"


def unlabelled_note(where: str) -> str:
    """Why the instructions (`where`) gave no documents: only a label that names them is read (the skip
    points to the docs that show the label forms)."""
    forms = "Context:, ## Context, <context> tags"
    return f"{where} are read as documents only under a label that names them ({forms})"


def first_value(span: DecodedSpan, keys: Sequence[str]) -> Any:
    """The value of the first of `keys` the span records (not None)."""
    attrs = span.attributes
    for key in keys:
        if (value := attrs.get(key)) is not None:
            return value
    return None


def first_text(spans: Sequence[DecodedSpan], keys: Sequence[str]) -> str | None:
    """The first non-empty text of `keys` (each key over every span, in order)."""
    for key in keys:
        for span in spans:
            value = span.attributes.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def last_text(llms: Sequence[DecodedSpan], read: Any) -> str | None:
    """The last LLM call's text that `read` finds and that is not a program repr."""
    for llm in reversed(llms):
        text = read(llm)
        if text and not is_repr(text):
            return text
    return None


def not_inside(
    trace: Trace, spans: Sequence[DecodedSpan], anchor: DecodedSpan, is_tool: Any
) -> list[DecodedSpan]:
    """`spans` that did not run inside a tool call below `anchor` (a tool's own search or LLM call)."""
    return [span for span in spans if not called_by_tool(trace, span, anchor, is_tool)]


def without_wrappers(
    trace: Trace, tools: Sequence[DecodedSpan], read: Sequence[DecodedSpan]
) -> Sequence[DecodedSpan]:
    """`tools` except those that wrap a retrieval already `read` (its documents are the tool's result)."""
    if not tools or not read:
        return tools
    read_ids = {span.span_id for span in read}
    return [tool for tool in tools if not any(d.span_id in read_ids for d in trace.descendants(tool))]
