"""Run every recogniser on a trace and keep each interaction once.

Recognisers run in priority order (`DEFAULT_RECOGNIZERS`: one per convention, in the order `_conventions`
explains). Two readings describe the same interaction when one's anchor span is the other's ancestor or
descendant, or they were read from a shared span: the earlier recogniser's reading is kept. One model call
recorded by two services (a client app and the gateway it called, as the LiteLLM proxy: the same question and
answer read in a service called from the app's reading) is scored once, on the caller's reading, the gateway's
end user filling an empty one. Sibling interactions (two RAG calls in one request, or two services that each
make the same call, neither calling the other) stay separate. Skips are kept the same way: of two conventions
that could not score one interaction (one's anchor inside the other's), the earlier one explains it, as does
the reading of the service that made the call a gateway's spans record.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tracescore._plural import counted
from tracescore.extract._convention import PROMPT_DOCUMENTS_DOCS
from tracescore.extract._conventions import CONVENTIONS
from tracescore.extract._protocol import Recognizer, Skip
from tracescore.extract._reader import ConventionReader, Found
from tracescore.model import DecodedSpan, ExtractSkip, Interaction, Trace

__all__ = ["DEFAULT_RECOGNIZERS", "Extraction", "Findings", "extract", "find"]

_NONE: set[str] = set()  # never written: a one-span trace keeps no covered spans

# Where the docs list every producer read and what each must record: the page a `not_rag` skip points to.
INTEGRATIONS_DOCS = "docs/integrations/index.md"

DEFAULT_RECOGNIZERS: tuple[Recognizer, ...] = tuple(ConventionReader(c) for c in CONVENTIONS)


@dataclass(slots=True)
class Extraction:
    interactions: list[Interaction] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)


@dataclass(slots=True)
class Findings:
    """What `find` read: the interactions, not built yet (`Found.interaction()` builds one), and the skips."""

    found: list[Found] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)


def extract(trace: Trace, recognizers: Sequence[Recognizer] = DEFAULT_RECOGNIZERS) -> Extraction:
    findings = find(trace, recognizers)
    return Extraction([f.interaction() for f in findings.found], findings.skips)


def find(trace: Trace, recognizers: Sequence[Recognizer] = DEFAULT_RECOGNIZERS) -> Findings:
    """`extract`, each interaction left unbuilt until asked for: the consumer builds those it may score."""
    kept_found: list[Found] = []
    skipped: list[Skip] = []
    one_span = len(trace.spans) == 1  # most traces of our own spans: once read, nothing else is in it
    # The spans in, above or below a kept interaction; none kept for a one-span trace (its only span is
    # covered by the first interaction kept).
    covered: set[str] = set() if not one_span else _NONE
    for recognizer in recognizers:
        if kept_found and (one_span or covered.issuperset(trace.by_id)):
            # Every span is in, above or below a kept interaction: whatever a later recogniser finds is
            # dropped below, so it need not run (our own spans carry three conventions' attributes).
            break
        outcomes = (
            recognizer.find(trace) if type(recognizer) is ConventionReader else _outcomes(recognizer, trace)
        )
        for outcome in outcomes:
            if isinstance(outcome, Skip):
                skipped.append(outcome)
            elif _keep(trace, outcome, kept_found):
                if one_span:
                    continue
                anchor = outcome.span
                covered.update(outcome.span_ids)
                covered.add(anchor.span_id)
                if anchor.parent_span_id is not None:
                    covered.update(s.span_id for s in trace.ancestors(anchor))
                if trace.children(anchor):
                    covered.update(s.span_id for s in trace.descendants(anchor))
    if not skipped:  # most traces read: nothing to explain
        return Findings(kept_found, skipped if kept_found else [_not_rag(trace, recognizers)])
    skips: list[Skip] = []
    explained: list[DecodedSpan] = []
    for skip in skipped:
        skipped_at = skip.span
        if skip.scored:  # said of an interaction scored: only of the reading kept
            if any(kept.span is skipped_at for kept in kept_found):
                skips.append(skip)
            continue
        if skipped_at is not None:
            if any(
                _same(trace, skipped_at, frozenset(), kept)
                or _called_from(trace, skipped_at, kept.span, kept.span_ids)
                for kept in kept_found
            ) or any(
                _nested(trace, skipped_at, earlier) or _called_from(trace, skipped_at, earlier)
                for earlier in explained
            ):
                # Another reading scored it, an earlier recogniser already explained it, or the service that
                # called this one did (a gateway's record of the client's call).
                continue
            explained.append(skipped_at)
        skips.append(skip)
    if not kept_found and not skips:
        skips.append(_not_rag(trace, recognizers))
    return Findings(kept_found, skips)


def _outcomes(recognizer: Recognizer, trace: Trace) -> Iterable[Found | Skip]:
    if isinstance(recognizer, ConventionReader):
        return recognizer.find(trace)
    # A recogniser of its own (the Recognizer protocol) builds its interactions itself.
    return [o if isinstance(o, Skip) else Found.of(o) for o in recognizer.recognize(trace)]


def _same(trace: Trace, anchor: DecodedSpan, span_ids: frozenset[str], kept: Found) -> bool:
    if anchor.span_id == kept.span.span_id or span_ids & kept.span_ids or anchor.span_id in kept.span_ids:
        return True
    return any(a.span_id == kept.span.span_id for a in trace.ancestors(anchor)) or any(
        a.span_id == anchor.span_id for a in trace.ancestors(kept.span)
    )


def _keep(trace: Trace, found: Found, kept_found: list[Found]) -> bool:
    """Keeps `found` unless it is an interaction kept already: read from the same spans (`_same`), or the
    relay of a kept reading (`_relayed`); in place of a kept reading that is its own relay (read first, by an
    earlier convention or from an earlier span). Of a call and its relay the caller's reading is kept, the
    relay's end user filling an empty one (a gateway names the user the app did not). True when kept."""
    # No enumerate: every reading kept comes here, most into an empty list; the index is looked up only to
    # replace a relay.
    for kept in kept_found:
        if _relayed(trace, found, kept):
            kept.fill_user(found.user_id)
            return False
        if _relayed(trace, kept, found):
            found.fill_user(kept.user_id)
            kept_found[kept_found.index(kept)] = found
            return True
        if _same(trace, found.span, found.span_ids, kept):
            return False
    kept_found.append(found)
    return True


