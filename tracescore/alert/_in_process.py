"""The consumer's own alert log: `tracescore alert`'s evaluator with one rule, its notifications logged.

A consumer sees only its partitions' share of a route, so this is a hint in the consumer's log; the alerts a
team acts on come from `tracescore alert`, which reads every consumer's records with the same logic.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tracescore.alert._config import AlertConfig, JudgeHealthConfig, RuleConfig, default_rule
from tracescore.alert._estimate import Signal
from tracescore.alert._evaluator import AlertEvaluator
from tracescore.alert._notification import Notification
from tracescore.alert._sinks import LogSink, Sink
from tracescore.model import EvaluationRecord

__all__ = ["InProcessAlerts"]


class InProcessAlerts:
    """Feed it evaluation records; it logs a notification when a route's rolling estimate (of `rule.signal`)
    crosses `rule`."""

    def __init__(self, rule: RuleConfig, sink: Sink | None = None) -> None:
        # model_construct: this is not the alert service's configuration, so TRACESCORE_ALERT_* must not
        # leak in; the rule itself was validated when it was built.
        config = AlertConfig.model_construct(rules=[rule], judge_health=JudgeHealthConfig(enabled=False))
        # The lines the evaluator logs itself (thresholds waiting, a normal learned) say whose they are too.
        note = sink.note if isinstance(sink, LogSink) else ""
        self._evaluator = AlertEvaluator(config, log_note=note)
        self._sink = sink or LogSink()

    @classmethod
    def for_threshold(
        cls, metric: str, threshold: float | None, window: int, signal: Signal | None = None
    ) -> InProcessAlerts:
        """One rule from the consumer's --alert-threshold, --alert-window and --alert-signal (None: the
        rule's default). Without a threshold, `tracescore alert`'s default rule (thresholds on a calibrated
        estimate, and the drop part), so the two never disagree on healthy traffic; a threshold given is
        that threshold alone, as ever. No timers (no-data, repeats): the consumer only reacts to the
        records it scores."""
        chosen = {} if signal is None else {"signal": signal}
        # model_construct: validated below, once the hysteresis fits the threshold.
        base = (
            default_rule()
            if threshold is None
            else RuleConfig.model_construct(warning=threshold, critical=None)
        )
        warning = base.warning
        assert warning is not None  # both have a warning threshold
        rule = RuleConfig(
            **{
                **base.model_dump(),
                **chosen,
                "metric": metric,
                "window_count": window,
                "min_samples": min(window, base.min_samples),
                "hysteresis": min(base.hysteresis, 1 - warning),
                "renotify_seconds": None,
                "no_data_seconds": None,
                "no_data_mode": "fixed",  # no no-data alert, of either kind
            }
        )
        # Logged on the alert service's logger, so each line says whose it is and how to turn it off.
        default = "the rule tracescore alert runs without a config"
        against = default if threshold is None else f"--alert-threshold {threshold:g}"
        note = (
            f" (tracescore consume's own hint: its partitions' share of the route against {against}, not "
            "tracescore alert's rules; --alert-threshold 0 turns it off)"
        )
        return cls(rule, LogSink(note=note))

    def observe(self, record: EvaluationRecord) -> list[Notification]:
        key = self._evaluator.add(record)
        if key is None:
            return []
        notifications = self._evaluator.evaluate(key, datetime.now(UTC))
        for notification in notifications:
            self._sink.send(notification)
        return notifications
