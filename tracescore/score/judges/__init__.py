"""Judges answer metric tasks: an OpenAI-compatible LLM, or the deterministic offline judge."""

from tracescore.score.judges._protocol import Judge, JudgeError, Judgement, JudgeTask

__all__ = ["Judge", "JudgeError", "JudgeTask", "Judgement"]
