"""The LLM judge's settings, apart from the judge: the command line shows their defaults (`--model`) without
loading the `openai` client."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["MissingApiKey", "OpenAIJudgeSettings"]


class MissingApiKey(ValueError):
    """No API key, and no base URL of a local server that needs none: a command says which flag and
    variables to set (`OpenAIJudgeSettings.key_variables`, `base_url_variables`)."""


class OpenAIJudgeSettings(BaseSettings):
    """Judge configuration; every field reads TRACESCORE_JUDGE_<FIELD> from the environment."""

    # populate_by_name: a keyword (a command's flag) sets a field whose variables are aliases, without the
    # field's bare name becoming a variable too (a shell's generic BASE_URL must not redirect the judge).
    model_config = SettingsConfigDict(
        env_prefix="TRACESCORE_JUDGE_", frozen=True, extra="ignore", populate_by_name=True
    )

    base_url: str | None = Field(
        default=None,
        # The one precedence of the judge's address: the flag > TRACESCORE_JUDGE_BASE_URL > OPENAI_BASE_URL.
        # Resolved here, not left to the client, so that a base URL from either variable is one (a local
        # server's needs no key).
        validation_alias=AliasChoices("TRACESCORE_JUDGE_BASE_URL", "OPENAI_BASE_URL"),
        description="OpenAI-compatible base URL; falls back to OPENAI_BASE_URL, else the OpenAI API. A local "
        "server's needs no API key.",
    )
    model: str = Field(default="gpt-4o-mini", description="Judge model.")
    api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("TRACESCORE_JUDGE_API_KEY", "OPENAI_API_KEY"),
        description="API key; falls back to OPENAI_API_KEY. Local servers take any placeholder, e.g. unused.",
    )
    timeout_s: float = Field(default=30.0, gt=0, description="Per request.")
    max_retries: int = Field(
        default=3, ge=0, description="Retries after the first attempt, on 429, 5xx and timeouts."
    )
    retry_base_s: float = Field(
        default=0.5, ge=0, description="Exponential backoff with full jitter from here..."
    )
    retry_max_s: float = Field(
        default=20.0, ge=0, description="...capped here (also caps a server's retry-after)."
    )
    concurrency: int = Field(default=8, ge=1, description="Requests in flight per judge.")
    temperature: float = Field(default=0.0, description="Sampling temperature of the judge model.")
    structured_output: Literal["json_schema", "json_object", "auto"] = Field(
        default="auto",
        description="json_schema (structured output), json_object (JSON mode, the schema in the prompt), or "
        "auto: the first, falling back to the second for servers without it.",
    )
    prompt_price_per_1m: float = Field(default=0.0, ge=0, description="USD per 1M prompt tokens, for costs.")
    completion_price_per_1m: float = Field(
        default=0.0, ge=0, description="USD per 1M completion tokens, for costs."
    )
    max_context_chars: int = Field(
        default=40_000, ge=100, description="Total text in one judge input; longer inputs are trimmed."
    )

    @classmethod
    def key_variables(cls) -> list[str]:
        """The environment variables the API key is read from, in the order they are looked at."""
        return cls._variables("api_key")

    @classmethod
    def base_url_variables(cls) -> list[str]:
        """The environment variables the base URL is read from, in the order they are looked at."""
        return cls._variables("base_url")

    @classmethod
    def _variables(cls, field: str) -> list[str]:
        alias = cls.model_fields[field].validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else ()
        return [c for c in choices if isinstance(c, str) and c.isupper()]

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.prompt_price_per_1m + completion_tokens * self.completion_price_per_1m
        ) / 1e6
