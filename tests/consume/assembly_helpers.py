"""What the trace assembly tests share: spans of a trace built by hand (a root, its children, remote calls)
and an assembler on a clock the test moves."""

from __future__ import annotations

import itertools

from tracescore.consume import AssemblySettings, TraceAssembler
from tracescore.model import DecodedSpan

_ids = itertools.count(1)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ROOT = "ffffffffffff0000"  # never one of the counted ids
CLIENT, SERVER = 3, 2


def span(
    trace: str,
    *,
    root: bool = False,
    sid: str | None = None,
    parent: str = ROOT,
    kind: int = 1,
    attributes: dict[str, object] | None = None,
) -> DecodedSpan:
    """A root has span id ROOT unless `sid` says otherwise; other spans are its children by default."""
    return DecodedSpan(
        trace_id=trace.ljust(32, "0"),
        span_id=sid or (ROOT if root else format(next(_ids), "016x")),
        parent_span_id=None if root else parent,
        name="s",
        service_name="svc",
        scope_name="lib",
        attributes=attributes or {},
        end_time_unix_nano=1,
        kind=kind,
    )


def assembler(**settings: float) -> tuple[TraceAssembler, Clock]:
    clock = Clock()
    return TraceAssembler(AssemblySettings(**settings), clock=clock), clock
