"""The sampling policy's configuration: one typed value, read once, with one precedence.

Precedence: explicit values (the CLI's flags) > `TRACESCORE_SAMPLING__*` environment variables (nested with
`__`, lists as JSON) > a TOML or YAML file > the defaults written here.
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from tracescore._config import ConfigFileError, FileSettings, one_line, read_table, unknown_name
from tracescore.model import FAITHFULNESS, Verdict

__all__ = [
    "DEFAULT_CASCADE_METRIC",
    "AttributeFilter",
    "BudgetConfig",
    "CascadeConfig",
    "FilterConfig",
    "LearningConfig",
    "LiftConfig",
    "OfflineConfig",
    "RateLimitConfig",
    "RateRule",
    "SamplingConfig",
    "SamplingConfigError",
    "load_sampling_config",
]

_GLOB_CHARS = frozenset("*?[")
DEFAULT_CASCADE_METRIC = FAITHFULNESS  # the offline result the cascade ranks by, and its LLM label


class SamplingConfigError(ConfigFileError):
    """A sampling configuration that cannot be used; the message is one line meant for the operator."""


class _Strict(BaseModel):
    # A misspelt key must fail loudly: a silently ignored rate or budget is worse than none.
    model_config = ConfigDict(extra="forbid", frozen=True)


def _specificity(pattern: str) -> tuple[int, int]:
    """(2 exact / 1 glob / 0 match-all, literal characters): how narrowly a pattern picks its target."""
    literal = sum(ch not in _GLOB_CHARS for ch in pattern)
    if not _GLOB_CHARS & set(pattern):
        return 2, literal
    return (1 if literal else 0), literal


class RateRule(_Strict):
    """Score `rate` of the interactions whose service, route and metric match these glob patterns."""

    service: str = Field(default="*", description="Glob on the service name.")
    route: str = Field(default="*", description="Glob on the route.")
    metric: str = Field(default="*", description="Glob on the metric name.")
    rate: float = Field(ge=0.0, le=1.0, description="Share of the matching interactions to score.")

    def matches(self, service: str, route: str, metric: str) -> bool:
        return (
            fnmatch.fnmatchcase(service, self.service)
            and fnmatch.fnmatchcase(route, self.route)
            and fnmatch.fnmatchcase(metric, self.metric)
        )

    @property
    def specificity(self) -> tuple[int, int]:
        # Exact beats glob beats "*", field by field summed; then more literal characters win.
        parts = [_specificity(p) for p in (self.service, self.route, self.metric)]
        return sum(kind for kind, _ in parts), sum(literal for _, literal in parts)


class AttributeFilter(_Strict):
    """Matches a span whose attribute `attribute` is present and, as text, matches one of `values` (globs);
    with no `values`, presence alone matches."""

    attribute: str = Field(min_length=1, description="Span attribute name, e.g. deployment.environment.")
    values: tuple[str, ...] = Field(
        default=(), description="Globs on the attribute's value as text; empty: presence alone matches."
    )

    def matches(self, attributes: Any) -> bool:
        value = attributes.get(self.attribute)
        if value is None:
            return False
        if not self.values:
            return True
        text = str(value).lower() if isinstance(value, bool) else str(value)
        return any(fnmatch.fnmatchcase(text, pattern) for pattern in self.values)


class FilterConfig(_Strict):
    """`include`: every filter must match for a span to be a candidate; `exclude`: any match drops it."""

    include: tuple[AttributeFilter, ...] = Field(
        default=(), description="Every filter must match for a span to be a candidate."
    )
    exclude: tuple[AttributeFilter, ...] = Field(default=(), description="Any match drops the span.")


class RateLimitConfig(_Strict):
    """At most `per_minute` evaluations a minute (a token bucket), in bursts of at most `burst`."""

    per_minute: float | None = Field(default=None, gt=0, description="Evaluations per minute at most.")
    burst: int | None = Field(default=None, ge=1, description="Largest burst [default: one minute's worth].")

    @property
    def capacity(self) -> float:
        return float(self.burst) if self.burst is not None else max(1.0, self.per_minute or 0.0)


class BudgetConfig(_Strict):
    """LLM-judge tokens (prompt + completion) per UTC clock hour and day, per consumer process. When spent,
    interactions get the offline judge only and are counted as `budget`."""

    tokens_per_hour: int | None = Field(
        default=None, ge=0, description="LLM-judge tokens per UTC clock hour, per consumer process."
    )
    tokens_per_day: int | None = Field(
        default=None, ge=0, description="LLM-judge tokens per UTC day, per consumer process."
    )
    state_path: Path | None = Field(
        default=None,
        description="Where the tokens spent in the current UTC hour and day are saved (JSON, written "
        "atomically, every 10 s of spending and on stop), so a restart, with the same budget or a new one, "
        "goes on from them; unset: a restart starts them at 0. One per process.",
    )
    # So concurrent escalations cannot all pass a nearly spent budget.
    estimated_tokens_per_evaluation: int = Field(
        default=2_000,
        ge=1,
        description="Reserved per escalation until the real figure is charged; then the running mean of "
        "charged escalations.",
    )

    @model_validator(mode="after")
    def _fits_one_evaluation(self) -> Self:
        # Otherwise every escalation would be counted as `budget` forever, which looks like a working policy.
        for name in ("tokens_per_hour", "tokens_per_day"):
            limit = getattr(self, name)
            if limit is not None and 0 < limit < self.estimated_tokens_per_evaluation:
                raise ValueError(
                    f"{name} ({limit}) is below estimated_tokens_per_evaluation "
                    f"({self.estimated_tokens_per_evaluation}): the LLM judge could never send anything"
                )
        return self


class LearningConfig(_Strict):
    """Online calibration of the suspicion score from the LLM judge's verdicts on baseline interactions."""

    enabled: bool = Field(default=True, description="Learn from the LLM judge's baseline verdicts.")
    state_path: Path | None = Field(
        default=None,
        description="Where the learned models survive a restart (versioned JSON, written atomically); unset: "
        "memory only. One per process.",
    )
    learning_rate: float = Field(default=0.05, gt=0.0, le=1.0, description="SGD step size.")
    l2: float = Field(
        default=0.02,
        ge=0.0,
        le=1.0,
        description="Pull toward the cold start: a few noisy verdicts cannot take the model far from it.",
    )
    route_min_labels: int = Field(
        default=200, ge=1, description="A service+route gets its own model from this many labels."
    )
    max_routes: int = Field(
        default=256, ge=0, description="Routes with a model of their own, at most (memory bound)."
    )
    save_every: int = Field(default=100, ge=1, description="Labels between saves (and on stop).")


