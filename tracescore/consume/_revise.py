"""Late spans of a trace already read: which interactions they change, and the revision that replaces them.

The assembler remembers recently released traces (bounded, least recently released forgotten first) with,
per interaction, a fingerprint of what was judged: question, documents, answer. A late span rebuilds the
whole trace; after extraction each interaction is compared with the one it replaces (same anchor span, or
one reading contains the other). Unchanged: not scored again. Changed, or new (the first reading skipped
it): scored, its records carrying the next revision number and the key of the revision they supersede.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tracescore._rag_span import DecodedSpan, RagSpan, Trace
from tracescore.extract import Skip

__all__ = ["Judged", "Remembered", "Revision", "revise", "revision_key"]


class Revision(NamedTuple):
    """An interaction to score: `revision` 0 the first time, n+1 when it replaces revision n (`supersedes`,
    that revision's key, see `revision_key`)."""

    interaction: RagSpan
    revision: int = 0
    supersedes: str | None = None


@dataclass(slots=True)
class Judged:
    anchor: str
    span_ids: frozenset[str]
    # Question, documents, answer: kept by reference and compared only when a late span rebuilds the
    # trace (rare), so the common path pays no hashing.
    judged: tuple[object, ...]
    revision: int


@dataclass(slots=True)
class Remembered:
    """A released trace kept so a late span can rebuild it; `judged`/`skipped` are filled by `revise`."""

    spans: dict[str, DecodedSpan]
    size: int
    late: int = 0  # late spans in the release being revised (0: a first release)
    whole: bool = True  # False: read early to stay in bounds, kept only to revise that reading
    judged: list[Judged] = field(default_factory=list)
    skipped: set[tuple[str, str]] = field(default_factory=set)  # (anchor span id, reason)


def revision_key(trace_id: str, span_id: str, revision: int) -> str:
    """What `supersedes` holds: the interaction's trace and span, and the revision replaced."""
    return f"{trace_id}:{span_id}:{revision}"


def fingerprint(interaction: RagSpan) -> tuple[object, ...]:
    record = interaction.record
    return (record.query, record.contexts, record.answer)


def revise(
    trace: Trace,
    memory: Remembered,
    interactions: Sequence[RagSpan],
    skips: Sequence[Skip],
    counts: Counter[str],
) -> tuple[list[Revision], list[Skip]]:
    """The interactions to score and the skips to report for this release of `trace`; updates `memory`."""
    previous = memory.judged
    judged: list[Judged] = []
    out: list[Revision] = []
    for interaction in interactions:
        mark = fingerprint(interaction)
        earlier = next((j for j in previous if _replaces(trace, interaction, j)), None)
        if earlier is None:
            judged.append(Judged(interaction.span.span_id, interaction.span_ids, mark, 0))
            out.append(Revision(interaction))
        elif earlier.judged == mark:
            judged.append(earlier)
        else:
            revision = earlier.revision + 1
            judged.append(Judged(interaction.span.span_id, interaction.span_ids, mark, revision))
            replaced = revision_key(trace.trace_id, earlier.anchor, earlier.revision)
            out.append(Revision(interaction, revision, replaced))
    judged += [j for j in previous if j not in judged]  # a reading no longer found keeps its record
    fresh = [s for s in skips if s.span is None or (s.span.span_id, s.reason) not in memory.skipped]
    memory.skipped.update((s.span.span_id, s.reason) for s in skips if s.span is not None)
    memory.judged = judged
    if memory.late:
        if out:
            counts["late_spans_rejoined"] += memory.late
            counts["rescored"] += sum(r.revision > 0 for r in out)
        else:
            counts["late_spans_unchanged"] += memory.late
        memory.late = 0
    return out, fresh


def _replaces(trace: Trace, interaction: RagSpan, earlier: Judged) -> bool:
    anchor = interaction.span.span_id
    if anchor == earlier.anchor or earlier.anchor in interaction.span_ids or anchor in earlier.span_ids:
        return True
    old = trace.by_id.get(earlier.anchor)
    return old is not None and any(a.span_id == anchor for a in trace.ancestors(old))
