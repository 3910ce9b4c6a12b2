"""Hand-built traces for the edges real instrumentations rarely produce on demand (order, cycles, gaps).

Spans from the real libraries are in fixtures/ (recorded by fixtures/record.py); these cover the rest.
"""

from __future__ import annotations

import itertools
from typing import Any

from tracescore.model import DecodedSpan, Trace

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
_ids = itertools.count(1)


def span_id() -> str:
    return format(next(_ids), "016x")


def span(
    name: str,
    attributes: dict[str, Any] | None = None,
    *,
    sid: str | None = None,
    parent: str | None = None,
    scope: str = "app",
    service: str = "rag-api",
    start: int = 0,
    trace_id: str = TRACE_ID,
) -> DecodedSpan:
    return DecodedSpan(
        trace_id=trace_id,
        span_id=sid or span_id(),
        parent_span_id=parent,
        name=name,
        service_name=service,
        scope_name=scope,
        attributes=attributes or {},
        start_time_unix_nano=start,
        end_time_unix_nano=start + 1,
    )


def trace(*spans: DecodedSpan, incomplete: str | None = None) -> Trace:
    return Trace(spans[0].trace_id, tuple(spans), incomplete=incomplete)