class LiftConfig(_Strict):
    """The cascade checks its own lift: per service, route and answer shape (`long_answer_chars`), the share
    of targeted escalations the LLM judge fails against the share of uniform draws it fails. Until the
    targeted share is credibly higher (after a first few targeted verdicts per key), the cascade's budget
    goes to uniform draws instead (selection `uniform`), all but `floor` of it, which stays targeted so lift
    can show; it moves back when lift shows (tracescore/sample/_lift.py)."""

    enabled: bool = Field(default=True, description="Measure lift and split the budget (off: always target).")
    floor: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="Share of the cascade's budget that stays targeted without lift, so lift can show again.",
    )
    memory: int = Field(
        default=200, ge=10, description="Verdicts per group the evidence is averaged over (older ones fade)."
    )
    long_answer_chars: int = Field(
        default=300, ge=1, description="Answers longer than this are the `long` shape, measured apart."
    )
    max_routes: int = Field(
        default=1024,
        ge=1,
        description="Routes and shapes tracked, at most (least recently seen forgotten: back to exploring).",
    )


class CascadeConfig(_Strict):
    """Which offline-judged interactions go to the LLM judge.

    Cascade: every interaction gets a suspicion score, P(hallucinated) from the offline judge's `metric`
    result (sample/_calibration.py); those above `min_probability` go in order of suspicion: admitted when
    above the running quantile (over the last `window` scores) that matches what the LLM budget allows this
    hour, capped by `share` of the scored interactions (None: no cap; with no budget, all above the
    floor). With `escalate_errors`, an offline error goes too. Plus a uniform `baseline_rate` of all scored
    candidates (baseline), whatever their score, for unbiased estimates; their LLM verdicts teach the score
    (`learning`).
    Where targeting shows no lift over uniform draws, its budget goes to uniform draws (`lift`).
    """

    enabled: bool = Field(
        default=True,
        description="Run the cascade when an LLM judge is configured; false: the LLM judge is never called "
        "(only the offline judge scores; tracescore consume --no-cascade makes it score every answer).",
    )
    metric: str = Field(
        default=DEFAULT_CASCADE_METRIC, description="The offline result the suspicion score is computed from."
    )
    min_probability: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="P(hallucinated) floor: below it nothing is escalated, budget or not.",
    )
    share: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="The most of the scored interactions the cascade escalates, with a budget or without one "
        "(unset: no cap beyond the budget's pace; without a budget, all above the floor).",
    )
    window: int = Field(default=2000, ge=10, description="Recent suspicion scores the running quantile uses.")
    escalate_errors: bool = Field(default=True, description="An offline judge error goes to the LLM judge.")
    baseline_rate: float = Field(
        default=0.01,
        ge=0.0,
        le=1.0,
        description="Uniform share of candidates (by trace id) the LLM judge scores whatever their score.",
    )
    learning: LearningConfig = Field(
        default_factory=LearningConfig, description="Online calibration from the baseline's LLM verdicts."
    )
    lift: LiftConfig = Field(
        default_factory=LiftConfig, description="Lift measured online; the budget moves to uniform draws."
    )
    # Escalation ranks by the suspicion score now. Accepted (with a warning) so old configs load.
    threshold: float | None = Field(default=None, ge=0.0, le=1.0, description="Deprecated and ignored.")
    flag_verdicts: frozenset[Verdict] | None = Field(default=None, description="Deprecated and ignored.")

    @model_validator(mode="after")
    def _deprecated(self) -> Self:
        for name in ("threshold", "flag_verdicts"):
            if getattr(self, name) is not None:
                warnings.warn(
                    f"sampling cascade.{name} is deprecated and ignored: the cascade ranks interactions by "
                    "their suspicion score; use cascade.min_probability and the LLM budget instead",
                    FutureWarning,
                    stacklevel=2,
                )
        return self


