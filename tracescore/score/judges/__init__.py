"""Judges answer metric tasks: an OpenAI-compatible LLM, or the deterministic offline judge.

The judges themselves are imported on first use: the protocol is all a metric needs, and the LLM judge
brings the `openai` client.
"""

from __future__ import annotations

from tracescore._lazy import lazy_exports
from tracescore.score.judges._protocol import Judge, JudgeError, Judgement, JudgeTask

_LAZY = {
    "OfflineJudge": "tracescore.score.judges._offline",
    "OfflineTuning": "tracescore.score.judges._offline",
    "OpenAIJudge": "tracescore.score.judges._openai",
    "OpenAIJudgeSettings": "tracescore.score.judges._openai_settings",
    "MissingApiKey": "tracescore.score.judges._openai_settings",
    "OpenAIEmbedder": "tracescore.score.judges._embeddings",
    "OpenAIEmbedderSettings": "tracescore.score.judges._embeddings",
}

__all__ = [
    "Judge",
    "JudgeError",
    "JudgeTask",
    "Judgement",
    "MissingApiKey",
    "OfflineJudge",
    "OfflineTuning",
    "OpenAIEmbedder",
    "OpenAIEmbedderSettings",
    "OpenAIJudge",
    "OpenAIJudgeSettings",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, extra="consumer")
