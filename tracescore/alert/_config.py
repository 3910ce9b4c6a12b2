"""The `tracescore alert` configuration: one YAML file, validated once, with clear errors.

Precedence: command-line flags > environment variables (TRACESCORE_ALERT_..., nested with `__`) > the file >
the defaults written here (and only here).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_settings import SettingsConfigDict

from tracescore._config import ConfigFileError, ServiceSettings, one_line, read_table, unknown_name
from tracescore.alert._estimate import CONVERSATION_SIGNALS, Signal
from tracescore.alert._notification import Unit
from tracescore.model import CONVERSATIONS_TOPIC
from tracescore.score import metric_names

__all__ = [
    "AlertConfig",
    "AlertConfigError",
    "AlertmanagerSinkConfig",
    "JudgeHealthConfig",
    "LogSinkConfig",
    "RuleConfig",
    "SinkConfig",
    "SlackSinkConfig",
    "WebhookSinkConfig",
    "load_alert_config",
]


class AlertConfigError(ConfigFileError):
    """The alert configuration is impossible; the message names every problem, one per clause."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RuleConfig(_Strict):
    """Rolling alert for one metric on the (service, route) pairs it matches, on its `signal`."""

    metric: str = Field(default="faithfulness", description="The metric the rule watches.")
    signal: Signal = Field(
        default="label",
        description="label: the share of answers the metric's label rule passes (for faithfulness, the "
        "share of faithful answers); score: the mean score. Of the conversation records (`tracescore "
        "conversations`): conversation_label, the share of conversations without a flagged turn; "
        "conversation_score, the mean share of a conversation's turns that pass.",
    )
    services: list[str] = Field(default_factory=lambda: ["*"], description="fnmatch patterns")
    routes: list[str] = Field(default_factory=lambda: ["*"], description="fnmatch patterns")
    window_count: int = Field(
        default=50, ge=1, description="at most this many recent answers (conversations, for their signals)"
    )
    window_seconds: float = Field(default=900.0, gt=0, description="... no older than this")
    warning: float = Field(default=0.7, ge=0, le=1, description="Warning threshold.")
    critical: float | None = Field(
        default=0.5, ge=0, le=1, description="Critical threshold, below warning (unset: none)."
    )
    min_samples: int = Field(
        default=10, ge=1, description="With fewer answers in the window nothing fires or resolves."
    )
    # So a few unlucky answers on a noisy route do not page.
    confidence: float = Field(
        default=0.9,
        ge=0.5,
        lt=1,
        description="Fire only when the upper bound of the estimate at this one-sided confidence is below "
        "the threshold.",
    )
    hysteresis: float = Field(default=0.05, ge=0, le=0.5, description="resolve at threshold + this")
    cooldown_seconds: float = Field(default=300.0, ge=0, description="no re-fire this soon after resolve")
    renotify_seconds: float | None = Field(default=3600.0, gt=0, description="repeat while firing")
    no_data_seconds: float | None = Field(default=1800.0, gt=0, description="alert on a route gone quiet")

    @model_validator(mode="after")
    def _possible(self) -> RuleConfig:
        if self.min_samples > self.window_count:
            raise ValueError(
                f"min_samples ({self.min_samples}) exceeds window_count ({self.window_count}): never fires"
            )
        if self.critical is not None and self.critical >= self.warning:
            raise ValueError(f"critical ({self.critical}) must be below warning ({self.warning})")
        if self.warning + self.hysteresis > 1:
            raise ValueError(
                f"warning + hysteresis ({self.warning} + {self.hysteresis}) exceeds 1: could never resolve"
            )
        return self

    @property
    def unit(self) -> Unit:
        """What the rule counts: conversations for the conversation signals, else answers."""
        return "conversation" if self.signal in CONVERSATION_SIGNALS else "answer"

    def matches(self, service: str, route: str, metric: str, unit: Unit = "answer") -> bool:
        return (
            metric == self.metric
            and unit == self.unit
            and any(fnmatchcase(service, p) for p in self.services)
            and any(fnmatchcase(route, p) for p in self.routes)
        )


class JudgeHealthConfig(_Strict):
    """Judge errors are their own alert: an outage means scores are missing, not that answers got worse."""

    enabled: bool = Field(default=True, description="Alert on the share of failed evaluations.")
    window_count: int = Field(default=50, ge=1, description="At most this many recent evaluations...")
    window_seconds: float = Field(default=600.0, gt=0, description="... no older than this.")
    max_error_rate: float = Field(
        default=0.2, gt=0, le=1, description="Fire when a larger share of evaluations failed."
    )
    min_samples: int = Field(default=5, ge=1, description="With fewer evaluations nothing fires.")

    @model_validator(mode="after")
    def _possible(self) -> JudgeHealthConfig:
        if self.min_samples > self.window_count:
            raise ValueError(f"min_samples ({self.min_samples}) exceeds window_count ({self.window_count})")
        return self


