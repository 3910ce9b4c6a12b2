"""The shared reader: a convention adapter (`_convention`) plugged into the rules every convention follows,
applied as an ordered list of named steps (`STEPS`).

For each interaction its adapter finds (`Convention.candidates`), the steps collect the documents (each
retrieval's, then the tool calls' results, then without tool results the tool messages passed to the model,
then documents handed in as input, then the earlier turns' tool results in the conversation), read the
question and the answer, and decide: an explained skip where the answer or the documents are missing (or the
producer's content capture was off, when its adapter can tell), or an interaction whose tool results that
merely carry the answer are dropped (an answer never supports itself), with the agent's run, the question's
absence explained, and its route and conversation read through its lineage. A step returns a Skip to stop
there; the order is the rules' order and is part of the behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from operator import attrgetter
from typing import NamedTuple

from tracescore import semconv
from tracescore.extract._convention import PROMPT_DOCUMENTS_DOCS, UNREAD, Convention, Reading
from tracescore.extract._history import TurnResult, answered_earlier
from tracescore.extract._lineage import conversation_of, route_of
from tracescore.extract._prompt import prompt_documents
from tracescore.extract._protocol import Skip
from tracescore.extract._read import REDACTED, is_repr, may_start_repr
from tracescore.extract._run import agent_run
from tracescore.extract._tools import add_earlier_turns, add_tool_result, drop_answer_carriers
from tracescore.model import (
    ChatTurn,
    ContextSource,
    ContextSourceKind,
    ConversationSource,
    DecodedSpan,
    ExtractSkip,
    Interaction,
    RagRecord,
    Trace,
    inferred_conversation,
    start_order,
    turn_digest,
)

__all__ = ["STEPS", "ConventionReader", "Found", "Step"]


class Step(NamedTuple):
    """One rule. `hook` names the adapter method the step only calls: a convention that keeps the default
    (a no-op) skips the step. A `calls` step reads tool or LLM calls: a convention that records none
    (`Convention.CALLS`) skips it."""

    name: str
    run: Callable[[Reading], Skip | None]
    hook: str | None = None
    calls: bool = False

    def applies(self, convention: Convention) -> bool:
        if self.calls and not convention.CALLS:
            return False
        kind = type(convention)
        return self.hook is None or getattr(kind, self.hook) is not getattr(Convention, self.hook)


# Not an interaction at all.


def background_work(r: Reading) -> Skip | None:
    """A model call the producer makes for itself, whose output nobody reads as an answer (a memory's
    extraction): counted with the traces that hold no RAG interaction, never scored."""
    detail = r.convention.background_work(r)
    if detail is None:
        return None
    return Skip(
        ExtractSkip.NOT_RAG, f"{r.place()}: {detail}", expected=True, span=r.anchor, convention=r.name
    )


def interleaved(r: Reading) -> Skip | None:
    """Spans of several interactions that ran at once with nothing on them to tell which is whose: one
    question's answer judged against another's documents would be a wrong verdict, so none is read."""
    detail = r.convention.interleaved(r)
    if detail is None:
        return None
    return Skip(ExtractSkip.INTERLEAVED_RUNS, f"{r.place()}: {detail}", span=r.anchor, convention=r.name)


# Collecting the documents.


def read_documents(r: Reading) -> None:
    """Each retrieval's documents, in order; a span that would not fit is counted unread."""
    contexts, convention = r.contexts, r.convention
    for span, kind in r.retrievals:
        if contexts.full:
            contexts.skip_span()
        else:
            convention.read_retrieval(r, span, kind)


def read_tool_results(r: Reading) -> None:
    """Each tool call's result, with its arguments (one that only carries the answer is dropped later)."""
    for tool in r.tools if r.tool_results is None else r.tool_results:
        r.convention.read_tool_result(r, tool)


def read_tool_messages(r: Reading) -> None:
    """Without tool results, this turn's tool messages in the input of the last LLM call that has any."""
    convention = r.convention
    prompted = r.llms if r.prompted is None else r.prompted
    if not prompted or not convention.reads_tool_messages(r):
        return
    for llm in reversed(prompted):
        results = [result for result in input_results(r, llm) if result.back == 0]
        if results:
            for result in results:
                add_tool_result(
                    r.contexts,
                    llm,
                    ContextSourceKind.TOOL_MESSAGE,
                    result.value,
                    convention.TOOL_MESSAGE,
                    result.arguments,
                    result.tool,
                )
            return


