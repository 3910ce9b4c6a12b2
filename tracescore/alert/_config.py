"""The `tracescore alert` configuration: one YAML file, validated once, with clear errors.

Precedence: command-line flags > environment variables (TRACESCORE_ALERT_..., nested with `__`) > the file >
the defaults written here (and only here).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import SettingsConfigDict

from tracescore._config import (
    ConfigFileError,
    ServiceSettings,
    group_topic_field,
    load_service_settings,
    unknown_name,
)
from tracescore.alert._durations import span
from tracescore.alert._estimate import CONVERSATION_SIGNALS, TUNING_PAIRS, Estimate, Signal
from tracescore.alert._notification import Unit
from tracescore.model import CONVERSATIONS_TOPIC, EVALUATIONS_TOPIC, FAITHFULNESS
from tracescore.score import metric_names

__all__ = [
    "THRESHOLDS_WAIT",
    "AlertConfig",
    "AlertConfigError",
    "AlertmanagerSinkConfig",
    "DropConfig",
    "JudgeHealthConfig",
    "LogSinkConfig",
    "RuleConfig",
    "SinkConfig",
    "SlackSinkConfig",
    "WebhookSinkConfig",
    "default_rule",
    "load_alert_config",
]


class AlertConfigError(ConfigFileError):
    """The alert configuration is impossible; the message names every problem, one per clause."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_DAY = 86_400.0
_MAX_WAITING = 10_000  # a drop rule's state lists the rule's window's uncounted answers (16-byte hashes)


