"""Sample: choose which RAG interactions get scored, and which of those the LLM judge sees."""

from tracescore._lazy import moved_names
from tracescore.sample._config import (
    AttributeFilter,
    BudgetConfig,
    CascadeConfig,
    FilterConfig,
    LearningConfig,
    LiftConfig,
    OfflineConfig,
    RateLimitConfig,
    RateRule,
    SamplingConfig,
    SamplingConfigError,
    load_sampling_config,
)
from tracescore.sample._lift import FailureShare, LiftKey, LiftReading
from tracescore.sample._policy import CascadePolicy
from tracescore.sample._protocol import Decision, Escalation, SamplingPolicy, SkipReason
from tracescore.sample._suspicion import Suspicion, suspicion

__all__ = [
    "AttributeFilter",
    "BudgetConfig",
    "CascadeConfig",
    "CascadePolicy",
    "Decision",
    "Escalation",
    "FailureShare",
    "FilterConfig",
    "LearningConfig",
    "LiftConfig",
    "LiftKey",
    "LiftReading",
    "OfflineConfig",
    "RateLimitConfig",
    "RateRule",
    "SamplingConfig",
    "SamplingConfigError",
    "SamplingPolicy",
    "SkipReason",
    "Suspicion",
    "load_sampling_config",
    "suspicion",
]

__getattr__ = moved_names(__name__, {"Selection": "tracescore.model"})
