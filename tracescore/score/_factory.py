"""Build judges and metrics from names, as the CLI and config files spell them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracescore.score.judges._protocol import Judge
from tracescore.score.metrics._faithfulness import Faithfulness
from tracescore.score.metrics._protocol import Metric

__all__ = ["METRICS", "make_judge", "make_metrics"]

METRICS: dict[str, Callable[[], Metric]] = {"faithfulness": Faithfulness}


def make_metrics(names: Sequence[str]) -> list[Metric]:
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(sorted(METRICS))}")
    return [METRICS[name]() for name in names]


def make_judge(kind: str, *, model: str | None = None, base_url: str | None = None) -> Judge:
    if kind == "offline":
        from tracescore.score.judges._offline import OfflineJudge

        return OfflineJudge()
    if kind == "openai":
        from tracescore.score.judges._openai import OpenAIJudge, OpenAIJudgeSettings

        overrides = {k: v for k, v in {"model": model, "base_url": base_url}.items() if v is not None}
        return OpenAIJudge(OpenAIJudgeSettings(**overrides))
    raise ValueError(f"unknown judge {kind!r}; use 'offline' or 'openai'")
