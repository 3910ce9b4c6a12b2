"""RatioSampler: a deterministic, trace-consistent share of RAG spans."""

from __future__ import annotations

import random

import pytest

from tracescore._rag_span import DecodedSpan, RagSpan
from tracescore.sample import AlwaysSample, RatioSampler, Sampler
from tracescore.score import RagRecord


def rag_span(trace_id: str, span_id: str = "b7ad6b7169203331") -> RagSpan:
    span = DecodedSpan(
        trace_id=trace_id,
        span_id=span_id,
        name="answer",
        service_name="rag-api",
        scope_name="tracescore",
        attributes={},
        end_time_unix_nano=1,
    )
    return RagSpan(span=span, record=RagRecord(query="q", contexts=("c",), answer="a"), route="/ask")


@pytest.fixture(scope="module")
def spans() -> list[RagSpan]:
    rng = random.Random(20240601)
    return [rag_span(format(rng.getrandbits(128), "032x")) for _ in range(2000)]


def test_ratio_zero_keeps_none(spans: list[RagSpan]) -> None:
    sampler = RatioSampler(0)
    assert not any(sampler.should_sample(s) for s in spans)


def test_ratio_one_keeps_all(spans: list[RagSpan]) -> None:
    sampler = RatioSampler(1)
    assert all(sampler.should_sample(s) for s in spans)
    assert sampler.should_sample(rag_span("f" * 32))


def test_ratio_half_keeps_roughly_half(spans: list[RagSpan]) -> None:
    kept = sum(RatioSampler(0.5).should_sample(s) for s in spans)
    assert 850 <= kept <= 1150


def test_decisions_are_deterministic_per_trace(spans: list[RagSpan]) -> None:
    first, second = RatioSampler(0.3), RatioSampler(0.3)
    decisions = [first.should_sample(s) for s in spans]
    assert decisions == [second.should_sample(s) for s in spans]
    assert decisions == [first.should_sample(s) for s in spans]


def test_all_spans_of_a_trace_get_the_same_decision(spans: list[RagSpan]) -> None:
    sampler = RatioSampler(0.5)
    for span in spans[:200]:
        sibling = rag_span(span.span.trace_id, span_id="00f067aa0ba902b7")
        assert sampler.should_sample(sibling) == sampler.should_sample(span)


def test_a_higher_ratio_keeps_a_superset(spans: list[RagSpan]) -> None:
    low, high = RatioSampler(0.2), RatioSampler(0.6)
    assert all(high.should_sample(s) for s in spans if low.should_sample(s))


@pytest.mark.parametrize("ratio", [-0.1, 1.01, 2, float("nan")])
def test_invalid_ratios_raise_value_error(ratio: float) -> None:
    with pytest.raises(ValueError, match="ratio"):
        RatioSampler(ratio)


def test_samplers_satisfy_the_protocol() -> None:
    assert isinstance(RatioSampler(0.5), Sampler)
    assert isinstance(AlwaysSample(), Sampler)
    assert AlwaysSample().should_sample(rag_span("0" * 32))