class OfflineConfig(_Strict):
    """The offline judge's CPU share (in cores). When candidates arrive faster than that share can score
    them, they are thinned uniformly (by trace id) to what it can, and counted as `thinned`."""

    cpu_share: float | None = Field(
        default=None,
        gt=0,
        description="Cores the offline judge may use before candidates are thinned (unset: no limit).",
    )


class SamplingConfig(FileSettings):
    """Everything the sampling policy decides with. Rates: the most specific matching rule wins (ties: the
    first listed); no matching rule means `default_rate`."""

    model_config = SettingsConfigDict(
        env_prefix="TRACESCORE_SAMPLING__", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    default_rate: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Share of interactions scored where no rate rule matches."
    )
    rates: tuple[RateRule, ...] = Field(
        default=(), description="Rates per service / route / metric; the most specific match wins."
    )
    filters: FilterConfig = Field(default_factory=FilterConfig, description="Span attribute filters.")
    rate_limit: RateLimitConfig = Field(
        default_factory=RateLimitConfig, description="Evaluations per minute (a token bucket)."
    )
    llm_budget: BudgetConfig = Field(default_factory=BudgetConfig, description="LLM-judge token budgets.")
    cascade: CascadeConfig = Field(
        default_factory=CascadeConfig, description="Which offline-judged interactions go to the LLM judge."
    )
    offline: OfflineConfig = Field(
        default_factory=OfflineConfig, description="The offline judge's CPU share."
    )

    @field_validator("rates", mode="before")
    @classmethod
    def _rules_list(cls, value: Any) -> Any:
        # TOML and YAML give lists; a single table is a one-rule list, not an error.
        return [value] if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _budget_ordering(self) -> Self:
        hour, day = self.llm_budget.tokens_per_hour, self.llm_budget.tokens_per_day
        if hour is not None and day is not None and hour > day:
            raise ValueError(f"llm_budget.tokens_per_hour ({hour}) exceeds llm_budget.tokens_per_day ({day})")
        return self

    def unknown_metrics(self, known: Collection[str]) -> list[str]:
        """One problem per rate rule whose metric pattern matches none of the `known` metric names, and for a
        cascade metric that is not one: such a rule would silently never apply."""
        problems = [
            f"rates.{index}.metric: {unknown_name('metric', rule.metric, known)}"
            for index, rule in enumerate(self.rates)
            if not any(fnmatch.fnmatchcase(name, rule.metric) for name in known)
        ]
        if self.cascade.metric not in known:
            problems.append(f"cascade.metric: {unknown_name('metric', self.cascade.metric, known)}")
        return problems

    def rate_for(self, service: str, route: str, metric: str) -> float:
        best: RateRule | None = None
        for rule in self.rates:
            if rule.matches(service, route, metric) and (best is None or rule.specificity > best.specificity):
                best = rule
        return self.default_rate if best is None else best.rate


def load_sampling_config(
    path: str | Path | None = None, *, known_metrics: Collection[str] | None = None, **overrides: Any
) -> SamplingConfig:
    """The configuration from `overrides` > environment > the TOML/YAML file at `path` > defaults.

    The file holds the settings at its top level or under a `sampling` table. With `known_metrics` (the
    metric names the caller can run), a rule naming any other metric is an error too. Raises
    SamplingConfigError with one line naming the file, the offending key and the valid names.
    """
    source = str(path) if path is not None else "sampling settings"
    file_values = read_table(Path(path), "sampling", SamplingConfigError) if path is not None else {}
    try:
        config = SamplingConfig.from_sources(overrides, file_values)
    except ValidationError as exc:
        raise SamplingConfigError(f"{source}: {one_line(exc, SamplingConfig)}") from None
    except ValueError as exc:  # an environment value that is not valid JSON for a list or table
        raise SamplingConfigError(f"{source}: {exc}") from None
    problems = config.unknown_metrics(known_metrics) if known_metrics is not None else []
    if problems:
        raise SamplingConfigError(f"{source}: {'; '.join(problems)}")
    return config