def read_input_documents(r: Reading) -> None:
    """With nothing recorded so far, the documents the interaction was handed as input."""
    if not r.contexts:
        r.convention.input_documents(r)


def read_prompt_documents(r: Reading) -> None:
    """With nothing recorded so far, the documents the app put into the answering model call's prompt under
    a label that names them (`_prompt.prompt_documents`): its instructions' (`instructions`), its last user
    message's (`prompt`; the text outside them is then the question, `question_beside_documents`). Retrieved
    documents always win; prompt text without a label is never split into guessed documents."""
    if r.contexts:
        return
    convention, contexts = r.convention, r.contexts
    for span in convention.prompt_spans(r):
        prompt = convention.prompt(span)
        if prompt is None:
            continue
        instructed, asked = prompt_documents(prompt.instructions), prompt_documents(prompt.user)
        if instructed is not None:
            contexts.add(span, ContextSourceKind.INSTRUCTIONS, [instructed.block])
        if asked is not None:
            contexts.add(span, ContextSourceKind.PROMPT, [asked.block])
            r.prompt_asked = asked
        if instructed is not None or asked is not None:
            return


def read_earlier_turns(r: Reading) -> None:
    """The tool results of the conversation's earlier turns in the answering LLM call's input."""
    answering = r.llms if r.answering is None else r.answering
    if answering:
        llm = answering[-1]  # the call that answered: its input holds the most of the conversation
        add_earlier_turns(r.contexts, llm, input_results(r, llm))


def input_results(r: Reading, llm: DecodedSpan) -> list[TurnResult]:
    """The tool results in `llm`'s input, each named, with arguments, by the call it answers; a call its
    input left out (OpenLIT passes the model's tool calls only as the output of the call that made them) is
    looked up by id among the tool calls the interaction's earlier model calls output."""
    results = r.convention.input_tool_results(llm)
    if all(result.arguments is not None or result.answers is None for result in results):
        return results  # every call found in the input (or no id to look up)
    began = start_order(llm)
    earlier = sorted((e for e in r.llms if start_order(e) < began), key=start_order)
    return answered_earlier(results, (r.convention.output_tool_calls(e) for e in earlier))


def explain_no_documents(r: Reading) -> None:
    if not r.contexts and (note := r.convention.no_documents_note(r)):
        r.contexts.note(note)


# The question and the answer.


def read_question_and_answer(r: Reading) -> None:
    convention = r.convention
    r.question, r.answer = convention.question(r), convention.answer(r)


def question_beside_documents(r: Reading) -> None:
    """Documents read from the user message: the question is its text outside them (after `Question:`, or
    the rest), never the documents, unless the convention read the question elsewhere (a chain's input)."""
    asked = r.prompt_asked
    if asked is not None and (r.question is None or asked.block in r.question):
        r.question = asked.question


def question_from_retrieval(r: Reading) -> None:
    """A chain called with several inputs: the query of the first retrieval the app made itself is the
    question it answered (never a tool's: that query is what the model wrote)."""
    if r.question is None and r.asked:
        r.question = r.convention.retrieval_question(r.asked[0])


def prompt_only(r: Reading) -> Skip | None:
    """No retrieval, no tool, no document: the documents can only be inside the prompt, which is never split
    into guessed documents (`no_retrieval`, where the convention can say so)."""
    if r.question and r.answer and not (r.retrievals or r.tools or r.contexts):
        detail = r.convention.prompt_only(r)
        if detail is not None:
            return Skip(ExtractSkip.NO_RETRIEVAL, detail, span=r.anchor, convention=r.name)
    return None


# Deciding: the rules every convention's interaction is held to.


def content_not_captured(r: Reading) -> Skip | None:
    """Nothing to judge because the producer recorded no content (capture off, or masked in place): said so,
    never guessed."""
    answer = r.answer or ""
    if not r.contexts or not answer.strip() or (may_start_repr(answer, 0, 300) and is_repr(answer)):
        detail = r.convention.content_not_captured(r)
        if detail is not None:
            return Skip(
                ExtractSkip.CONTENT_NOT_CAPTURED, f"{r.place()}: {detail}", span=r.anchor, convention=r.name
            )
    return None


