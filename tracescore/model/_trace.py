"""The units that flow from consume through extract, sample and score to emit: decoded spans, the trace they
assemble into, and the RAG interactions recognised in that trace."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tracescore._plural import counted
from tracescore.model._history import ConversationSource
from tracescore.model._results import RagRecord
from tracescore.model._run import Run
from tracescore.model._vocabulary import ContextSourceKind

__all__ = [
    "MAX_SPAN_EVENTS",
    "MAX_SPAN_EVENT_BYTES",
    "ContextSource",
    "DecodedSpan",
    "Interaction",
    "SpanEvent",
    "Trace",
    "start_order",
]

# What a decoded span keeps of its events: the last ones (an LLM call's output and a conversation's latest
# messages come last), up to this many (the OpenTelemetry SDK's own default limit) and this many bytes of
# encoded events; the older ones are counted in `DecodedSpan.events_dropped`.
MAX_SPAN_EVENTS = 128
MAX_SPAN_EVENT_BYTES = 4 * 1024 * 1024


class SpanEvent(NamedTuple):
    """One span event as read from Kafka: its name, attributes and time. Some producers write a span's
    messages as events rather than attributes (Strands Agents by default)."""

    name: str
    attributes: Mapping[str, Any]
    time_unix_nano: int = 0


@dataclass(slots=True)
class DecodedSpan:
    """One span as read from Kafka. Treated as immutable; not frozen because a frozen dataclass costs ~4x
    as much to build, and the consumer builds one per span it reads."""

    trace_id: str  # lowercase hex, as in OTLP JSON
    span_id: str
    name: str
    service_name: str
    scope_name: str
    attributes: Mapping[str, Any]
    end_time_unix_nano: int
    parent_span_id: str | None = None  # None for a root span
    start_time_unix_nano: int = 0
    kind: int = 0  # OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    status_code: int = 0  # OTLP StatusCode: 0 unset, 1 ok, 2 error (a failed tool call, for one)
    status_message: str = ""
    # Its events, oldest first (bounded: `MAX_SPAN_EVENTS`, `MAX_SPAN_EVENT_BYTES`), and how many it lost: the
    # older ones past those bounds, and those its producer dropped (its SDK's limits).
    events: tuple[SpanEvent, ...] = ()
    events_dropped: int = 0

    def attr(self, key: str) -> Any:
        return self.attributes.get(key)

    def __hash__(self) -> int:
        return hash((self.trace_id, self.span_id))


class Trace:
    """The spans of one trace that arrived before it was released for extraction.

    `incomplete` says why it was released early (memory bound, too many spans) so recognisers and the
    records can say the score was built from part of the trace. Navigation tolerates what real traffic
    holds: missing parents (a span whose parent never arrived is treated as a root) and cycles. The
    indexes are built once, up front: every recogniser walks the tree.
    """

    __slots__ = ("_children", "by_id", "incomplete", "offsets", "spans", "trace_id")

    def __init__(
        self,
        trace_id: str,
        spans: tuple[DecodedSpan, ...],
        incomplete: str | None = None,
        offsets: Mapping[Hashable, int] | None = None,
        by_id: Mapping[str, DecodedSpan] | None = None,
    ) -> None:
        self.trace_id = trace_id
        self.spans = spans
        self.incomplete = incomplete
        # Where the spans were read from (partition -> lowest offset), so whoever scores the trace can hold
        # those offsets uncommitted until its outputs are acknowledged.
        self.offsets: Mapping[Hashable, int] = offsets or {}
        self._children: dict[str | None, list[DecodedSpan]] | None = None
        if by_id is None:
            by_id = {spans[0].span_id: spans[0]} if len(spans) == 1 else {s.span_id: s for s in spans}
        # `by_id`, when given: the same spans by id, as the caller holds them already and never changes (the
        # assembler's buffer), not built again: every trace read comes here.
        self.by_id = by_id
        if len(spans) == 1:  # the common trace of `@tracescore.rag` spans: no tree to index
            return
        children: dict[str | None, list[DecodedSpan]] = defaultdict(list)
        for span in spans:
            children[span.parent_span_id if span.parent_span_id in self.by_id else None].append(span)
        for siblings in children.values():
            siblings.sort(key=start_order)
        self._children = dict(children)

    def __repr__(self) -> str:
        return f"Trace({self.trace_id}, {counted(len(self.spans), 'span')}, incomplete={self.incomplete})"

    def children(self, span: DecodedSpan) -> list[DecodedSpan]:
        children = self._children
        return [] if children is None else children.get(span.span_id, [])

    @property
    def roots(self) -> list[DecodedSpan]:
        """Spans without a parent in this trace, in start order (a span whose parent is missing counts)."""
        children = self._children
        return list(self.spans) if children is None else children.get(None, [])

    def select(self, keep: Callable[[DecodedSpan], bool]) -> list[DecodedSpan]:
        """The spans `keep` accepts, in start order: cheaper than walking the tree when few match."""
        return sorted((s for s in self.spans if keep(s)), key=start_order)

    def descendants(self, span: DecodedSpan) -> Iterator[DecodedSpan]:
        """Depth-first, in start order; each span at most once even if parent ids form a cycle."""
        seen = {span.span_id}
        stack = list(reversed(self.children(span)))
        while stack:
            current = stack.pop()
            if current.span_id in seen:
                continue
            seen.add(current.span_id)
            yield current
            stack.extend(reversed(self.children(current)))

    def ancestors(self, span: DecodedSpan) -> Iterator[DecodedSpan]:
        """Parent first, up to the root; stops on a cycle."""
        seen = {span.span_id}
        parent = self.by_id.get(span.parent_span_id or "")
        while parent is not None and parent.span_id not in seen:
            seen.add(parent.span_id)
            yield parent
            parent = self.by_id.get(parent.parent_span_id or "")

    def outermost(self, keep: Callable[[DecodedSpan], bool]) -> list[DecodedSpan]:
        """The spans `keep` accepts that have no accepted ancestor, in start order: where a convention's
        interaction is anchored (a chain that calls a chain is one interaction)."""
        return [s for s in self.select(keep) if not any(keep(a) for a in self.ancestors(s))]

    def beside(self, span: DecodedSpan) -> list[DecodedSpan]:
        """The spans under `span`'s parent (the whole trace when it has none): the retrievals that fed an
        LLM call ran beside it."""
        parent = self.by_id.get(span.parent_span_id or "")
        return list(self.descendants(parent)) if parent is not None else self.in_order()

    def in_order(self) -> list[DecodedSpan]:
        """Every span once, roots first then depth-first; spans caught in a parent cycle come last."""
        ordered: dict[str, DecodedSpan] = {}
        for root in self.roots:
            ordered.setdefault(root.span_id, root)
            for span in self.descendants(root):
                ordered.setdefault(span.span_id, span)
        for span in self.spans:
            ordered.setdefault(span.span_id, span)
        return list(ordered.values())


def start_order(span: DecodedSpan) -> tuple[int, int, str]:
    """The order spans started in, the trace's own (`Trace.children`, `Trace.select`): the sort key wherever
    spans are put in order. Ties are broken by end, then id, so the order never depends on the input's."""
    return (span.start_time_unix_nano, span.end_time_unix_nano, span.span_id)