class DropConfig(_Strict):
    """A drop rule: the route's recent answers (`window_count`, `window_seconds`) against its own trailing
    normal (the `normal_count` answers before them, no older than `normal_seconds`); it fires when the
    window's estimate is, at `confidence`, at least `min_drop` below the normal (docs, Alerting)."""

    min_drop: float = Field(
        default=0.02,
        description="Warning: the window is credibly at least this far below the normal (above 0, below 1), "
        "in the estimate's units (with the offline judge alone, its pass rate: a drop of the true share "
        "shows there times the judge's sensitivity + specificity - 1).",
    )
    critical_drop: float | None = Field(
        default=None, description="Critical: at least this far (unset: none)."
    )
    confidence: float = Field(
        default=0.9999,
        ge=0.5,
        lt=1,
        description="One-sided confidence of the bound on the drop. High: the test runs on every answer.",
    )
    window_count: int = Field(default=2000, ge=1, description="The window: the route's last answers...")
    window_seconds: float = Field(default=_DAY, gt=0, description="... no older than this.")
    min_samples: int = Field(
        default=100, ge=1, description="Fewer answers in the window: no fire, no resolve."
    )
    normal_count: int = Field(
        default=7000, ge=1, description="The normal: at most this many answers before the window..."
    )
    normal_seconds: float = Field(default=7 * _DAY, gt=0, description="... no older than this.")
    min_normal_samples: int = Field(
        default=1000, ge=1, description="Fewer answers in the normal: the route is still learning it."
    )
    floor_seconds: float | None = Field(
        default=28 * _DAY,
        gt=0,
        description="The window is also compared with the best normal of this span, so a decline too slow "
        "for the normal to show is caught (unset: off).",
    )
    sustained_every: float | None = Field(
        default=250_000,
        ge=10,
        description="The sustained-drop test (a CUSUM weighing each answer against the normal, for a drop of "
        "sustained_drop): its threshold is set so that a route at its normal's lower confidence limit (1.5 "
        "standard errors below its level) pages about once per this many answers, a route above it less "
        "often, whatever the judge's pass rate (unset: off; the window test alone).",
    )
    sustained_drop: float | None = Field(
        default=None, description="The drop the sustained-drop test is designed for (unset: min_drop)."
    )
    relearn_after_seconds: float | None = Field(
        default=7 * _DAY,
        gt=0,
        description="A normal held this long (a drop firing) is given up: the current level becomes the "
        "normal and the alert resolves saying so (unset: never).",
    )

    @model_validator(mode="after")
    def _possible(self) -> DropConfig:
        for name in ("min_drop", "critical_drop", "sustained_drop"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise ValueError(
                    f"drop.{name} ({value}) must be above 0 and below 1: how far below its normal the "
                    "route's share may fall before a page (a negative drop would page on a rise, 0 on noise, "
                    "1 never)"
                )
        if self.critical_drop is not None and self.critical_drop <= self.min_drop:
            raise ValueError(
                f"drop.critical_drop ({self.critical_drop}) must be larger than drop.min_drop "
                f"({self.min_drop})"
            )
        if self.normal_count < 2 * self.window_count:
            raise ValueError(
                f"drop.normal_count ({self.normal_count}) must be at least twice drop.window_count "
                f"({self.window_count}): the normal is the route's longer history; as short as the window it "
                "is as noisy, and a drop becomes the normal as fast as it shows"
            )
        if self.normal_seconds < self.window_seconds:
            raise ValueError(
                f"drop.normal_seconds ({self.normal_seconds}) is shorter than drop.window_seconds "
                f"({self.window_seconds}): the normal would forget answers before they leave the window"
            )
        if self.min_samples > self.window_count:
            raise ValueError(
                f"drop.min_samples ({self.min_samples}) exceeds drop.window_count ({self.window_count}): "
                "never fires"
            )
        if self.min_normal_samples > self.normal_count:
            raise ValueError(
                f"drop.min_normal_samples ({self.min_normal_samples}) exceeds drop.normal_count "
                f"({self.normal_count}): the normal is never ready, never fires"
            )
        return self


# Said of a `require_calibration` rule's thresholds until the LLM judge's baseline settles the estimate.
THRESHOLDS_WAIT = "thresholds wait for the LLM judge's baseline"
_CALIBRATED = f"once calibrated ({TUNING_PAIRS} baseline pairs of the LLM judge)"


# fnmatch patterns; one may be written without a list (`routes: /billing*`), as people write one route.
# unusual: a silence improbable at the route's own rate pages (alert/_silence.py); fixed: any that long.
NoDataMode = Literal["unusual", "fixed"]
_UNUSUAL_ONLY = ("no_data_every", "no_data_rate_seconds", "no_data_min_answers")

Patterns = Annotated[list[str], BeforeValidator(lambda given: [given] if isinstance(given, str) else given)]


class RuleConfig(_Strict):
    """Rolling alert for one metric on the (service, route) pairs it matches, on its `signal`."""

    metric: str = Field(default=FAITHFULNESS, description="The metric the rule watches.")
    signal: Signal = Field(
        default="label",
        description="label: the share of answers the metric's label rule passes (for faithfulness, the "
        "share of faithful answers); score: the mean score. Of the conversation records (`tracescore "
        "conversations`): conversation_label, the share of conversations without a flagged turn; "
        "conversation_score, the mean share of a conversation's turns that pass.",
    )
    services: Patterns = Field(default_factory=lambda: ["*"], description="fnmatch patterns")
    routes: Patterns = Field(default_factory=lambda: ["*"], description="fnmatch patterns")
    window_count: int = Field(
        default=50, ge=1, description="at most this many recent answers (conversations, for their signals)"
    )
    window_seconds: float = Field(default=900.0, gt=0, description="... no older than this")
    warning: float | None = Field(
        default=0.7, ge=0, le=1, description="Warning threshold (unset: no threshold, a drop rule only)."
    )
    critical: float | None = Field(
        default=0.5, ge=0, le=1, description="Critical threshold, below warning (unset: none)."
    )
    drop: DropConfig | None = Field(
        default=None,
        description="Also (or, without thresholds, only) alert when the route falls below its own normal.",
    )
    require_calibration: bool = Field(
        default=False,
        description="The thresholds read only an estimate the LLM judge's baseline calibrates, by at "
        f"least {TUNING_PAIRS} pairs of the route (with the offline judge alone the estimate is the judge's "
        "pass rate, which on long answers sits far below the share of faithful answers; on fewer pairs the "
        "correction is a few answers' and its interval too narrow): until then the drop part alone watches "
        "the route (it needs one) and a firing threshold alert neither resolves nor escalates. The rule run "
        "without a config sets it.",
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
    no_data_seconds: float | None = Field(
        default=1800.0,
        gt=0,
        description="TracescoreNoData, on a route gone quiet: the least silence that pages (null: no no-data "
        "alert). Set without no_data_mode, it is the fixed rule of earlier versions.",
    )
    no_data_mode: NoDataMode = Field(
        default="unusual",
        description="unusual: a silence pages once it is improbable at the route's own recent rate "
        "(no_data_every), and at least no_data_seconds long; fixed: every silence of no_data_seconds pages. "
        "Unset: fixed where the rule sets no_data_seconds, else unusual.",
    )
    no_data_every: float = Field(
        default=1_000_000,
        ge=10,
        description="unusual: a silence pages once a healthy route of its rate would be that quiet at most "
        "once per this many answers (its rate's lower bound expects ln of it, 14, answers in the silence).",
    )
    no_data_rate_seconds: float = Field(
        default=3 * _DAY,
        gt=0,
        description="unusual: the route's rate is of its answers of about this span (an answer this old "
        "counts e^-1 of a new one).",
    )
    no_data_min_answers: int = Field(
        default=20,
        ge=1,
        description="unusual: with fewer answers (so weighted), or seen for less than a day (or "
        "no_data_rate_seconds if shorter), the route's rate is not known and its silence does not page.",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_data_mode(cls, given: Any) -> Any:
        if not isinstance(given, dict):
            return given
        if "no_data_mode" in given:
            if (
                given["no_data_mode"] == "unusual"
                and "no_data_seconds" in given
                and given["no_data_seconds"] is None
            ):
                raise ValueError(
                    "no_data_mode is unusual but no_data_seconds is null (no no-data alert): give the least "
                    "silence that may page (1800 by default), or leave no_data_mode out"
                )
            return given
        if "no_data_seconds" not in given:
            return given
        # A no_data_seconds written out keeps the meaning it had: every silence that long pages.
        if unusual_only := [name for name in _UNUSUAL_ONLY if name in given]:
            raise ValueError(
                f"{', '.join(unusual_only)} applies to no_data_mode unusual, and a rule that sets "
                "no_data_seconds without no_data_mode has the fixed no-data rule of earlier versions (every "
                "silence that long pages): add no_data_mode: unusual (no_data_seconds is then the least "
                "silence that pages)"
            )
        return {**given, "no_data_mode": "fixed"}

    @model_validator(mode="after")
    def _possible(self) -> RuleConfig:
        if self.warning is None:  # a drop rule only: min_samples, confidence, hysteresis are the drop's
            if self.drop is None:
                raise ValueError("the rule has no warning threshold and no drop: it could never fire")
            if self.critical is not None:
                raise ValueError(f"critical ({self.critical}) needs a warning threshold above it")
            if self.require_calibration:
                raise ValueError("require_calibration needs a warning threshold to apply")
            return self._fits_drop()
        if self.require_calibration and self.drop is None:
            raise ValueError(
                "require_calibration needs a drop part: with the offline judge alone nothing else would "
                "watch the route"
            )
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
        return self._fits_drop()

    def _fits_drop(self) -> RuleConfig:
        # The rule's window is where a drop rule's newest answers wait for all their scores.
        if self.drop is not None and self.window_count > _MAX_WAITING:
            raise ValueError(
                f"window_count ({self.window_count}) above {_MAX_WAITING} with a drop part: the answers "
                "waiting in the rule's window are kept in the route's state, which must fit a Kafka message"
            )
        if self.drop is not None and self.drop.window_count < self.window_count:
            raise ValueError(
                f"drop.window_count ({self.drop.window_count}) is below window_count ({self.window_count}): "
                "a drop rule's window holds the rule's window and older answers"
            )
        return self

    def waiting(self, estimate: Estimate) -> str | None:
        """Why the thresholds do not read `estimate` (`require_calibration`, the estimate not calibrated by
        enough of the LLM judge's baseline pairs: `Estimate.settled`); None: they read it."""
        if estimate.settled or not self.require_calibration:
            return None
        if not estimate.calibrated:
            return f"{THRESHOLDS_WAIT}: uncalibrated (offline judge only)"
        return f"{THRESHOLDS_WAIT}: {estimate.pairs} of the {TUNING_PAIRS} pairs it needs"

    @property
    def unit(self) -> Unit:
        """What the rule counts: conversations for the conversation signals, else answers."""
        return "conversation" if self.signal in CONVERSATION_SIGNALS else "answer"

    def describe(self) -> str:
        """What the rule watches and what pages, for the service's start line: `faithfulness of * /billing*:
        warning 0.7, critical 0.5, over the newest 50 answers (at least 10), and the newest 2000 against the
        7000 before them (its normal), drop 0.02 (critical 0.1), and no data for 30 minutes`."""
        signal = "" if self.signal == "label" else f" (signal {self.signal})"
        anywhere = self.services == ["*"] and self.routes == ["*"]
        where = (
            "every service and route" if anywhere else f"{','.join(self.services)} {','.join(self.routes)}"
        )
        parts = []
        if self.warning is not None:
            critical = "" if self.critical is None else f", critical {self.critical:g}"
            units = "answers" if self.unit == "answer" else "conversations"
            when = f" {_CALIBRATED}" if self.require_calibration else ""
            parts.append(
                f"warning {self.warning:g}{critical}{when}, over the newest {self.window_count} {units} "
                f"(at least {self.min_samples})"
            )
        if self.drop is not None:
            critical = "" if self.drop.critical_drop is None else f" (critical {self.drop.critical_drop:g})"
            parts.append(
                f"the newest {self.drop.window_count} against the {self.drop.normal_count} before them (its "
                f"normal), drop {self.drop.min_drop:g}{critical}"
            )
        if self.no_data_seconds is not None and self.no_data_mode == "fixed":
            # It pages too, and on every route it matches: on a platform of quiet tenants, most of all.
            parts.append(f"no data for {span(self.no_data_seconds)}")
        elif self.no_data_seconds is not None:
            parts.append(
                f"no data when the route's silence is unusual for it (as rare as 1 in "
                f"{self.no_data_every:,.0f} at its rate, and at least {span(self.no_data_seconds)})"
            )
        return f"{self.metric}{signal} of {where}: {', and '.join(parts)}"

    def matches(self, service: str, route: str, metric: str, unit: Unit = "answer") -> bool:
        return (
            metric == self.metric
            and unit == self.unit
            and any(fnmatchcase(service, p) for p in self.services)
            and any(fnmatchcase(route, p) for p in self.routes)
        )


def default_rule() -> RuleConfig:
    """The rule run without a config (`tracescore alert`, and `tracescore consume`'s own hint): every route,
    the field defaults, a drop part, and thresholds only on a calibrated estimate. A threshold on the
    offline judge's pass rate pages all day on a healthy route of long answers, so with the offline judge
    alone the route is watched against its own normal; a rule written out reads every estimate unless it
    sets `require_calibration`."""
    return RuleConfig(drop=DropConfig(), require_calibration=True)


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

    evaluations_topic: str = Field(default=EVALUATIONS_TOPIC, description="The records to alert on.")
    conversations_topic: str = Field(
        default=CONVERSATIONS_TOPIC,
        description="The conversation records (`tracescore conversations`), read when a rule watches a "
        "conversation signal.",
    )
    group_id: str = Field(
        default="tracescore-alert",
        description="Consumer group of the alert instances; its internal topics (routes_topic, state_topic) "
        "are its own.",
    )
    routes_topic: str = group_topic_field(
        "tracescore.alert.routes",
        "{group_id}.routes",
        "The records again, keyed by (service, route, metric), so each alert instance owns whole routes "
        "however many instances run.",
    )
    routes_partitions: int = Field(
        default=6,
        ge=1,
        description="Partitions of the routes topic when the service creates it: at most this many instances "
        "share the routes. A routes topic already there keeps its own count, which the service runs on, "
        "saying so at start when it differs. To change it, give routes_topic and state_topic new names (the "
        "alerts' state starts anew); partitions added to the routes topic in place (kafka-topics --alter) "
        "stop the service, running or starting.",
    )
    state_topic: str = group_topic_field(
        "tracescore.alert.changelog",
        "{group_id}.routes.changelog",
        "Compacted, partitioned like the routes topic (an alert's state on its route's partition number): "
        "the last notified state per alert, so a restart neither repeats nor forgets alerts.",
    )
    legacy_state_topic: str | None = group_topic_field(
        "tracescore.alert.state",
        None,
        "The single-partition state topic of versions before the partitioned one: read once, when a "
        "partition of state_topic is first used, to carry its alerts over; unset: none.",
    )
    max_routes: int = Field(default=10_000, ge=1, description="oldest idle routes beyond this are evicted")
    tick_seconds: float = Field(default=5.0, gt=0, description="how often time-based conditions are checked")
    extra_metrics: list[str] = Field(default_factory=list, description="custom metric names to accept")
    rules: list[RuleConfig] = Field(
        default_factory=lambda: [default_rule()],
        description="The first rule matching (service, route, metric) applies. Unset: one rule for every "
        "route, the thresholds' and the drop part's defaults with require_calibration (with the offline "
        "judge alone it watches drops only).",
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


def load_alert_config(path: str | Path | None = None, **flags: Any) -> AlertConfig:
    """The configuration from flags (None means not given), the environment, `path` and the defaults."""
    return load_service_settings(AlertConfig, "alert", AlertConfigError, path, flags)
