"""Rolling faithfulness per (service, route): fire when the window's mean drops below a threshold, resolve
when it recovers. One alert per transition, not one per record."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, Protocol, runtime_checkable

from tracescore.emit import EvaluationRecord

__all__ = ["Alert", "LogNotifier", "Notifier", "RollingScoreAlerter"]

_log = logging.getLogger("tracescore.alert")


@dataclass(frozen=True)
class Alert:
    state: Literal["firing", "resolved"]
    service_name: str
    route: str
    metric: str
    rolling_mean: float
    threshold: float
    window: int
    at: datetime

    def summary(self) -> str:
        verb = "dropped below" if self.state == "firing" else "recovered to at least"
        return (
            f"[{self.state.upper()}] {self.metric} on {self.service_name} {self.route}: rolling mean "
            f"{self.rolling_mean:.2f} over the last {self.window} {verb} {self.threshold:.2f}"
        )


@runtime_checkable
class Notifier(Protocol):
    def notify(self, alert: Alert) -> None: ...


class LogNotifier:
    def notify(self, alert: Alert) -> None:
        (_log.warning if alert.state == "firing" else _log.info)(alert.summary())


class RollingScoreAlerter:
    """Feed it evaluation records (it ignores other metrics and unscored records)."""

    def __init__(
        self,
        notifiers: list[Notifier],
        *,
        metric: str = "faithfulness",
        threshold: float = 0.7,
        window: int = 20,
        min_samples: int = 5,
    ) -> None:
        if window < 1 or not 1 <= min_samples <= window:
            raise ValueError(
                f"need 1 <= min_samples <= window, got min_samples={min_samples}, window={window}"
            )
        self._notifiers = notifiers
        self.metric = metric
        self.threshold = threshold
        self.window = window
        self.min_samples = min_samples
        self._scores: dict[tuple[str, str], deque[float]] = {}
        self._firing: set[tuple[str, str]] = set()

    def observe(self, record: EvaluationRecord) -> Alert | None:
        if record.metric != self.metric or record.score is None:
            return None
        key = (record.service_name, record.route)
        scores = self._scores.setdefault(key, deque(maxlen=self.window))
        scores.append(record.score)
        if len(scores) < self.min_samples:
            return None
        mean = sum(scores) / len(scores)
        if mean < self.threshold and key not in self._firing:
            self._firing.add(key)
            return self._send("firing", key, mean, len(scores))
        if mean >= self.threshold and key in self._firing:
            self._firing.discard(key)
            return self._send("resolved", key, mean, len(scores))
        return None

    def firing(self) -> list[tuple[str, str]]:
        return sorted(self._firing)

    def _send(self, state: Literal["firing", "resolved"], key: tuple[str, str], mean: float, n: int) -> Alert:
        alert = Alert(state, key[0], key[1], self.metric, mean, self.threshold, n, datetime.now(UTC))
        for notifier in self._notifiers:
            notifier.notify(alert)
        return alert
