"""What trace assembly counts, in `tracescore consume`'s closing summary (`assembly: late_spans=2, ...`) and
`ConsumerStats.assembly`, and why a trace was read before it was whole (`Trace.incomplete`). The values are
what users read there and in the docs (Troubleshooting's assembly counts, Trace completeness, Rebalances):
never rename one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from enum import StrEnum

__all__ = ["AssemblyCount", "AssemblyCounts", "Incomplete"]


class Incomplete(StrEnum):
    """Why a trace was read before it was whole (`Trace.incomplete`; None: it was)."""

    NO_ROOT_SPAN = "no_root_span"  # its root never arrived: read at the maximum wait
    REMOTE_WORK_NOT_ARRIVED = "remote_work_not_arrived"  # a callee's spans never arrived (`_remote`)
    TOO_MANY_SPANS = "too_many_spans"  # past max_spans_per_trace: read at once, not rebuilt later
    EVICTED_MEMORY = "evicted_memory"  # past max_traces or max_bytes: the least recently fed, read early


class AssemblyCount(StrEnum):
    DUPLICATE_SPANS = "duplicate_spans"  # a span id seen twice (a replayed message): kept once
    LATE_SPANS = "late_spans"  # spans of a trace already read and no longer kept: never scored alone
    LATE_SPANS_REJOINED = "late_spans_rejoined"  # late spans that rebuilt their trace
    LATE_SPANS_UNCHANGED = "late_spans_unchanged"  # late spans that changed nothing judged
    RESCORED = "rescored"  # interactions scored again after late spans (a new revision)
    REMOTE_WORK_NOT_ARRIVED = "remote_work_not_arrived"  # traces read without a callee's spans
    RELEASED_AFTER_HANDOVER = "released_after_handover"  # handed over unfinished, read without a new grace
    HANDED_OVER_SPANS_SKIPPED = "handed_over_spans_skipped"  # read again, their trace finished already
    HANDED_OVER_MESSAGES_SKIPPED = "handed_over_messages_skipped"  # read again, dead-lettered already
    EVALUATION_SPAN_MESSAGES = "evaluation_span_messages"  # ours, read back: skipped by header
    EVALUATION_SPANS = "evaluation_spans"  # evaluation spans without that header, dropped after decoding
    # Log records (a logs pipeline writing to the spans topic): GenAI events become their span's events.
    LOG_EVENTS = "log_events"  # GenAI events read from log records, each added to its span's events
    LOG_RECORDS_WITHOUT_TRACE = "log_records_without_trace"  # no trace and span id: nothing to join
    LOG_RECORDS_NOT_EVENTS = "log_records_not_events"  # not a GenAI event (an app's log line): not read
    LOG_EVENTS_WITHOUT_SPAN = "log_events_without_span"  # their span had not arrived when the trace was read
    LATE_LOG_EVENTS = "late_log_events"  # of a trace already read and no longer kept: never read
    DUPLICATE_LOG_EVENTS = "duplicate_log_events"  # the same event of the same span twice: kept once
    HANDED_OVER_LOG_EVENTS_SKIPPED = "handed_over_log_events_skipped"  # read again, their trace finished
    # Why each trace was read (`released`): the closing summary leaves these out.
    RELEASED_COMPLETE = "released_complete"
    RELEASED_NO_ROOT_SPAN = "released_no_root_span"
    RELEASED_REMOTE_WORK_NOT_ARRIVED = "released_remote_work_not_arrived"
    RELEASED_TOO_MANY_SPANS = "released_too_many_spans"
    RELEASED_EVICTED_MEMORY = "released_evicted_memory"

    @classmethod
    def released(cls, why: Incomplete | None) -> AssemblyCount:
        """The count of traces read for `why` (None: whole; a member per `Incomplete`)."""
        return _RELEASED[why]

    @property
    def why_read(self) -> bool:
        """A count of why traces were read (`released`), which the closing summary leaves out."""
        return self in _WHY_READ


# Looked up once a released batch (every trace of the unsampled path): a dict, not the enum's call by value.
_RELEASED: dict[Incomplete | None, AssemblyCount] = {
    why: AssemblyCount(f"released_{why or 'complete'}") for why in (None, *Incomplete)
}
_WHY_READ = frozenset(_RELEASED.values())


class AssemblyCounts(Counter[AssemblyCount]):
    """`ConsumerStats.assembly`: keyed by `AssemblyCount` members only, whatever they are counted by. A count
    given by its plain name ("late_spans": the word users read) is kept under its member, and an unknown
    name is a ValueError where it is counted: the closing summary reads each key's `why_read`, which a
    plain-string key lacks (one counted so ended the run's summary in a traceback)."""

    def __setitem__(self, key: AssemblyCount | str, value: int) -> None:
        super().__setitem__(_member(key), value)

    def update(  # type: ignore[override]
        self,
        counts: Mapping[AssemblyCount | str, int] | Iterable[AssemblyCount | str] | None = None,
        /,
        **more: int,
    ) -> None:
        # Counter.update copies a mapping into an empty counter without __setitem__: its keys made members.
        if isinstance(counts, Mapping):
            counts = {_member(key): n for key, n in counts.items()}
        super().update(counts, **more)


def _member(key: AssemblyCount | str) -> AssemblyCount:
    # The type looked at first: counted once a batch, the enum's call by value is not free.
    return key if type(key) is AssemblyCount else AssemblyCount(key)
