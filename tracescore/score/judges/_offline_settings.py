"""The offline judge's settings: how much text it reads of one input (TRACESCORE_OFFLINE_JUDGE_*)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["OfflineJudgeSettings"]


class OfflineJudgeSettings(BaseSettings):
    """Every field reads TRACESCORE_OFFLINE_JUDGE_<FIELD> from the environment."""

    model_config = SettingsConfigDict(env_prefix="TRACESCORE_OFFLINE_JUDGE_", frozen=True, extra="ignore")

    # Far above a normal RAG context (a few thousand characters), so only a runaway input is cut: the
    # judge's time grows with the text (benchmarks/offline_large_context.py), and a consumer must not stall
    # for seconds on one record.
    max_context_chars: int = Field(
        default=200_000,
        ge=100,
        description="Total text in one offline judge input; longer inputs are trimmed as the LLM judge trims "
        "them, and an unsupported claim on a trimmed context is not a sure one.",
    )
