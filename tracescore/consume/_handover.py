"""What a committed offset tells a partition's next owner: which of the messages it reads again hold work
still to do.

A partition can only commit up to its first unfinished message (a trace still buffered, being scored, or
with outputs Kafka has not acknowledged), yet traces after that message were scored already. So every
commit carries, in the offset's metadata, a `Handover`: below offset `until`, only the traces in the filter
may still need scoring; every other span there belongs to a trace that was scored (or had nothing to score).
The next owner (after a rebalance, a stop or a crash) reads from the committed offset and keeps only those
traces' spans until `until`, so what was scored is not scored again.

The filter is a Bloom filter over trace ids: a false positive re-reads a finished trace (scored twice, as
without a handover), never drops an unfinished one. Its geometry is fixed, so filters merge by OR and the
metadata fits Kafka's default `offset.metadata.max.bytes` (4096) whatever the number of traces; with up to
~1,000 traces per partition in flight a false positive is below 1 in 10,000.

A member that is handed a partition and gives it up again before reading up to `until` passes the older
handover on behind its own: the metadata holds a few segments, each with its own `until`.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Handover", "Segment", "TraceFilter"]

_VERSION = 1
_BITS = 2880 * 8  # dense, zlib'd and base64'd this is ~3,850 characters: under Kafka's 4096 by construction
_HASHES = 7
_MAX_SEGMENTS = 4
_MAX_METADATA = 4000  # Kafka's default offset.metadata.max.bytes is 4096
_UNPACK = struct.Struct(f"<{_HASHES}I").unpack


class TraceFilter:
    """A set of trace ids that may say yes to an id it was not given, never no to one it was."""

    __slots__ = ("_bits",)

    def __init__(self, bits: bytearray | None = None) -> None:
        self._bits = bits if bits is not None else bytearray(_BITS // 8)

    @classmethod
    def of(cls, trace_ids: Iterable[str]) -> TraceFilter:
        made = cls()
        for trace_id in trace_ids:
            made.add(trace_id)
        return made

    def add(self, trace_id: str) -> None:
        bits = self._bits
        for position in _positions(trace_id):
            position %= _BITS
            bits[position >> 3] |= 1 << (position & 7)

    def __contains__(self, trace_id: str) -> bool:
        bits = self._bits
        for position in _positions(trace_id):
            position %= _BITS
            if not bits[position >> 3] & (1 << (position & 7)):
                return False
        return True

    def union(self, other: TraceFilter) -> TraceFilter:
        return TraceFilter(bytearray(a | b for a, b in zip(self._bits, other._bits, strict=True)))

    def encode(self) -> str:
        return base64.b64encode(zlib.compress(bytes(self._bits), 9)).decode("ascii")

    @classmethod
    def decode(cls, text: str) -> TraceFilter:
        bits = zlib.decompress(base64.b64decode(text, validate=True))
        if len(bits) != _BITS // 8:
            raise ValueError(f"a trace filter of {len(bits)} bytes, not {_BITS // 8}")
        return cls(bytearray(bits))


def _positions(trace_id: str) -> tuple[int, ...]:
    """`_HASHES` 32-bit hashes of the id, to take modulo `_BITS` (a bias below 1e-5). blake2b, not hash():
    the next owner is another process, and Python salts str hashes per process."""
    return _UNPACK(
        hashlib.blake2b(trace_id.encode("utf-8", "surrogatepass"), digest_size=4 * _HASHES).digest()
    )


@dataclass(frozen=True)
class Segment:
    """Offsets below `until` (and not below the previous segment's): only `traces` may be unfinished."""

    until: int
    traces: TraceFilter


@dataclass(frozen=True)
class Handover:
    """Segments in increasing `until`; at or past the last one every message is read as usual."""

    segments: tuple[Segment, ...]

    @property
    def until(self) -> int:
        return self.segments[-1].until

    def keeps(self, offset: int, trace_id: str) -> bool:
        """Whether a span of `trace_id` read at `offset` may still need scoring."""
        for segment in self.segments:
            if offset < segment.until:
                return trace_id in segment.traces
        return True

    def after(self, offset: int) -> tuple[Segment, ...]:
        """The segments still to be read by a member that read everything below `offset`."""
        return tuple(s for s in self.segments if s.until > offset)

    @classmethod
    def build(
        cls, read_up_to: int, unfinished: Iterable[str] | None, earlier: Handover | None
    ) -> Handover | None:
        """The handover of a member that read everything below `read_up_to`, of which only the traces
        `unfinished` are not finished (None: nothing is, and no message below it is to be read again), after
        an `earlier` handover it was given (its segments past `read_up_to` still apply). None: nothing to say.
        """
        own = [Segment(read_up_to, TraceFilter.of(unfinished))] if unfinished is not None else []
        segments = _fit([*own, *(earlier.after(read_up_to) if earlier is not None else ())])
        return cls(tuple(segments)) if segments else None

    def encode(self) -> str:
        return json.dumps(
            {
                "tracescore_handover": _VERSION,
                "segments": [[s.until, s.traces.encode()] for s in self.segments],
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, metadata: str | None) -> Handover | None:
        """The handover in a committed offset's metadata; None when there is none, or it is not ours.
        Raises ValueError for a handover of ours that cannot be read."""
        if not metadata or not metadata.startswith('{"tracescore_handover":'):
            return None
        try:
            document = json.loads(metadata)
            version = document.get("tracescore_handover")
            if version != _VERSION:
                raise ValueError(f"handover version {version!r}, not {_VERSION}")
            segments = tuple(
                Segment(int(until), TraceFilter.decode(text)) for until, text in document["segments"]
            )
        except (KeyError, TypeError, zlib.error) as exc:  # JSON, base64 and version errors are ValueErrors
            raise ValueError(f"not a handover: {type(exc).__name__}: {exc}") from exc
        if not segments or any(a.until >= b.until for a, b in itertools.pairwise(segments)):
            raise ValueError("handover segments out of order")
        return cls(segments)


def _fit(segments: list[Segment]) -> list[Segment]:
    """At most `_MAX_SEGMENTS`, encoding within `_MAX_METADATA`: merging two neighbours keeps every trace of
    both over both ranges (more re-read, nothing dropped)."""
    while len(segments) > 1 and (
        len(segments) > _MAX_SEGMENTS or len(Handover(tuple(segments)).encode()) > _MAX_METADATA
    ):
        last, before = segments.pop(), segments.pop()
        segments.append(Segment(last.until, before.traces.union(last.traces)))
    return segments
