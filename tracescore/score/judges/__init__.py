"""Judges answer metric tasks: an OpenAI-compatible LLM, or the deterministic offline judge.

The judges themselves are imported on first use: the protocol is all a metric needs, and the LLM judge
brings the `openai` client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracescore._lazy import lazy_exports
from tracescore.score.judges._protocol import Judge, JudgeError, Judgement, JudgeTask

# The lazy names, typed for checkers and IDEs (Jupyter completes with jedi): `X as X` re-exports them.
if TYPE_CHECKING:
    from tracescore.score.judges._embeddings import OpenAIEmbedder as OpenAIEmbedder
    from tracescore.score.judges._embeddings import OpenAIEmbedderSettings as OpenAIEmbedderSettings
    from tracescore.score.judges._offline import OfflineJudge as OfflineJudge
    from tracescore.score.judges._offline import OfflineTuning as OfflineTuning
    from tracescore.score.judges._offline_settings import OfflineJudgeSettings as OfflineJudgeSettings
    from tracescore.score.judges._openai import OpenAIJudge as OpenAIJudge
    from tracescore.score.judges._openai_settings import MissingApiKey as MissingApiKey
    from tracescore.score.judges._openai_settings import OpenAIJudgeSettings as OpenAIJudgeSettings


_LAZY = {
    "OfflineJudge": "tracescore.score.judges._offline",
    "OfflineTuning": "tracescore.score.judges._offline",
    "OfflineJudgeSettings": "tracescore.score.judges._offline_settings",
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
    "OfflineJudgeSettings",
    "OfflineTuning",
    "OpenAIEmbedder",
    "OpenAIEmbedderSettings",
    "OpenAIJudge",
    "OpenAIJudgeSettings",
]
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, extra="consumer")
