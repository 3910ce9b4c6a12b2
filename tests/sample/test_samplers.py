"""RatioSampler: a deterministic, trace-consistent share of RAG spans."""

from __future__ import annotations

import random

import pytest

from tracescore.model import DecodedSpan, Interaction
from tracescore.sample import AlwaysSample, RatioSampler
from tracescore.score import RagRecord


def rag_span(trace_id: str, span_id: str = "b7ad6b7169203331") -> Interaction:
    span = DecodedSpan(
        trace_id=trace_id,
        span_id=span_id,
        name="answer",
        service_name="rag-api",
        scope_name="tracescore",
        attributes={},
        end_time_unix_nano=1,
    )
    return Interaction(span=span, record=RagRecord(query="q", contexts=("c",), answer="a"), route="/ask")


@pytest.fixture(scope="module")
def spans() -> list[Interaction]:
    rng = random.Random(20240601)
    return [rag_span(format(rng.getrandbits(128), "032x")) for _ in range(2000)]


def test_ratio_zero_keeps_none(spans: list[Interaction]) -> None:
    sampler = RatioSampler(0)
    assert not any(sampler.should_sample(s) for s in spans)


def test_ratio_one_keeps_all(spans: list[Interaction]) -> None:
    sampler = RatioSampler(1)
    assert all(sampler.should_sample(s) for s in spans)
    assert sampler.should_sample(rag_span("f" * 32))


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_the_ratio_is_respected_over_many_traces(spans: list[Interaction], ratio: float) -> None:
    kept = sum(RatioSampler(ratio).should_sample(s) for s in spans)
    # 2000 traces: the binomial standard deviation is at most ~22, so +-5% (100) is over 4 sigma.
    assert abs(kept - ratio * len(spans)) <= 100, f"kept {kept} of {len(spans)} at ratio {ratio}"


def test_decisions_match_otel_trace_id_ratio_sampling(spans: list[Interaction]) -> None:
    # An app that head-samples with TraceIdRatioBased(r) and a consumer at the same r keep the same traces.
    from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

    for ratio in (0.05, 0.3, 0.75):
        ours, otel = RatioSampler(ratio), TraceIdRatioBased(ratio)
        for span in spans:
            theirs = otel.should_sample(None, int(span.span.trace_id, 16), "answer").decision
            assert ours.should_sample(span) == (theirs is Decision.RECORD_AND_SAMPLE), span.span.trace_id


def test_the_decision_depends_on_the_low_64_bits_of_the_trace_id() -> None:
    sampler = RatioSampler(0.5)
    low_kept, low_dropped = "0" * 16, "f" * 16
    for high in ("0" * 16, "f" * 16, "4bf92f3577b34da6"):
        assert sampler.should_sample(rag_span(high + low_kept))
        assert not sampler.should_sample(rag_span(high + low_dropped))


def test_decisions_are_deterministic_per_trace(spans: list[Interaction]) -> None:
    first, second = RatioSampler(0.3), RatioSampler(0.3)
    decisions = [first.should_sample(s) for s in spans]
    assert decisions == [second.should_sample(s) for s in spans]
    assert decisions == [first.should_sample(s) for s in spans]


def test_all_spans_of_a_trace_get_the_same_decision(spans: list[Interaction]) -> None:
    sampler = RatioSampler(0.5)
    for span in spans[:200]:
        sibling = rag_span(span.span.trace_id, span_id="00f067aa0ba902b7")
        assert sampler.should_sample(sibling) == sampler.should_sample(span)


def test_a_higher_ratio_keeps_a_superset(spans: list[Interaction]) -> None:
    low, high = RatioSampler(0.2), RatioSampler(0.6)
    assert all(high.should_sample(s) for s in spans if low.should_sample(s))


@pytest.mark.parametrize("ratio", [-0.1, 1.01, 2, float("nan")])
def test_invalid_ratios_raise_value_error(ratio: float) -> None:
    with pytest.raises(ValueError, match="ratio"):
        RatioSampler(ratio)


def test_always_sample_keeps_every_span(spans: list[Interaction]) -> None:
    sampler = AlwaysSample()
    assert all(sampler.should_sample(s) for s in spans)
    assert sampler.should_sample(rag_span("0" * 32)) and sampler.should_sample(rag_span("f" * 32))
