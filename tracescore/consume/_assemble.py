"""Trace assembly: buffer decoded spans by trace id until the trace is whole enough to read.

A trace is released when its root span has arrived and `grace_s` passed without a new span, or when
`max_wait_s` passed since its last span (a root that never arrives, or lives in another service). A rooted
trace that visibly waits for remote work (a CLIENT call whose callee has not reported yet, a span whose
parent has not arrived) is held up to `max_wait_s` too: another service's spans reach Kafka on that
service's own export schedule. If they never come it is read anyway, counted `remote_work_not_arrived`.

Memory is bounded by trace count and bytes: past either bound the least recently fed trace is released
early and marked incomplete, so it is still read, never silently dropped. Time is the consumer's monotonic
clock, not span timestamps, so clock skew between services cannot hold a trace or release it early.

Offsets: every buffered trace remembers the lowest offset per partition it was read from. `low_watermarks`
gives, per partition, the lowest offset still held, which the consumer never commits past, so a crash
replays every buffered trace (at-least-once). Nearly every trace is read from one partition: its partition
and offset are held inline, a dict only for a trace read from several (one object fewer per buffered trace
for the garbage collector's young passes to walk).

Log events: GenAI events some producers write as OTel log records (`_decode.LogEvent`) wait in their trace's
entry as spans do (counted in its bytes, holding their offsets) and are added to their span's events when
the trace is released (`_attach`: a new span, spans are never changed). Whether one arrives before its span,
after it, or after its trace was released (a late one rebuilds the trace as a late span does), the trace is
read the same way; one whose span has not arrived is kept with the trace for a late span, and counted.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from tracescore.consume._counts import AssemblyCount, Incomplete
from tracescore.consume._decode import LogEvent, LogEvents, decode_message
from tracescore.consume._remote import waits_for_remote
from tracescore.consume._revise import Judgeable, JudgedReading, Revision, first_revisions, revise
from tracescore.extract import Skip
from tracescore.model import MAX_SPAN_EVENT_BYTES, MAX_SPAN_EVENTS, DecodedSpan, SpanEvent, Trace

__all__ = ["SPAN_OBJECT_BYTES", "AssemblySettings", "TraceAssembler", "assemble_messages"]


# Released early to stay in bounds: rebuilding them for a late span would defeat the bound.
_NOT_KEPT = frozenset({Incomplete.TOO_MANY_SPANS, Incomplete.EVICTED_MEMORY})
_LATE, _DUPLICATE = "late", "duplicate"  # why a late span or log event rebuilt no trace (`_rejoined`)
_NOWHERE: Hashable = object()  # a new entry's partition, before its first span is added
# What a decoded span holds in Python beyond its share of its message's bytes (its DecodedSpan, attribute
# dict, keys and strings): 650-1,560 bytes measured on OpenInference's spans and ours. A message counts as its
# bytes and this a span, so max_bytes and rejoin_bytes bound the memory held (within ~0.7-1.1x, BENCHMARKS.md
# "The trace buffer's memory"), not only the bytes Kafka delivered (which understated it up to ~3x).
SPAN_OBJECT_BYTES = 1024


class AssemblySettings(BaseModel):
    # A misspelt `[consume.assembly]` key or TRACESCORE_ASSEMBLY__* variable is an error, never a default.
    model_config = ConfigDict(extra="forbid")

    grace_s: float = Field(
        default=2.0,
        ge=0,
        description="Wait after a trace's last span once its root arrived, in stream time: the Kafka record "
        "timestamps of what was read since on its partition, at most the consumer's clock (its clock alone "
        "once it has read everything), so a consumer catching up does not read a trace before its rest.",
    )
    max_wait_s: float = Field(
        default=30.0,
        gt=0,
        description="Longest wait after a trace's last span, in stream time as grace_s: a trace without its "
        "root, or waiting for another service's spans.",
    )
    max_traces: int = Field(default=20_000, ge=1, description="Traces buffered at once.")
    max_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1,
        description="Memory of the spans buffered at once, counted as their messages' bytes and 1 KiB a span "
        "for its objects (measured within ~0.7-1.1x of what they hold).",
    )
    max_spans_per_trace: int = Field(default=50_000, ge=1, description="A larger trace is read early.")
    remember_released: int = Field(
        default=100_000, ge=0, description="Recently released trace ids, to count late spans."
    )
    rejoin_traces: int = Field(
        default=10_000,
        ge=0,
        description="Recently released traces kept whole, so a late span rebuilds its trace (0: off).",
    )
    rejoin_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        description="Bytes of spans kept to rebuild late traces, counted as max_bytes counts them.",
    )
    wait_for_remote: bool = Field(
        default=True,
        description="Hold a rooted trace up to max_wait_s while a remote call has no callee spans yet or a "
        "span's parent has not arrived.",
    )


@dataclass(slots=True)
class _Buffered:
    trace_id: str
    spans: dict[str, DecodedSpan] = field(default_factory=dict)
    has_root: bool = False
    last_seen: float = 0.0
    size: int = 0
    # Where its spans were read from: the first partition and its lowest offset held, inline; `more` once a
    # second partition is read, then every partition -> its lowest offset (the inline pair no longer read).
    partition: Hashable = _NOWHERE
    offset: int = 0
    more: dict[Hashable, int] | None = None
    waiting: bool = False  # past its grace, held for remote work
    rejoined: _Buffered | None = None  # an already released trace (its memory) rebuilt by a late span
    handed_over: bool = False  # read again after a rebalance: it waited its grace at the previous owner
    # Once released, the entry is the trace's memory for late spans (`Remembered`, filled by `revise`).
    late: int = 0
    whole: bool = True
    judged: tuple[JudgedReading, ...] | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    # Log events not yet added to their span (`_attach` at release). A rebuilt trace's first ones are its
    # memory's (`rejoined.events`: their span had not arrived at an earlier release, counted then).
    events: list[LogEvent] | None = None

    def hold(self, partition: Hashable, offset: int) -> None:
        """Remember `offset` of `partition` as read (`TraceAssembler.add` writes this out for its spans)."""
        more = self.more
        if more is None:
            first = self.partition
            if first is _NOWHERE:
                self.partition, self.offset = partition, offset
            elif first is partition or first == partition:
                if offset < self.offset:
                    self.offset = offset
            else:
                self.more = {first: self.offset, partition: offset}
        elif offset < more.get(partition, offset + 1):
            more[partition] = offset

    def has_event(self, log_event: LogEvent) -> bool:
        """The same event of the same span is held already (a replayed message)."""
        if self.events is not None and log_event in self.events:
            return True
        span = self.spans.get(log_event.span_id)
        return span is not None and log_event.event in span.events

    def offsets(self) -> dict[Hashable, int]:
        """Partition -> the lowest offset its spans were read from there (a new dict but for several)."""
        if self.more is not None:
            return self.more
        return {} if self.partition is _NOWHERE else {self.partition: self.offset}


class TraceAssembler:
    """Not thread-safe: one consumer loop owns it."""

    def __init__(
        self,
        settings: AssemblySettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        stamp: Callable[[], float] | None = None,
    ):
        """`clock`: when traces are due (`ready`); `stamp`: what a span read is stamped with (default:
        `clock`). The consumer gives both from its StreamTime (`_stream_time.py`): the stream's time."""
        self.settings = settings or AssemblySettings()
        self._clock = clock
        self._stamp = stamp or clock
        self._by_last_seen: OrderedDict[str, _Buffered] = OrderedDict()
        self._rooted: OrderedDict[str, _Buffered] = OrderedDict()
        self._released: OrderedDict[str, None] = OrderedDict()
        self._rejoin: OrderedDict[str, _Buffered] = OrderedDict()
        self._rejoin_bytes = 0
        self._bytes = 0
        # duplicate_spans, late_spans (of a trace no longer kept), late_spans_rejoined / _unchanged,
        # rescored, remote_work_not_arrived, released_<why>
        self.counts: Counter[AssemblyCount] = Counter()

    @property
    def buffered_traces(self) -> int:
        return len(self._by_last_seen)

    @property
    def buffered_bytes(self) -> int:
        return self._bytes

    def add(
        self,
        spans: Iterable[DecodedSpan],
        partition: Hashable,
        offset: int,
        size: int,
        handed_over: bool = False,
    ) -> list[Trace]:
        """Buffer the spans of one message (counted as `size` bytes: the pipeline counts its bytes and
        SPAN_OBJECT_BYTES a span); returns traces released early to stay in bounds.
        `handed_over`: the message is read again after a rebalance (see `release_handed_over`)."""
        if not isinstance(spans, list):
            spans = list(spans)
        per_span = size // max(1, len(spans))
        now = self._stamp()
        early: list[Trace] = []
        by_last_seen, rooted = self._by_last_seen, self._rooted
        max_spans = self.settings.max_spans_per_trace
        for span in spans:
            trace_id = span.trace_id
            entry = by_last_seen.get(trace_id)
            if entry is None:
                if trace_id in self._rejoin or trace_id in self._released:
                    entry = self._rejoined(trace_id, _has_span(span))
                    if isinstance(entry, str):
                        late = entry is _LATE
                        self.counts[AssemblyCount.LATE_SPANS if late else AssemblyCount.DUPLICATE_SPANS] += 1
                        continue
                else:
                    entry = _Buffered(trace_id, {})
                    by_last_seen[trace_id] = entry
            elif span.span_id in entry.spans:
                self.counts[AssemblyCount.DUPLICATE_SPANS] += 1
                continue
            else:
                by_last_seen.move_to_end(trace_id)  # a new entry is already last
            if entry.rejoined is not None:
                entry.rejoined.late += 1
            if handed_over:
                entry.handed_over = True
            entry.spans[span.span_id] = span
            entry.size += per_span
            self._bytes += per_span
            entry.last_seen = now
            more = entry.more  # `entry.hold` written out: a Python call a span fewer
            if more is None:
                first = entry.partition
                if first is _NOWHERE:  # its first span
                    entry.partition, entry.offset = partition, offset
                elif first is partition or first == partition:
                    if offset < entry.offset:
                        entry.offset = offset
                else:  # a second partition: the rare trace held in a dict
                    entry.more = {first: entry.offset, partition: offset}
            elif offset < more.get(partition, offset + 1):
                more[partition] = offset
            if span.parent_span_id is None:
                entry.has_root = True
            if entry.has_root:
                if trace_id in rooted:
                    rooted.move_to_end(trace_id)
                else:
                    rooted[trace_id] = entry
            if len(entry.spans) >= max_spans:
                early += self._release(entry, Incomplete.TOO_MANY_SPANS)
        # The bounds tested here, not in a call: once a message of the unsampled path.
        settings = self.settings
        if len(by_last_seen) > settings.max_traces or self._bytes > settings.max_bytes:
            self._within_bounds(early)
        return early

    def add_events(
        self,
        events: Sequence[LogEvent],
        partition: Hashable,
        offset: int,
        size: int,
        handed_over: bool = False,
    ) -> list[Trace]:
        """Buffer the log events of one message as `add` buffers spans (each waits in its trace's entry, its
        offset held, its share of `size` counted); returns traces released early to stay in bounds."""
        per_event = size // max(1, len(events))
        now = self._stamp()
        by_last_seen, rooted, counts = self._by_last_seen, self._rooted, self.counts
        for log_event in events:
            trace_id = log_event.trace_id
            entry = by_last_seen.get(trace_id)
            if entry is None:
                if trace_id in self._rejoin or trace_id in self._released:
                    entry = self._rejoined(trace_id, _has_event(log_event))
                    if isinstance(entry, str):
                        late = entry is _LATE
                        counts[
                            AssemblyCount.LATE_LOG_EVENTS if late else AssemblyCount.DUPLICATE_LOG_EVENTS
                        ] += 1
                        continue
                else:
                    entry = _Buffered(trace_id, {})
                    by_last_seen[trace_id] = entry
            elif entry.has_event(log_event):
                counts[AssemblyCount.DUPLICATE_LOG_EVENTS] += 1
                continue
            else:
                by_last_seen.move_to_end(trace_id)
            counts[AssemblyCount.LOG_EVENTS] += 1
            if entry.rejoined is not None:
                entry.rejoined.late += 1
            if handed_over:
                entry.handed_over = True
            if entry.events is None:
                entry.events = [log_event]
            else:
                entry.events.append(log_event)
            entry.size += per_event
            self._bytes += per_event
            entry.last_seen = now
            entry.hold(partition, offset)
            if entry.has_root:  # its grace starts again, as after a span
                if trace_id in rooted:
                    rooted.move_to_end(trace_id)
                else:
                    rooted[trace_id] = entry
        return self._within_bounds([])

    def _within_bounds(self, early: list[Trace]) -> list[Trace]:
        """`early`, with the least recently fed traces released (added to it) to bring the buffer within its
        bounds."""
        while self._by_last_seen and (
            len(self._by_last_seen) > self.settings.max_traces or self._bytes > self.settings.max_bytes
        ):
            oldest = next(iter(self._by_last_seen.values()))
            early += self._release(oldest, Incomplete.EVICTED_MEMORY)
        return early

    def ready(self) -> list[Trace]:
        """Traces whose root arrived `grace_s` ago, or whose last span arrived `max_wait_s` ago."""
        now = self._clock()
        rooted, grace, remote = self._rooted, self.settings.grace_s, self.settings.wait_for_remote
        due = []  # oldest first: _rooted is in order of last span
        waiting = []
        for entry in rooted.values():
            if now - entry.last_seen < grace:
                break
            # One pass: every trace of the unsampled path is tested here.
            (waiting if remote and waits_for_remote(entry.spans) else due).append(entry)
        for entry in waiting:
            # Stays buffered; a new span puts it back in _rooted, max_wait_s releases it below.
            del rooted[entry.trace_id]
            entry.waiting = True
        out = self._release_many(due, None)  # every complete trace due, in one pass
        while self._by_last_seen:
            entry = next(iter(self._by_last_seen.values()))
            if now - entry.last_seen < self.settings.max_wait_s:
                break
            out += self._release(entry, _unfinished(entry))
        return out

    def revise(
        self, trace: Trace, interactions: Sequence[Judgeable], skips: Sequence[Skip]
    ) -> tuple[list[Revision[Judgeable]], list[Skip]]:
        """What to score and report of a released trace: everything the first time; after late spans, only
        the interactions whose question, documents or answer changed (as revisions) and new skips."""
        memory = self._rejoin.get(trace.trace_id)
        if memory is None:
            # Rebuilt by a late span read in the batch that released it, before this first reading was
            # revised: its memory, now the rebuilt trace's, records the reading.
            entry = self._by_last_seen.get(trace.trace_id)
            if entry is not None and entry.rejoined is not None and entry.rejoined.judged is None:
                memory = entry.rejoined
        if memory is None:  # not kept (rejoin memory off or full): judged as read
            return first_revisions(interactions), list(skips)
        return revise(trace, memory, interactions, skips, self.counts)

    def release_handed_over(self, partition: Hashable) -> list[Trace]:
        """The traces read again from `partition` after a rebalance, now that every message the previous owner
        had read is read again: those with their root are released without a new grace period (they waited
        at the previous owner; a rebalance every few seconds would otherwise hold them for good). A span
        still to come is a late span, as after any release."""
        out = []
        for entry in list(self._by_last_seen.values()):
            if not entry.handed_over or partition not in entry.offsets():
                continue
            entry.handed_over = False
            if entry.has_root and not (self.settings.wait_for_remote and waits_for_remote(entry.spans)):
                self.counts[AssemblyCount.RELEASED_AFTER_HANDOVER] += 1
                out += self._release(entry, None)
        return out

    def release_all(self) -> list[Trace]:
        """Everything buffered, e.g. when the stream has gone idle and no more spans are expected."""
        out: list[Trace] = []
        for entry in list(self._by_last_seen.values()):
            out += self._release(entry, _unfinished(entry))
        return out

    def clear(self) -> int:
        """Forget every buffered trace and every released one (their messages are read again, as new).
        Returns how many traces were buffered."""
        dropped = len(self._by_last_seen)
        self._by_last_seen.clear()
        self._rooted.clear()
        self._released.clear()
        self._rejoin.clear()
        self._rejoin_bytes = 0
        self._bytes = 0
        return dropped

    def revoke(self, partitions: Collection[Hashable], handed_over: Iterable[str]) -> int:
        """Partitions revoked: forget the buffered traces read from them, and the released traces
        `handed_over` (their new owner scores them; were they to come back here, they are new). Returns how
        many buffered traces were dropped.

        Other released traces stay remembered: a span of one read again (a Bloom filter's false positive of
        the handover) is a duplicate, not a trace to score again."""
        dropped = [e for e in self._by_last_seen.values() if any(p in partitions for p in e.offsets())]
        for entry in dropped:
            del self._by_last_seen[entry.trace_id]
            self._rooted.pop(entry.trace_id, None)
            self._bytes -= entry.size
        for trace_id in (*(e.trace_id for e in dropped), *handed_over):
            self._released.pop(trace_id, None)
            memory = self._rejoin.pop(trace_id, None)
            if memory is not None:
                self._rejoin_bytes -= memory.size
        return len(dropped)

    def traces_on(self, partitions: Collection[Hashable]) -> dict[Hashable, list[str]]:
        """Per partition of `partitions`, the buffered traces read from it."""
        out: dict[Hashable, list[str]] = {}
        for entry in self._by_last_seen.values():
            for partition in entry.offsets():
                if partition in partitions:
                    out.setdefault(partition, []).append(entry.trace_id)
        return out

    def low_watermarks(self) -> dict[Hashable, int]:
        """Per partition, the lowest offset a buffered trace was read from: commit no further than this."""
        marks: dict[Hashable, int] = {}
        for entry in self._by_last_seen.values():
            if entry.more is None:  # read from one partition: nearly every trace
                partition, offset = entry.partition, entry.offset
                if offset < marks.get(partition, offset + 1):
                    marks[partition] = offset
                continue
            for partition, offset in entry.more.items():
                if offset < marks.get(partition, offset + 1):
                    marks[partition] = offset
        return marks

    def _release(self, entry: _Buffered, incomplete: Incomplete | None) -> list[Trace]:
        return self._release_many((entry,), incomplete)

    def _release_many(self, entries: Sequence[_Buffered], incomplete: Incomplete | None) -> list[Trace]:
        """Release `entries`, all for one reason (`incomplete`, None: complete), each as a Trace, and remember
        them for late spans. One pass for a whole batch: every trace of the unsampled path comes here, and
        the bounds are trimmed once (the oldest first, as one at a time would). An entry of log events only
        (no span yet) gives no Trace: it is remembered, for its spans to rebuild it."""
        if not entries:
            return []
        by_last_seen, rooted, counts = self._by_last_seen, self._rooted, self.counts
        settings = self.settings
        remember, released = settings.remember_released, self._released
        kept = incomplete not in _NOT_KEPT
        # The late-span memory (`_keep`): off, or a trace bigger than its byte bound, is not kept.
        rejoin, limit, byte_limit = self._rejoin, settings.rejoin_traces, settings.rejoin_bytes
        freed = kept_bytes = 0
        out = []
        for entry in entries:
            trace_id, spans, size, memory = entry.trace_id, entry.spans, entry.size, entry.rejoined
            events = entry.events
            if events is not None:  # log events: added to their spans, the rest kept for a late span
                carried = memory.events if memory is not None else None
                events, missing = _attach(spans, events, len(carried) if carried else 0)
                if missing:
                    counts[AssemblyCount.LOG_EVENTS_WITHOUT_SPAN] += missing
            # The buffer's dict is the trace's spans by id: handed over, never changed after (a late span
            # rebuilds the trace from a copy, `_rejoined`).
            more = entry.more  # `entry.offsets()` written out: a Python call a trace fewer
            offsets = {entry.partition: entry.offset} if more is None else more
            if spans:
                out.append(Trace(trace_id, tuple(spans.values()), incomplete, offsets, spans))
            by_last_seen.pop(trace_id, None)
            rooted.pop(trace_id, None)
            freed += size
            if remember:
                released[trace_id] = None
            if kept:  # whole: a late span rebuilds it
                if memory is None:  # the entry itself (its offsets never read again)
                    memory = entry
                else:
                    memory.spans, memory.size, memory.whole = spans, size, True
                if events is not None:  # (None: the memory holds none either, `_rejoined`)
                    memory.events = events or None
            elif memory is not None:  # what was judged, for revise: no rescoring as new
                memory.spans, memory.size, memory.whole, memory.events = {}, 0, False, None
            if memory is not None and limit and memory.size <= byte_limit:
                rejoin[trace_id] = memory
                kept_bytes += memory.size
        self._bytes -= freed
        if out:  # (none: log events only)
            counts[AssemblyCount.released(incomplete)] += len(out)
            if incomplete is Incomplete.REMOTE_WORK_NOT_ARRIVED:
                counts[AssemblyCount.REMOTE_WORK_NOT_ARRIVED] += len(out)
        if remember:
            while len(released) > remember:
                released.popitem(last=False)
        if kept_bytes or len(rejoin) > limit:
            self._rejoin_bytes += kept_bytes
            self._trim_rejoin()
        return out

    def _rejoined(self, trace_id: str, held: Callable[[_Buffered], bool]) -> _Buffered | str:
        """A late span or log event of a released trace (`held`: the trace's memory has it already): buffer
        the trace again, whole, if it is still kept; else why not, for the caller to count: `_LATE` or
        `_DUPLICATE`."""
        memory = self._rejoin.get(trace_id)
        if memory is None or not memory.whole:
            # Forgotten, or read early to stay in bounds (kept only so its reading can be revised):
            # counted, never scored alone.
            return _LATE
        if held(memory):
            # A replayed message: the trace stays as it was read.
            return _DUPLICATE
        del self._rejoin[trace_id]
        self._rejoin_bytes -= memory.size
        entry = _Buffered(trace_id, spans=dict(memory.spans), size=memory.size, rejoined=memory)
        entry.has_root = any(s.parent_span_id is None for s in memory.spans.values())
        if memory.events:  # log events whose span had not arrived: counted at that release
            entry.events = list(memory.events)
        self._bytes += memory.size
        self._by_last_seen[trace_id] = entry
        return entry

    def _trim_rejoin(self) -> None:
        rejoin, settings = self._rejoin, self.settings
        while len(rejoin) > settings.rejoin_traces or self._rejoin_bytes > settings.rejoin_bytes:
            _, oldest = rejoin.popitem(last=False)
            self._rejoin_bytes -= oldest.size


