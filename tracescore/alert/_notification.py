"""What an alert says, the same for every sink: a firing or resolved notification with Prometheus-style
labels, so Alertmanager, a webhook and a Slack message all name the alert alike."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

__all__ = ["AlertKey", "Notification"]

Severity = Literal["info", "warning", "critical"]


_SEPARATOR = "\x1f"  # ASCII unit separator: no real service, route or metric name holds one
_ESCAPED = re.compile(r"\\(\\|x1f)")


class AlertKey(NamedTuple):
    service: str
    route: str
    metric: str

    def encode(self) -> bytes:
        """Kafka key of the routes and state topics: one partition per (service, route, metric).

        Names come from span attributes, so a separator or backslash in one is escaped: two keys never
        encode alike, and every encoded key decodes (the state topic is read back at every start)."""
        return _SEPARATOR.join(
            name.replace("\\", "\\\\").replace(_SEPARATOR, "\\x1f") for name in self
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> AlertKey:
        """The key `encode` wrote; ValueError for anything else."""
        names = raw.decode().split(_SEPARATOR)
        if len(names) != 3:
            raise ValueError(f"an alert key has 3 names, this one {len(names)}")
        service, route, metric = (
            _ESCAPED.sub(lambda m: "\\" if m.group(1) == "\\" else _SEPARATOR, name) for name in names
        )
        return cls(service, route, metric)


class Notification(BaseModel):
    alertname: str
    state: Literal["firing", "resolved"]
    severity: Severity
    service: str
    route: str
    metric: str
    summary: str
    # Score alerts: what the estimate is of, the rule's `signal` (the mean score, or the share of good labels)
    signal: Literal["score", "label"] | None = None
    value: float | None = None  # the window's estimate (score alerts), or the judge error rate
    bound: float | None = None  # upper confidence bound of the estimate (score alerts)
    lower: float | None = None  # lower confidence bound of the estimate (score alerts)
    threshold: float | None = None
    samples: int = 0  # interactions (score alerts) or evaluations (judge alerts)
    offline_samples: int | None = None  # offline scores and LLM scores that fed the estimate
    llm_samples: int | None = None
    calibrated: bool | None = None  # False: offline judge alone, no LLM scores to correct it
    starts_at: datetime
    ends_at: datetime | None = None  # set on resolve
    repeat: bool = False  # a re-notification of an alert already sent

    @property
    def fingerprint(self) -> str:
        return "|".join((self.alertname, self.severity, self.service, self.route, self.metric))

    def labels(self) -> dict[str, str]:
        # The label names of deploy/prometheus/tracescore-rules.yaml, so both paths group and silence alike.
        return {
            "alertname": self.alertname,
            "severity": self.severity,
            "service_name": self.service,
            "tracescore_route": self.route,
            "metric": self.metric,
            "source": "tracescore-alert",
        }

    def to_json(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "labels": self.labels()}
