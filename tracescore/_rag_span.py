"""The unit that flows from consume through sample and score to emit: a decoded span and its RAG record."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tracescore.score._types import RagRecord

__all__ = ["DecodedSpan", "RagSpan"]


@dataclass(frozen=True)
class DecodedSpan:
    trace_id: str  # lowercase hex, as in OTLP JSON
    span_id: str
    name: str
    service_name: str
    scope_name: str
    attributes: Mapping[str, Any]
    end_time_unix_nano: int


@dataclass(frozen=True)
class RagSpan:
    span: DecodedSpan
    record: RagRecord
    route: str