def assemble_messages(values: Iterable[bytes]) -> list[Trace]:
    """The traces in `values`, messages as Kafka holds them (spans, or log records whose GenAI events join
    their spans), each read whole as the consumer reads it: for recorded traffic, with no broker."""
    assembler = TraceAssembler()
    for offset, value in enumerate(values):
        decoded = decode_message(value)
        if type(decoded) is LogEvents:
            assembler.add_events(decoded, 0, offset, len(value))
        else:
            assembler.add(decoded, 0, offset, len(value))
    return assembler.release_all()


def _has_span(span: DecodedSpan) -> Callable[[_Buffered], bool]:
    return lambda memory: span.span_id in memory.spans


def _has_event(log_event: LogEvent) -> Callable[[_Buffered], bool]:
    return lambda memory: memory.has_event(log_event)


def _attach(
    spans: dict[str, DecodedSpan], events: list[LogEvent], carried: int
) -> tuple[list[LogEvent], int]:
    """Add each log event to its span in `spans` (a new span each: spans are never changed), oldest first
    among the span's events, within `MAX_SPAN_EVENTS` and `MAX_SPAN_EVENT_BYTES` (the older ones counted in
    `events_dropped`, as the decoder counts a span's own). Returns the events whose span is not in `spans`,
    and how many of them are new (past the first `carried`, counted at an earlier release)."""
    by_span: dict[str, list[LogEvent]] = {}
    unattached: list[LogEvent] = []
    missing = 0
    for index, log_event in enumerate(events):
        if log_event.span_id in spans:
            by_span.setdefault(log_event.span_id, []).append(log_event)
        else:
            unattached.append(log_event)
            missing += index >= carried
    for span_id, added in by_span.items():
        span = spans[span_id]
        sized = [(event, _event_bytes(event)) for event in span.events]
        sized += [(log_event.event, log_event.size) for log_event in added]
        sized.sort(key=_event_time)  # stable: a span's own events keep their order
        kept: list[SpanEvent] = []
        budget = MAX_SPAN_EVENT_BYTES
        for event, size in reversed(sized):
            budget -= size
            if len(kept) == MAX_SPAN_EVENTS or budget < 0:
                break
            kept.append(event)
        kept.reverse()
        dropped = span.events_dropped + len(sized) - len(kept)
        spans[span_id] = dataclasses.replace(span, events=tuple(kept), events_dropped=dropped)
    return unattached, missing


def _event_time(sized: tuple[SpanEvent, int]) -> int:
    return sized[0].time_unix_nano


def _event_bytes(event: SpanEvent) -> int:
    """About what a span's own event took encoded (its size is not kept once decoded): its name and its
    attributes' keys and string values, 16 bytes for any other value."""
    return len(event.name) + sum(
        len(key) + (len(value) if isinstance(value, str) else 16) for key, value in event.attributes.items()
    )


def _unfinished(entry: _Buffered) -> Incomplete | None:
    """Why a trace released at its maximum wait (or at idle) is incomplete, if it is."""
    if not entry.has_root:
        return Incomplete.NO_ROOT_SPAN
    if entry.waiting and waits_for_remote(entry.spans):
        return Incomplete.REMOTE_WORK_NOT_ARRIVED
    return None
