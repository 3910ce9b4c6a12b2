"""The extract stage's seam: a recogniser reads one convention's spans in an assembled trace."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tracescore import semconv
from tracescore.extract._context import Context, Contexts, as_contexts, conversation_of
from tracescore.extract._read import is_repr
from tracescore.extract._run import agent_run
from tracescore.extract._tools import drop_answer_carriers
from tracescore.model import DecodedSpan, Interaction, RagRecord, Trace

__all__ = ["Recognizer", "Skip", "interaction"]


@dataclass(frozen=True)
class Skip:
    """Why something in a trace is not scored. `expected` skips (traffic that is not RAG, our own evaluation
    spans) are counted quietly after the first log line; the others are counted and logged as warnings."""

    reason: str
    detail: str
    expected: bool = False
    span: DecodedSpan | None = None
    convention: str | None = None


class Recognizer(Protocol):
    """Turns an assembled trace into the RAG interactions one instrumentation convention describes.

    Yields an interaction for each answer it can pair with a question and retrieved documents, and a Skip
    for each answer it recognises but cannot score (naming what is missing). Yields nothing for traces
    that do not use its convention. Stateless: one instance serves every trace.
    """

    name: str

    def recognize(self, trace: Trace) -> Iterable[Interaction | Skip]: ...


def interaction(
    trace: Trace,
    anchor: DecodedSpan,
    *,
    convention: str,
    question: str | None,
    contexts: Contexts | Sequence[Context | str] | None,
    answer: str | None,
    sources: Iterable[DecodedSpan] = (),
    looked_in: Mapping[str, str] | None = None,
    llm_outputs: Iterable[tuple[DecodedSpan, str | None]] = (),
    route: str | None = None,
    session_id: str | None = None,
    user_id: str | None = None,
    tools: Sequence[DecodedSpan] = (),
    llms: Sequence[DecodedSpan] | None = None,
) -> Interaction | Skip:
    """An interaction anchored on `anchor`, or the Skip that names the missing part and, from `looked_in`
    (part -> attributes), where it was looked for. Plain-string contexts were recorded on `anchor`.

    An answer that is a program repr (`StopEvent(result=...`, cut or whole; `<generator object ...>`) counts
    as missing: a score is never built from the wrong text. Faithfulness needs an answer and documents, not
    a question: without one (or with a repr for one) the interaction is still read, its record's query is
    None and `question_missing` says why; the metrics that need the question say `not_applicable`. Tool
    results that merely carry the answer are dropped and noted (`_tools.drop_answer_carriers`);
    `llm_outputs` (each LLM call of the interaction with its text output) tell when the answer was written.
    `route`, `session_id` and `user_id` are what the convention itself names (the AI SDK's functionId and
    metadata), used where the spans carry no explicit one. `tools` are the interaction's tool spans: with its
    LLM calls (`llms`, else those of `llm_outputs`) they make the record's `run` (`_run.agent_run`).
    """

    def missing(reason: str, part: str, what: str) -> Skip:
        # Built only for a skip: most interactions are scored, and this text is then never read.
        place = f"{convention} span {anchor.span_id} '{anchor.name}' of trace {trace.trace_id}"
        place += f" ({anchor.service_name})"
        where = f" (looked in {looked_in[part]})" if looked_in and part in looked_in else ""
        return Skip(reason, f"{place} has {what}{where}", span=anchor, convention=convention)

    if answer is None or not answer.strip():
        return missing("missing_answer", "answer", "no answer")
    if is_repr(answer):
        return missing(
            "missing_answer", "answer", f"a program repr, not text, as its answer ({_clip(answer)})"
        )
    collected = as_contexts(anchor, contexts)
    if not collected.texts:  # dropping answer carriers only removes: no run is built for a skip
        return _no_documents(missing, collected)
    llm_outputs = list(llm_outputs)
    # Before answer carriers are dropped: a final-answer tool is not evidence, but it was called.
    run = agent_run(tools, [llm for llm, _ in llm_outputs] if llms is None else llms, collected)
    drop_answer_carriers(collected, answer, llm_outputs)
    texts = collected.texts
    if not texts:
        return _no_documents(missing, collected)
    context_sources = collected.sources
    sources = tuple(sources)
    unasked = None
    if not (question or "").strip():
        where = f" (looked in {looked_in['question']})" if looked_in and "question" in looked_in else ""
        unasked = f"no question recorded{where}: faithfulness is judged without it"
    elif is_repr(question):
        unasked = f"the question is a program repr ({_clip(question or '')}): judged without it"
    found_session, found_user = (
        conversation_of(trace, anchor, sources) if session_id is None or user_id is None else (None, None)
    )
    return Interaction(
        span=anchor,
        record=RagRecord(
            id=f"{trace.trace_id}:{anchor.span_id}",
            query=None if unasked else question,
            contexts=texts,
            answer=answer,
            run=run,
        ),
        route=route_of(trace, anchor, route),
        convention=convention,
        span_ids=frozenset([anchor.span_id, *[s.span_id for s in sources], *[c[0] for c in context_sources]]),
        context_sources=context_sources,
        context_notes=collected.notes,
        session_id=session_id or found_session,
        user_id=user_id or found_user,
        question_missing=unasked,
    )


def _no_documents(missing: Callable[[str, str, str], Skip], collected: Contexts) -> Skip:
    notes = "; ".join(collected.notes)
    what = "no retrieved documents to check the answer against" + (f" ({notes})" if notes else "")
    return missing("empty_context", "documents", what)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def route_of(trace: Trace, anchor: DecodedSpan, named: str | None = None) -> str:
    """The route results are grouped by: an explicit tracescore route, else the name the convention gives
    the interaction (`named`), else the HTTP route of the request the interaction served (often on an
    ancestor span), else the anchor span's name without the ids some instrumentations put in it (an unnamed
    CrewAI crew's span is `Crew_<a new UUID per Crew()>.kickoff`: one route per crew object would never
    gather a route's results)."""
    lineage = (anchor, *trace.ancestors(anchor)) if anchor.parent_span_id is not None else (anchor,)
    return (
        _first_text(lineage, semconv.TRACESCORE_ROUTE)
        or named
        or _first_text(lineage, semconv.HTTP_ROUTE)
        or _without_ids(anchor.name)
    )


def _without_ids(name: str) -> str:
    return _UUID.sub("{id}", name) if "-" in name else name


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _first_text(spans: Sequence[DecodedSpan], key: str) -> str | None:
    for span in spans:
        value = span.attributes.get(key)
        if isinstance(value, str) and value:
            return value
    return None