def something_to_judge(r: Reading) -> Skip | None:
    """Faithfulness needs an answer and documents. An answer that is missing or a program repr
    (`StopEvent(result=...`, `<generator object ...>`) is never scored: a score is never built from the
    wrong text."""
    answer = r.answer
    if answer is None or not answer.strip():
        return r.missing(ExtractSkip.MISSING_ANSWER, "answer", "no answer")
    if may_start_repr(answer, 0, 300) and is_repr(answer):  # its first test, a C call, before the Python one
        return r.missing(
            ExtractSkip.MISSING_ANSWER, "answer", f"a program repr, not text, as its answer ({_clip(answer)})"
        )
    if not r.contexts:  # dropping answer carriers only removes: no run is built for a skip
        return _no_documents(r)
    return None


def build_run(r: Reading) -> None:
    """What the agent did: before answer carriers are dropped (a final-answer tool is not evidence, but it
    was called)."""
    r.run = agent_run(r.tools, r.llms, r.contexts)


def drop_carriers(r: Reading) -> Skip | None:
    """An answer never supports itself: tool results that merely carry it are dropped and noted; the LLM
    calls' outputs tell when the answer was written."""
    contexts = r.contexts
    if contexts.has_tool_results:  # most interactions have none: nothing to compare
        output = r.convention.llm_output
        drop_answer_carriers(contexts, r.answer or "", ((llm, output(llm)) for llm in r.llms))
        if not contexts:
            return _no_documents(r)
    return None


def question_recorded(r: Reading) -> None:
    """Faithfulness needs no question: without one (or with a repr for one) the record says why."""
    question = r.question
    if not (question or "").strip():
        looked_in = r.looked_in()
        where = f" (looked in {looked_in['question']})" if "question" in looked_in else ""
        r.question_missing = f"no question recorded{where}: faithfulness is judged without it"
    elif may_start_repr(question, 0, 300) and is_repr(question):
        what = "a mask" if (question or "").strip() == REDACTED else "a program repr"
        r.question_missing = f"the question is {what} ({_clip(question or '')}): judged without it"


# Lineage: the session and user the convention names itself, else the shared rule's (`_lineage`), else
# where else the convention keeps them.


def named_route(r: Reading) -> None:
    r.route_name = r.convention.route(r.anchor)


def named_conversation(r: Reading) -> None:
    r.session_id, r.user_id = r.convention.named_conversation(r.anchor)


def conversation(r: Reading) -> None:
    if r.session_id is None or r.user_id is None:
        session, user, scrubbed = conversation_of(r.trace, r.anchor, r.sources)
        r.session_id, r.user_id = r.session_id or session, r.user_id or user
        if scrubbed:
            r.session_scrubbed = scrubbed


def more_conversation(r: Reading) -> None:
    if r.session_id is None or r.user_id is None:
        session, user = r.convention.more_conversation(r)
        r.session_id, r.user_id = r.session_id or session, r.user_id or user


def read_resent(r: Reading) -> ChatTurn | None:
    """Where no conversation was named: what the turn resent of its chat, read once: the digests of the pairs
    the answering model call's prompt resent (the first prompt, nearest the answer, that resent any), or,
    where it resent none, the responses the model's service keeps; its own pair's digest not computed yet
    (`read_turn` does: a one-shot service's turns need only this). None: a named conversation, or no
    question and answer to know the turn by. Nothing is set on the turn's records here."""
    if r.chat_turn is not UNREAD:
        return r.chat_turn  # type: ignore[return-value]  # read: a ChatTurn or None
    r.chat_turn = None
    question, answer = r.question, r.answer
    if r.session_id is not None or r.question_missing is not None or not question or not answer:
        return None
    convention, history = r.convention, ()
    for span in convention.prompt_spans(r):
        prompt = convention.prompt(span)
        pairs = prompt.history if prompt is not None else ()  # read once: computed when asked (`Prompt`)
        if pairs:
            history = tuple(turn_digest(q, a) for q, a in pairs)
            break
    turn = ChatTurn("", history)
    if not history:  # nothing resent: the model's service may keep the history (the Responses API)
        previous, own = convention.response_chain(r)
        if own is not None:
            turn = turn._replace(response_id=own, previous_response_id=previous)
    r.chat_turn = turn
    return turn


