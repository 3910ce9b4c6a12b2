"""The seam for places evaluation records go besides Kafka (Phoenix annotations, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tracescore.model import EvaluationRecord

__all__ = ["RecordSink"]


class RecordSink(Protocol):
    """Receives the records of each processed batch after Kafka acknowledged them. A sink for a viewer
    (Phoenix) is best effort: it must not raise, and counts what it could not deliver."""

    def send(self, records: Sequence[EvaluationRecord]) -> object: ...

    def close(self, timeout_s: float | None = None) -> None:
        """Deliver what is kept, returning within `timeout_s` (the consumer's stop passes what its budget has
        left; None: the sink's own limit); what is not delivered by then is counted, not waited for."""
        ...
