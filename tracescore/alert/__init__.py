"""Alert: watch rolling scores per service and route and notify when they drop."""

from tracescore.alert._rolling import Alert, LogNotifier, Notifier, RollingScoreAlerter

__all__ = ["Alert", "LogNotifier", "Notifier", "RollingScoreAlerter"]