def read_turn(r: Reading) -> ChatTurn | None:
    """What the turn shows of its chat (`ChatTurn`): `read_resent` and its own (question, answer) digest."""
    turn = read_resent(r)
    if turn is None or turn.digest:
        return turn
    assert r.question is not None and r.answer is not None  # read_resent: a turn has both
    turn = r.chat_turn = turn._replace(digest=turn_digest(r.question, r.answer))
    return turn


def read_history(r: Reading) -> None:
    """Where no conversation was named, the conversation the turn's resent history shows (`read_turn`,
    `inferred_conversation`): a turn that resent pairs is a turn of the conversation its first pair opened;
    one that resent none may open one (a first turn cannot be told from a one-shot: `opens_conversation`, for
    its documents, never its records), or follow a response the model's service keeps (`response_chain`:
    joined by tracescore conversations). Run only where asked (`Found.infer_conversation`): a stream that
    names its conversations never pays."""
    turn = read_turn(r)
    if turn is None:
        return
    r.history, r.turn_digest = turn.history, turn.digest
    inferred = inferred_conversation(r.anchor.service_name, r.user_id, turn)
    r.session_id, r.conversation_source, r.opens_conversation = inferred[:3]
    r.response_id, r.previous_response_id = inferred.response_id, inferred.previous_response_id


# --8<-- [start:steps]
STEPS: tuple[Step, ...] = (
    Step("background work", background_work, hook="background_work"),
    Step("interleaved", interleaved, hook="interleaved"),
    Step("retrievals", read_documents),
    Step("tool results", read_tool_results, calls=True),
    Step("tool messages", read_tool_messages, hook="input_tool_results"),
    Step("input documents", read_input_documents, hook="input_documents"),
    Step("prompt documents", read_prompt_documents, hook="prompt"),
    Step("earlier turns", read_earlier_turns, hook="input_tool_results"),
    Step("why no documents", explain_no_documents, hook="no_documents_note"),
    Step("question and answer", read_question_and_answer),
    Step("question beside documents", question_beside_documents, hook="prompt"),
    Step("question from retrieval", question_from_retrieval, hook="retrieval_question"),
    Step("prompt only", prompt_only, hook="prompt_only"),
    Step("content not captured", content_not_captured, hook="content_not_captured"),
    Step("something to judge", something_to_judge),
    Step("run", build_run, calls=True),
    Step("answer carriers", drop_carriers, calls=True),
    Step("question recorded", question_recorded),
    Step("named route", named_route, hook="route"),
    Step("named conversation", named_conversation, hook="named_conversation"),
    Step("conversation", conversation),
    Step("more conversation", more_conversation, hook="more_conversation"),
)
# --8<-- [end:steps]
# The steps that place an interaction in its conversation (no judging needs them).
LINEAGE_STEPS = frozenset({"named route", "named conversation", "conversation", "more conversation"})


