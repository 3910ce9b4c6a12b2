"""Build judges and metrics from names, as the CLI and config files spell them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tracescore.model import FAITHFULNESS, OFFLINE_JUDGE
from tracescore.score._registry import resolve_metrics
from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._protocol import Metric

__all__ = ["DEFAULT_METRICS", "make_judge", "make_metrics"]

# What `tracescore score` and `evaluate_dataset` score when not told: the three judge metrics (3 calls).
DEFAULT_METRICS = (FAITHFULNESS, "answer_relevancy", "context_relevance")


def make_metrics(names: Sequence[str], config: Path | None = None) -> list[Metric]:
    """Metrics by name: built-ins, plugins, dotted paths and those declared in `config` (TOML).
    Raises ValueError (a MetricLoadError) on a name that cannot be resolved."""
    return resolve_metrics(names, config=config)


def make_judge(kind: str, *, model: str | None = None, base_url: str | None = None) -> Judge:
    if kind == OFFLINE_JUDGE:
        from tracescore.score.judges._offline import OfflineJudge

        return OfflineJudge()
    if kind == "openai":
        from tracescore.score.judges import OpenAIJudge, OpenAIJudgeSettings

        overrides = {k: v for k, v in {"model": model, "base_url": base_url}.items() if v is not None}
        return OpenAIJudge(OpenAIJudgeSettings(**overrides))
    raise ValueError(f"unknown judge {kind!r}; use 'offline' or 'openai'")
