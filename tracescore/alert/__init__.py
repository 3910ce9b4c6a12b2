"""Alert: rolling scores per service and route -> notifications (log, webhook, Slack, Alertmanager).

`InProcessAlerts` is the consumer's in-process log alert (the same evaluator, one rule); `AlertService`
(`tracescore alert`) is the group-wide alerting service reading the evaluation records.
"""

from tracescore.alert._config import (
    AlertConfig,
    AlertConfigError,
    AlertmanagerSinkConfig,
    DropConfig,
    JudgeHealthConfig,
    LogSinkConfig,
    RuleConfig,
    SlackSinkConfig,
    WebhookSinkConfig,
    default_rule,
    load_alert_config,
)
from tracescore.alert._drop import DropReading
from tracescore.alert._estimate import Agreement, Estimate
from tracescore.alert._evaluator import AlertEvaluator
from tracescore.alert._in_process import InProcessAlerts
from tracescore.alert._notification import AlertKey, Notification
from tracescore.alert._service import AlertService, AlertStats, start_line
from tracescore.alert._sinks import (
    SIGNATURE_HEADER,
    AlertmanagerSink,
    LogSink,
    Sink,
    SlackSink,
    WebhookSink,
    make_sink,
    sign,
)
from tracescore.alert._standing import Standing, describe_routes, stop_summary
from tracescore.alert._state import AlertState, DropState
from tracescore.alert._window import EstimateWindow

__all__ = [
    "SIGNATURE_HEADER",
    "Agreement",
    "AlertConfig",
    "AlertConfigError",
    "AlertEvaluator",
    "AlertKey",
    "AlertService",
    "AlertState",
    "AlertStats",
    "AlertmanagerSink",
    "AlertmanagerSinkConfig",
    "DropConfig",
    "DropReading",
    "DropState",
    "Estimate",
    "EstimateWindow",
    "InProcessAlerts",
    "JudgeHealthConfig",
    "LogSink",
    "LogSinkConfig",
    "Notification",
    "RuleConfig",
    "Sink",
    "SlackSink",
    "SlackSinkConfig",
    "Standing",
    "WebhookSink",
    "WebhookSinkConfig",
    "default_rule",
    "describe_routes",
    "load_alert_config",
    "make_sink",
    "sign",
    "start_line",
    "stop_summary",
]