class Found:
    """An interaction read from a trace and not built yet: what deciding about it needs (its `span`, the
    `span_ids` it was read from, its `route`, why its question is missing, and `texts`, what it would be
    judged on: question or None, documents, answer), and `interaction()`, which builds it, once.

    Most interactions on a busy stream are never scored (sampled out): the consumer builds only those its
    sampling policy may admit, so the others cost their reading, not their records."""

    __slots__ = ("_built", "_reading", "question_missing", "route", "span", "span_ids", "texts")

    def __init__(
        self,
        span: DecodedSpan,
        span_ids: frozenset[str],
        route: str,
        question_missing: str | None,
        texts: tuple[str | None, tuple[str, ...], str],
        reading: Reading | None = None,
        built: Interaction | None = None,
    ) -> None:
        self.span, self.span_ids, self.route = span, span_ids, route
        self.question_missing, self.texts = question_missing, texts
        self._reading, self._built = reading, built

    @classmethod
    def of(cls, interaction: Interaction) -> Found:
        """An interaction a recogniser built itself."""
        record = interaction.record
        texts = (record.query, record.contexts, record.answer)
        return cls(
            interaction.span, interaction.span_ids, interaction.route, interaction.question_missing, texts,
            built=interaction,
        )  # fmt: skip

    @property
    def session_id(self) -> str | None:
        """The conversation it is a turn of, as the steps read it (no build needed)."""
        return self._read().session_id

    @property
    def user_id(self) -> str | None:
        """The end user it was asked for, as the steps read it."""
        return self._read().user_id

    @property
    def opens_conversation(self) -> str | None:
        """A first turn's inferred conversation (`read_history`): its documents are kept under it."""
        return self._read().opens_conversation

    @property
    def context_sources(self) -> tuple[ContextSource, ...]:
        """Where each of its documents (`texts`) came from (no build needed)."""
        if self._built is not None:
            return self._built.context_sources
        assert self._reading is not None
        return self._reading.contexts.sources

    def resends(self) -> bool | None:
        """Where no conversation was named, whether its prompt resent earlier pairs or named a previous
        response (`read_resent`, without its own digest); None: no chat turn to know it by."""
        turn = read_resent(self._reading) if self._reading is not None else None
        return None if turn is None else bool(turn.history) or turn.previous_response_id is not None

    def chat_turn(self) -> ChatTurn | None:
        """Where no conversation was named, what the turn shows of its chat (`read_turn`), without placing
        it in one: consume learns from it whether the service resends its chats."""
        return read_turn(self._reading) if self._reading is not None else None

    def infer_conversation(self) -> None:
        """Where no conversation was named, the one its resent question/answer history shows
        (`read_history`); before it is built (an interaction a recogniser built itself is left as it is)."""
        if self._reading is not None and self._reading.session_id is None:
            read_history(self._reading)

    def fill_user(self, user: str | None) -> None:
        """`user` as its end user where none was read (never one read from its own spans)."""
        if user is None or self.user_id is not None:
            return
        if self._built is not None:
            self._built = replace(self._built, user_id=user)
        else:
            assert self._reading is not None
            self._reading.user_id = user

    def _read(self) -> Interaction | Reading:
        """What it was read as: the interaction once built, the reading until then."""
        if self._built is not None:
            return self._built
        assert self._reading is not None
        return self._reading

    def interaction(self) -> Interaction:
        built = self._built
        if built is None:
            assert self._reading is not None
            built = self._built = _build(self._reading, self)
            self._reading = None  # the reading's working state is no longer needed
        return built

    def __repr__(self) -> str:
        return f"Found({self.span.span_id}, route={self.route!r})"


def found(r: Reading) -> Found:
    """The interaction the steps read, grouped by its route (`_lineage.route_of`)."""
    anchor, contexts, sources = r.anchor, r.contexts, r.sources
    read_from = (anchor.span_id, *contexts.span_ids)
    span_ids = frozenset((*read_from, *map(_SPAN_ID, sources)) if sources else read_from)
    question = None if r.question_missing else r.question
    return Found(
        anchor, span_ids, route_of(r.trace, anchor, r.route_name), r.question_missing,
        (question, contexts.texts, r.answer or ""), r,
    )  # fmt: skip


# Where the docs say how to keep the session id through Logfire's scrubbing.
SCRUBBED_SESSION_DOCS = "docs/integrations/logfire.md#keep-the-session-id-through-scrubbing"


def scrubbed_session(r: Reading) -> Skip:
    """The interaction is scored, as a one-turn interaction: its session id was replaced by a redacting
    exporter (`logfire.scrubbed` lists it), so it joins no conversation."""
    return Skip(
        ExtractSkip.SESSION_ID_SCRUBBED,
        f"{r.session_scrubbed} was replaced by Logfire's scrubbing ({semconv.LOGFIRE_SCRUBBED} lists it): "
        "the turn is scored as a one-turn interaction, in no conversation and not grounded in earlier turns; "
        f"keep the id through scrubbing ({SCRUBBED_SESSION_DOCS})",
        span=r.anchor,
        convention=r.name,
        scored=True,
    )