class _HttpSink(_Strict):
    url: str = Field(description="Where notifications are POSTed; redirects are not followed.")
    timeout_seconds: float = Field(default=5.0, gt=0, description="Per request.")
    max_attempts: int = Field(
        default=3, ge=1, le=10, description="Tries on transient failures (connection, timeout, 5xx, 429)."
    )
    retry_base_seconds: float = Field(default=0.5, ge=0, description="Backoff between tries starts here.")


class LogSinkConfig(_Strict):
    type: Literal["log"] = Field(default="log", description="Log each notification (one line).")


class WebhookSinkConfig(_HttpSink):
    type: Literal["webhook"] = Field(
        default="webhook", description="JSON body, signed: X-Tracescore-Signature: sha256=<HMAC of the body>."
    )
    # Never in a file under version control.
    secret: SecretStr | None = Field(
        default=None,
        description="The HMAC key; give it in the environment (TRACESCORE_ALERT_SINKS__<n>__SECRET or "
        "secret_env).",
    )
    secret_env: str | None = Field(default=None, description="Read the HMAC key from this variable.")


class SlackSinkConfig(_HttpSink):
    type: Literal["slack"] = Field(default="slack", description="A Slack incoming webhook.")


class AlertmanagerSinkConfig(_HttpSink):
    type: Literal["alertmanager"] = Field(
        default="alertmanager", description="POST /api/v2/alerts; a resolve sets endsAt."
    )
    resend_seconds: float = Field(
        default=60.0,
        gt=0,
        description="Re-send firing alerts this often (Alertmanager resolves one nobody re-sent).",
    )


SinkConfig = Annotated[
    LogSinkConfig | WebhookSinkConfig | SlackSinkConfig | AlertmanagerSinkConfig, Field(discriminator="type")
]


class AlertConfig(ServiceSettings):
    model_config = SettingsConfigDict(
        env_prefix="TRACESCORE_ALERT_", env_nested_delimiter="__", extra="forbid", frozen=True
    )

    evaluations_topic: str = Field(default="tracescore.evaluations", description="The records to alert on.")
    conversations_topic: str = Field(
        default=CONVERSATIONS_TOPIC,
        description="The conversation records (`tracescore conversations`), read when a rule watches a "
        "conversation signal.",
    )
    group_id: str = Field(default="tracescore-alert", description="Consumer group of the alert instances.")
    routes_topic: str = Field(
        default="tracescore.alert.routes",
        description="The records again, keyed by (service, route, metric), so each alert instance owns "
        "whole routes however many instances run.",
    )
    routes_partitions: int = Field(default=6, ge=1, description="Partitions of the routes topic.")
    state_topic: str = Field(
        default="tracescore.alert.changelog",
        description="Compacted, partitioned like the routes topic (an alert's state on its route's partition "
        "number): the last notified state per alert, so a restart neither repeats nor forgets alerts.",
    )
    legacy_state_topic: str | None = Field(
        default="tracescore.alert.state",
        description="The single-partition state topic of versions before the partitioned one: read once, "
        "when a partition of state_topic is first used, to carry its alerts over; unset: none.",
    )
    max_routes: int = Field(default=10_000, ge=1, description="oldest idle routes beyond this are evicted")
    tick_seconds: float = Field(default=5.0, gt=0, description="how often time-based conditions are checked")
    extra_metrics: list[str] = Field(default_factory=list, description="custom metric names to accept")
    rules: list[RuleConfig] = Field(
        default_factory=lambda: [RuleConfig()],
        description="The first rule matching (service, route, metric) applies.",
    )
    judge_health: JudgeHealthConfig = Field(
        default_factory=JudgeHealthConfig, description="TracescoreJudgeUnhealthy: scores missing, not low."
    )
    sinks: list[SinkConfig] = Field(
        default_factory=lambda: [LogSinkConfig()], description="Where notifications go."
    )

    @model_validator(mode="after")
    def _known_metrics(self) -> AlertConfig:
        known = {*metric_names(), *self.extra_metrics}
        unknown = [
            f"rules.{index}.metric: {unknown_name('metric', rule.metric, known)}"
            for index, rule in enumerate(self.rules)
            if rule.metric not in known
        ]
        if unknown:
            raise ValueError(f"{'; '.join(unknown)}; list custom metrics under extra_metrics")
        return self

    def rule_for(self, service: str, route: str, metric: str, unit: Unit = "answer") -> RuleConfig | None:
        """The first rule matching, so specific rules go before catch-alls."""
        return next((r for r in self.rules if r.matches(service, route, metric, unit)), None)

    @property
    def watches_conversations(self) -> bool:
        return any(rule.unit == "conversation" for rule in self.rules)


def load_alert_config(path: Path | None = None, **flags: Any) -> AlertConfig:
    """The configuration from flags (None means not given), the environment, `path` and the defaults."""
    given = {k: v for k, v in flags.items() if v is not None}
    file_values = read_table(path, "alert", AlertConfigError) if path is not None else {}
    try:
        return AlertConfig.from_sources(given, file_values)
    except ValidationError as exc:
        where = f" in {path}" if path else ""
        raise AlertConfigError(f"invalid alert config{where}: {one_line(exc, AlertConfig)}") from exc
