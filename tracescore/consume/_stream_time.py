"""The trace assembly's clock: how far the stream has moved on, not how long the consumer took to read it.

A trace's grace (and its maximum wait) is counted on this clock. Counted on the consumer's own clock, a
consumer slower than the stream (starved of CPU, or catching up a backlog after a restart or a lag spike)
released a trace split over two polls when one batch took longer than the grace to process: the rest of its
spans, already in Kafka, then came as late spans and the trace was scored twice (a revision).

Each assigned partition has its own clock, which moves, at each poll:
- when the poll read records of the partition: by how far their record timestamps (the producer's
  CreateTime, or the broker's LogAppendTime) passed the highest read there before, but never by more than
  the consumer's clock moved since the last poll: a producer's clock running ahead (or jumping forward)
  cannot release a trace faster than real time. A timestamp later than the consumer's own clock is taken
  as that clock (a record is not written after it is read), a record without one (-1) as read now, so a
  stream without usable timestamps is counted as before, on the consumer's clock;
- when the partition has more to read (its last fetch's high watermark is past its position, e.g. paused)
  but the poll read nothing of it: not at all. The rest of a trace may be waiting there;
- when it is read to its end: as the consumer's clock, counted while the consumer waits for records (a
  poll's wait, and the time between two polls that both read nothing), not while it processes a batch:
  a trace still has its grace of real time once the consumer has caught up.

Traces are kept in one order (that of their last span), so one clock is read for all: a span is stamped with
the most advanced partition's clock (`stamp`) and a trace is due when the least advanced clock of the
partitions that are read or have more to read (`now`) is a grace past its stamp. Every partition's own
clock then moved at least the grace since the trace's last span (a partition that is idle follows `now`);
a partition behind the others holds the rest back a little longer, never releases them early.

What it cannot see: the high watermarks are those of the last fetch, so a partition that looked read to its
end while another partition's batch was being processed slowly may have had records written meanwhile; its
clock follows the others' stream time then, at most the consumer's own clock, as it was before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Hashable, Mapping
from dataclasses import dataclass

__all__ = ["StreamTime"]

# A record time this far below the highest read on its partition: the producer's clock was set back (or a
# producer with a clock far behind the others took over); the partition's time goes on from it.
_SET_BACK_S = 60.0


@dataclass(slots=True)
class _Partition:
    clock: float
    high: float | None  # the highest record time read there (s since the epoch); None: nothing read yet
    # Its clock and the consumer's when `high` was read: the stream's move since is capped by the consumer's.
    read_clock: float
    read_at: float


class StreamTime:
    """Owned by the consumer loop: `polled` after each poll; `now` and `stamp` are the assembler's clocks."""

    def __init__(
        self,
        lead_s: float = float("inf"),
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        """`lead_s`: how far a partition's clock may run ahead of `now` (the grace)."""
        self._lead_s = lead_s
        self._clock, self._wall = clock, wall
        self._polled_at: float | None = None
        self._idle = False  # the last poll read nothing
        self._now = 0.0
        self._ahead = 0.0
        self._partitions: dict[Hashable, _Partition] = {}

    def now(self) -> float:
        """The least advanced clock of the partitions being read: when traces are due."""
        return self._now

    def stamp(self) -> float:
        """The most advanced partition's clock: what a span read now is stamped with."""
        return self._ahead

    def polled(
        self,
        read: Mapping[Hashable, float | None],
        behind: Collection[Hashable],
        assigned: Collection[Hashable],
        waited_s: float,
    ) -> None:
        """One poll: per partition it read, the highest record time of what it read (seconds since the epoch,
        None: no timestamp); the partitions with more to read; those assigned; how long the poll waited."""
        at = self._clock()
        elapsed = 0.0 if self._polled_at is None else at - self._polled_at
        self._polled_at = at
        partitions = self._partitions
        for gone in [p for p in partitions if p not in assigned]:  # revoked: read again as new
            del partitions[gone]
        active: list[float] = []
        if read:
            received = self._wall()
            for partition, latest in read.items():
                latest = received if latest is None or latest < 0 else min(latest, received)
                state = partitions.get(partition)
                if state is None or state.high is None:
                    # Its first records say nothing of how far it moved: level with the most advanced.
                    clock = self._ahead if state is None else state.clock
                    partitions[partition] = state = _Partition(clock, latest, clock, at)
                elif latest > state.high:
                    # Since its highest record time was read: the stream's move, at most the consumer's.
                    moved = state.read_clock + min(latest - state.high, at - state.read_at)
                    state.clock = state.read_clock = max(state.clock, moved)
                    state.high, state.read_at = latest, at
                elif latest < state.high - _SET_BACK_S:
                    state.high, state.read_clock, state.read_at = latest, state.clock, at
                active.append(state.clock)
        for partition in behind:
            if partition in read or partition not in assigned:
                continue
            state = partitions.get(partition)
            if state is None:  # nothing read there yet: none of its traces waits
                partitions[partition] = _Partition(self._ahead, None, self._ahead, at)
            else:
                active.append(state.clock)
        if active:
            now = min(active)
        elif read or behind:
            now = self._now
        else:
            # Read to the end everywhere: real time, but a batch's processing only once a poll found nothing.
            now = self._now + (elapsed if self._idle else waited_s)
        self._idle = not read
        now = max(now, self._now)
        ahead, lead = now, now + self._lead_s
        for partition, state in partitions.items():
            if partition not in read and partition not in behind and state.clock < now:
                state.clock = now  # idle: follows the others
            elif state.clock > lead:
                # Its stream moved on faster than the slowest's (sparser traffic, read as many bytes): its
                # clock waits, or every trace, stamped with it, would wait for the slowest to cover the gap.
                state.clock = state.read_clock = lead
            if state.clock > ahead:
                ahead = state.clock
        self._now, self._ahead = now, ahead
