"""Embeddings for answer relevancy: any OpenAI-compatible /v1/embeddings endpoint."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:  # the client is imported when one is made: every metric imports the Embedder protocol
    import openai

__all__ = ["Embedder", "OpenAIEmbedder", "OpenAIEmbedderSettings", "embedder_from_env"]


@runtime_checkable
class Embedder(Protocol):
    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbedderSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRACESCORE_EMBEDDINGS_")

    base_url: str | None = Field(
        default=None, description="OpenAI-compatible embeddings endpoint (unset: the OpenAI API)."
    )
    model: str = Field(default="text-embedding-3-small", description="Embedding model.")
    api_key: str | None = Field(default=None, description="API key (a local endpoint needs none).")
    timeout_s: float = Field(default=30.0, description="Per request.")
    max_retries: int = Field(default=3, description="The openai client's retries (429, 5xx, timeouts).")


class OpenAIEmbedder:
    """One request per call, all texts batched. Retries are the openai client's own (429/5xx/timeouts)."""

    def __init__(
        self, settings: OpenAIEmbedderSettings | None = None, *, client: openai.AsyncOpenAI | None = None
    ):
        self.settings = settings or OpenAIEmbedderSettings()
        self._client = client

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        client = self._client or self._new_client()
        try:
            response = await client.embeddings.create(model=self.settings.model, input=list(texts))
        finally:
            if self._client is None:
                await client.close()
        return [item.embedding for item in sorted(response.data, key=lambda d: d.index)]

    def _new_client(self) -> openai.AsyncOpenAI:
        import openai

        s = self.settings
        # A local endpoint needs no key; the openai client insists on one, so a placeholder is passed.
        key = s.api_key or (None if s.base_url is None else "unused")
        return openai.AsyncOpenAI(
            base_url=s.base_url, api_key=key, timeout=s.timeout_s, max_retries=s.max_retries
        )


def embedder_from_env() -> OpenAIEmbedder | None:
    """An embedder when TRACESCORE_EMBEDDINGS_MODEL or _BASE_URL is set (the CLI's way to switch answer
    relevancy to reverse questions + cosine similarity), else None (the judge's direct rating)."""
    if os.environ.get("TRACESCORE_EMBEDDINGS_MODEL") or os.environ.get("TRACESCORE_EMBEDDINGS_BASE_URL"):
        return OpenAIEmbedder()
    return None
