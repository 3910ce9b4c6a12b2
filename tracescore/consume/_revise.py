"""Late spans of a trace already read: which interactions they change, and the revision that replaces them.

The assembler remembers recently released traces (bounded, least recently released forgotten first) with,
per interaction, a record of what was judged: question, documents and answer, taken from the reading the
consumer made anyway (extract runs once per reading, never again to recall an earlier one). A late span
rebuilds the whole trace; after extraction each interaction is compared with the one it replaces (same
anchor span, or one reading contains the other). Unchanged: not scored again. Changed, or new (the first
reading skipped it): scored, its records carrying the next revision number and the key of the revision they
supersede.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from tracescore.consume._counts import AssemblyCount
from tracescore.extract import Found, Skip
from tracescore.model import DecodedSpan, Interaction, Trace, revision_key

__all__ = ["JudgedReading", "Remembered", "Revision", "first_revisions", "revise", "revision_key"]


# What is revised: interactions, or readings not built yet (`Found`, as the consumer revises them).
Judgeable = TypeVar("Judgeable", Interaction, Found)


class Revision(NamedTuple, Generic[Judgeable]):
    """An interaction to score: `revision` 0 the first time, n+1 when it replaces revision n (`supersedes`,
    that revision's key, see `revision_key`)."""

    interaction: Judgeable
    revision: int = 0
    supersedes: str | None = None


# What one interaction's reading judged, kept for late spans (not consume._judging.Judged, an interaction
# handed to the judges now): one flat tuple (anchor span id, revision, question or None, answer, how many span
# ids follow, the span ids read, then the documents), built by `_judged`. Flat, of strings and ints only: the
# cyclic garbage collector stops tracking such a tuple at its first pass, but every object still costs that
# pass, and every trace the unsampled path reads is kept (a record nested as four tuples made each trace kept
# three objects more for the young collections to walk). The texts are the reading's own, by reference,
# compared only when a late span rebuilds the trace.
JudgedReading = tuple[Any, ...]
_ANCHOR, _REVISION, _QUESTION, _ANSWER, _IDS = range(5)
_new_revision = tuple.__new__  # Revision(i), without the Python call of a NamedTuple's constructor


def _judged(
    anchor: str, revision: int, span_ids: Collection[str], texts: tuple[object, ...]
) -> JudgedReading:
    question, documents, answer = texts
    # The ids unpacked as they are (a frozenset), not copied into a tuple first: one object fewer a reading.
    return (anchor, revision, question, answer, len(span_ids), *span_ids, *documents)


def _span_ids(judged: JudgedReading) -> tuple[str, ...]:
    return judged[_IDS + 1 : _IDS + 1 + judged[_IDS]]


def _texts(judged: JudgedReading) -> tuple[object, ...]:
    """(question or None, documents, answer), as `judged_texts` gives them."""
    return (judged[_QUESTION], judged[_IDS + 1 + judged[_IDS] :], judged[_ANSWER])


class Remembered(Protocol):
    """A released trace kept so a late span can rebuild it; `judged`/`skipped` are filled by `revise`. The
    assembler keeps the trace's buffered entry itself: one object per trace from its first span until it is
    forgotten, not a second one made at each release (every object kept is walked by young collections)."""

    spans: dict[str, DecodedSpan]
    size: int
    late: int  # late spans in the release being revised (0: a first release)
    whole: bool  # False: read early to stay in bounds, kept only to revise that reading
    # None until the trace's first reading is revised (`revise`), which records what it judged.
    judged: tuple[JudgedReading, ...] | None
    skipped: tuple[tuple[str, str], ...]  # (anchor span id, "" for a skip of no span; reason), as reported


def revise(
    trace: Trace,
    memory: Remembered,
    interactions: Sequence[Judgeable],
    skips: Sequence[Skip],
    counts: Counter[AssemblyCount],
) -> tuple[list[Revision[Judgeable]], list[Skip]]:
    """The interactions to score and the skips to report for this release of `trace`; updates `memory`."""
    previous = memory.judged
    if previous is None:  # a first reading: everything is new; what it judged is kept for late spans
        # Every trace released comes here: one loop, no NamedTuple constructor or comprehension per reading.
        judged_now: list[JudgedReading] = []
        first: list[Revision[Judgeable]] = []
        for i in interactions:
            judged_now.append(
                _judged(i.span.span_id, 0, i.span_ids, i.texts if type(i) is Found else judged_texts(i))
            )
            first.append(_new_revision(Revision, (i, 0, None)))
        memory.judged = tuple(judged_now)
        if skips:
            memory.skipped = tuple(_skip_key(s) for s in skips)
        return first, skips if type(skips) is list else list(skips)  # `find`'s own list: not copied
    judged: list[JudgedReading] = []
    out: list[Revision[Judgeable]] = []
    for interaction in interactions:
        texts = judged_texts(interaction)
        earlier = next((j for j in previous if _replaces(trace, interaction, j)), None)
        if earlier is not None and _texts(earlier) == texts:
            judged.append(earlier)
            continue
        revision = 0 if earlier is None else earlier[_REVISION] + 1
        judged.append(_judged(interaction.span.span_id, revision, interaction.span_ids, texts))
        if earlier is None:
            out.append(Revision(interaction))
        else:
            replaced = revision_key(trace.trace_id, earlier[_ANCHOR], earlier[_REVISION])
            out.append(Revision(interaction, revision, replaced))
    judged += [j for j in previous if j not in judged]  # a reading no longer found keeps its record
    fresh = _fresh_skips(memory.skipped, skips)
    memory.skipped += tuple(_skip_key(s) for s in fresh)
    memory.judged = tuple(judged)
    if memory.late:
        if out:
            counts[AssemblyCount.LATE_SPANS_REJOINED] += memory.late
            counts[AssemblyCount.RESCORED] += sum(r.revision > 0 for r in out)
        else:
            counts[AssemblyCount.LATE_SPANS_UNCHANGED] += memory.late
        memory.late = 0
    return out, fresh


def _skip_key(skip: Skip) -> tuple[str, str]:
    return (skip.span.span_id if skip.span is not None else "", skip.reason)


def _fresh_skips(reported: tuple[tuple[str, str], ...], skips: Sequence[Skip]) -> list[Skip]:
    """The skips of a rebuilt trace not yet reported. A skip is one interaction of the trace not scored, so
    each reason counts at most as many times as one reading finds it: the trace grown by a late span (its
    root, a parent) anchors the same skip on another span, which is not a second interaction skipped."""
    owed = Counter(s.reason for s in skips)
    owed.subtract(reason for _, reason in reported)
    known = set(reported)
    fresh = []
    for skip in skips:
        if owed[skip.reason] > 0 and _skip_key(skip) not in known:
            owed[skip.reason] -= 1
            fresh.append(skip)
    return fresh


def first_revisions(interactions: Sequence[Judgeable]) -> list[Revision[Judgeable]]:
    """Each interaction as revision 0 (built as the tuple it is: a NamedTuple's constructor is a Python call,
    and every interaction released comes here)."""
    return [_new_revision(Revision, (i, 0, None)) for i in interactions]


def judged_texts(interaction: Interaction | Found) -> tuple[object, ...]:
    """What an interaction is judged on and a revision compares: (question or None, documents, answer)."""
    if isinstance(interaction, Found):
        return interaction.texts
    record = interaction.record
    return (record.query, record.contexts, record.answer)


def _replaces(trace: Trace, interaction: Interaction | Found, earlier: JudgedReading) -> bool:
    anchor, earlier_anchor = interaction.span.span_id, earlier[_ANCHOR]
    if anchor == earlier_anchor or earlier_anchor in interaction.span_ids or anchor in _span_ids(earlier):
        return True
    old = trace.by_id.get(earlier_anchor)
    return old is not None and any(a.span_id == anchor for a in trace.ancestors(old))
