"""Samplers decide which RAG spans are worth a judge's time. Decisions depend only on the span, so every
consumer in a group makes the same decision for the same trace."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tracescore.model import Interaction

__all__ = ["AlwaysSample", "RatioSampler", "Sampler"]


@runtime_checkable
class Sampler(Protocol):
    def should_sample(self, span: Interaction) -> bool: ...


class AlwaysSample:
    def should_sample(self, span: Interaction) -> bool:
        return True


class RatioSampler:
    """Keeps `ratio` of traces, decided on the trace id's low 64 bits like OTel's TraceIdRatioBased, so all
    RAG spans of one trace are kept or dropped together."""

    def __init__(self, ratio: float) -> None:
        if not 0.0 <= ratio <= 1.0:
            raise ValueError(f"sample ratio must be within [0, 1], got {ratio}")
        self.ratio = ratio
        self._bound = round(ratio * (1 << 64))

    def should_sample(self, span: Interaction) -> bool:
        return int(span.span.trace_id[16:], 16) < self._bound