class ContextSource(NamedTuple):
    """Where one judged document came from: the span that held it and how it was read (`ContextSourceKind`:
    `retriever`, `reranker`, `tool` for a tool span's result, `tool_message` for a tool result passed to the
    next LLM call, `span` for documents recorded on the interaction span itself, `input` for documents a step
    was given as its input, `instructions` for documents under a label that names them in the model's
    instructions (its system message), `earlier_turn` for a tool result of an earlier turn of the
    conversation that the app kept in the LLM call's input). `turns_back` is 0 for this turn's documents, 1
    for the previous turn's, and so on."""

    span_id: str
    kind: ContextSourceKind
    turns_back: int = 0


@dataclass(frozen=True)
class Interaction:
    """One RAG interaction found in a trace: what to score, and the span the results attach to.

    `convention` names the recogniser that read it (tracescore, openinference, openllmetry, genai);
    `span_ids` are the spans it was read from, so two conventions describing one interaction score once.
    `context_sources` is aligned with `record.contexts` (where each document came from); `context_notes`
    explain what was read differently or left out (a tool result that is not document-like, program
    reprs dropped, tool results that carry the answer, documents past the limits); `run` is what an agent
    did (`record.run`: tool calls, LLM calls, steps; None without one); `session_id` is the
    conversation the turn belongs to, `user_id` the end user who asked (`user.id`, or what the convention
    calls it; None when not recorded); where no conversation was named, `history`, `turn_digest`,
    `conversation_source` and `opens_conversation` say what the resent history showed
    (`model._history`). `question_missing` says why `record.query` is None (the question was
    not recorded, or only as a program repr): faithfulness is judged without it, the metrics that need it
    say `not_applicable`.
    """

    span: DecodedSpan
    record: RagRecord
    route: str
    convention: str = "tracescore"
    span_ids: frozenset[str] = field(default_factory=frozenset)
    context_sources: tuple[ContextSource, ...] = ()
    context_notes: tuple[str, ...] = ()
    session_id: str | None = None
    user_id: str | None = None
    question_missing: str | None = None
    # Where no conversation was named (`model._history`): the digests of the (question, answer) pairs the
    # prompt resent, oldest first, and of this turn's own pair; `conversation_source` says where
    # `session_id` came from (None: no conversation).
    history: tuple[str, ...] = ()
    turn_digest: str | None = None
    conversation_source: ConversationSource | None = None
    opens_conversation: str | None = None  # a first turn's inferred id: its documents', never its records'
    # A history the model's service keeps (the Responses API): the response that answered, and the previous
    # response the request named (a follow-up's; `opens_conversation` then the chain its answer would open).
    response_id: str | None = None
    previous_response_id: str | None = None

    @property
    def run(self) -> Run | None:
        """What the agent did in this interaction (tool calls, LLM calls, steps), None when the convention
        shows no run; kept on the record (`record.run`), which is what the metrics score."""
        return self.record.run


# The name before 0.x: kept so code written against it keeps working.
RagSpan = Interaction