def events_lost(r: Reading) -> Skip:
    """The interaction is scored from what its spans kept: some lost span events past the limits, where its
    producer wrote messages."""
    detail = f"{r.place()}: {r.events_lost}"
    return Skip(ExtractSkip.SPAN_EVENTS_DROPPED, detail, span=r.anchor, convention=r.name, scored=True)


def interaction(r: Reading) -> Interaction:
    """The interaction the steps read (built at once)."""
    return found(r).interaction()


def _build(r: Reading, found: Found) -> Interaction:
    trace, anchor, contexts = r.trace, r.anchor, r.contexts
    question, texts, answer = found.texts
    return Interaction(
        span=anchor,
        record=RagRecord(
            id=f"{trace.trace_id}:{anchor.span_id}", query=question, contexts=texts, answer=answer, run=r.run
        ),
        route=found.route,
        convention=r.convention.name,
        span_ids=found.span_ids,
        context_sources=contexts.sources,
        context_notes=contexts.notes,
        session_id=r.session_id,
        user_id=r.user_id,
        question_missing=r.question_missing,
        history=r.history,
        turn_digest=r.turn_digest,
        conversation_source=r.conversation_source
        or (ConversationSource.NAMED if r.session_id is not None else None),
        opens_conversation=r.opens_conversation,
        response_id=r.response_id,
        previous_response_id=r.previous_response_id,
    )


class ConventionReader:
    """A Recognizer made of one convention adapter and the shared steps: the interactions its adapter finds,
    each read through `STEPS`. A subclass names its adapter once:
    `class X(ConventionReader, convention=...)`."""

    convention: Convention

    def __init_subclass__(cls, convention: Convention | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if convention is not None:
            cls.convention = convention

    def __init__(self, convention: Convention | None = None) -> None:
        if convention is not None:
            self.convention = convention
        self.name = self.convention.name
        # A convention that keeps the default presence test and has no marker key is in every trace: not
        # asked (a Python call per trace read).
        kind = type(self.convention)
        self._present = (
            None
            if kind.present is Convention.present and self.convention.MARKER is None
            else self.convention.present
        )
        # Every interaction of the unsampled path goes through these: a step that cannot apply is not run.
        self._steps = tuple(step.run for step in STEPS if step.applies(self.convention))
        # What an answer with nothing to judge it against is still read for: its place in a conversation.
        self._lineage = tuple(
            step.run for step in STEPS if step.name in LINEAGE_STEPS and step.applies(self.convention)
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.convention!r})"

    def _placed(self, skip: Skip, reading: Reading) -> Skip:
        """An answer with no documents, read on for its conversation and response ids (`Skip.turn`): a
        Responses API chain goes on from a turn that had nothing to judge."""
        for step in self._lineage:
            step(reading)
        return replace(skip, turn=found(reading))

    def recognize(self, trace: Trace) -> Iterable[Interaction | Skip]:
        return [f.interaction() if isinstance(f, Found) else f for f in self.find(trace)]

    def find(self, trace: Trace) -> list[Found | Skip]:
        """What `recognize` reads, each interaction not built yet (`Found`)."""
        # Every trace meets every recogniser and holds few conventions: an absent one costs its cheap
        # presence test. A list, not a generator: most traces hold one candidate.
        present = self._present
        if present is not None and not present(trace):
            return []
        out: list[Found | Skip] = []
        steps = self._steps
        for reading in self.convention.candidates(trace):
            for step in steps:
                skip = step(reading)
                if skip is not None:
                    if skip.reason is ExtractSkip.EMPTY_CONTEXT:
                        skip = self._placed(skip, reading)
                    out.append(skip)
                    break
            else:
                out.append(found(reading))
                if reading.session_scrubbed is not None and reading.session_id is None:
                    out.append(scrubbed_session(reading))
                if reading.events_lost is not None:
                    out.append(events_lost(reading))
        return out


_SPAN_ID = attrgetter("span_id")


def _no_documents(r: Reading) -> Skip:
    notes = "; ".join(r.contexts.notes)
    what = "no retrieved documents to check the answer against" + (f" ({notes})" if notes else "")
    if type(r.convention).prompt is not Convention.prompt:
        what += f", nor any under a label in its prompt ({PROMPT_DOCUMENTS_DOCS})"
    return r.missing(ExtractSkip.EMPTY_CONTEXT, "documents", what)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