def _relayed(trace: Trace, found: Found, kept: Found) -> bool:
    """Whether `found` is the call `kept` made, recorded again by the service it called (a gateway such as the
    LiteLLM proxy): in a service called from `kept`'s reading (`_called_from`), with the same question and
    answer. Two services that each make the same call, neither calling the other (a fan-out), are two
    interactions."""
    question, _, answer = found.texts
    return (
        bool(answer)
        and found.span.service_name != kept.span.service_name
        and (question, answer) == (kept.texts[0], kept.texts[2])
        and _called_from(trace, found.span, kept.span, kept.span_ids)
    )


def _called_from(
    trace: Trace, anchor: DecodedSpan, reading: DecodedSpan, span_ids: frozenset[str] = frozenset()
) -> bool:
    """Whether `anchor` is in a service called from a reading (its span `reading`, read from `span_ids`): its
    nearest ancestor in another service is in the reading's service and is one of the reading's spans or above
    or below one (an app sends its trace context from the span current when it calls: its own span around the
    model call, the client's span, or an HTTP span below it): a gateway's record of the reading's call."""
    caller = next((a for a in trace.ancestors(anchor) if a.service_name != anchor.service_name), None)
    if caller is None or caller.service_name != reading.service_name:
        return False
    spans = (reading, *(span for span_id in span_ids if (span := trace.by_id.get(span_id)) is not None))
    return any(_nested(trace, caller, span) for span in spans)


def _nested(trace: Trace, anchor: DecodedSpan, other: DecodedSpan) -> bool:
    """Whether two skips' anchors are one span or one inside the other: the same interaction, read by two
    conventions (a dual-emitting instrumentation's agent span is an OpenInference AGENT and a GenAI
    invoke_agent)."""
    if anchor.span_id == other.span_id:
        return True
    return any(a.span_id == other.span_id for a in trace.ancestors(anchor)) or any(
        a.span_id == anchor.span_id for a in trace.ancestors(other)
    )


def _not_rag(trace: Trace, recognizers: Sequence[Recognizer]) -> Skip:
    scopes = sorted({span.scope_name or "(no scope)" for span in trace.spans})
    root = trace.roots[0] if trace.roots else trace.spans[0]
    spans = counted(len(trace.spans), "span")
    return Skip(
        ExtractSkip.NOT_RAG,
        f"trace {trace.trace_id} ({spans}, scopes: {', '.join(scopes)}) has no span "
        f"in a known RAG convention ({', '.join(r.name for r in recognizers)}) with a question, an answer "
        f"or retrieved documents; if it is your RAG traffic, check its producer is on the Integrations page "
        f"({INTEGRATIONS_DOCS}) and records content (documents pasted into a prompt are read under a label "
        f"that names them: {PROMPT_DOCUMENTS_DOCS}), or add @tracescore.rag to the function that answers",
        expected=True,
        span=root,
    )
