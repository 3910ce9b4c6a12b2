"""Sample: choose which decoded RAG spans get scored."""

from tracescore.sample._samplers import AlwaysSample, RatioSampler, Sampler

__all__ = ["AlwaysSample", "RatioSampler", "Sampler"]
