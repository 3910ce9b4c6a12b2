"""Interactions for the sampling tests: `make_interaction(trace_id, ...)` and 2,000 random `trace_ids`."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from tracescore.model import DecodedSpan, Interaction, RagRecord

MakeInteraction = Callable[..., Interaction]


def _interaction(
    trace_id: str,
    *,
    service: str = "rag-api",
    route: str = "/ask",
    attributes: Mapping[str, Any] | None = None,
    answer: str = "a",
) -> Interaction:
    span = DecodedSpan(
        trace_id=trace_id,
        span_id="b7ad6b7169203331",
        name="answer",
        service_name=service,
        scope_name="tracescore",
        attributes=dict(attributes or {}),
        end_time_unix_nano=1,
    )
    return Interaction(span=span, record=RagRecord(query="q", contexts=("c",), answer=answer), route=route)


@pytest.fixture
def make_interaction() -> MakeInteraction:
    return _interaction


@pytest.fixture(scope="session")
def trace_ids() -> list[str]:
    rng = random.Random(20240601)
    return [format(rng.getrandbits(128), "032x") for _ in range(2000)]
