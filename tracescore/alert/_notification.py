"""What an alert says, the same for every sink: a firing or resolved notification with Prometheus-style
labels, so Alertmanager, a webhook and a Slack message all name the alert alike."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

__all__ = ["AlertKey", "Notification"]

Severity = Literal["info", "warning", "critical"]
# How a notification relates to the one sent with it: a firing alert that replaces one of another severity
# (escalated to critical, de-escalated to warning), the resolve of the severity it replaced (same word), a
# drop alert resolved because its route's level became the normal (accepted), or an alert ended because the
# config no longer watches it (unwatched: its rule lost the part, or no rule matches the route any more).
Change = Literal["escalated", "de-escalated", "accepted", "unwatched"]
# The headline of a resolve that is no recovery (a severity change's: SUPERSEDED, in `headline`).
_HEADLINES: dict[str, str] = {"unwatched": "ENDED", "accepted": "ACCEPTED"}


_SEPARATOR = "\x1f"  # ASCII unit separator: no real service, route or metric name holds one
_ESCAPED = re.compile(r"\\(\\|x1f)")


Unit = Literal["answer", "conversation"]
_UNITS: tuple[Unit, ...] = ("answer", "conversation")


class AlertKey(NamedTuple):
    service: str
    route: str
    metric: str
    # What the rule counts: answers (evaluation records) or conversations (conversation records; their
    # route is their first turn's).
    unit: Unit = "answer"

    def encode(self) -> bytes:
        """Kafka key of the routes and state topics: one partition per (service, route, metric, unit).

        Names come from span attributes, so a separator or backslash in one is escaped: two keys never
        encode alike, and every encoded key decodes (the state topic is read back at every start). An
        answer key is the three names earlier versions wrote, so an upgrade keeps its partition and state."""
        names = self if self.unit != "answer" else self[:3]
        return _SEPARATOR.join(
            name.replace("\\", "\\\\").replace(_SEPARATOR, "\\x1f") for name in names
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> AlertKey:
        """The key `encode` wrote; ValueError for anything else."""
        names = raw.decode().split(_SEPARATOR)
        if len(names) not in (3, 4) or (len(names) == 4 and names[3] not in _UNITS[1:]):
            raise ValueError(f"an alert key has 3 names, or 4 ending in a unit; this one {len(names)}")
        service, route, metric, *unit = (
            _ESCAPED.sub(lambda m: "\\" if m.group(1) == "\\" else _SEPARATOR, name) for name in names
        )
        return cls(service, route, metric, *unit)  # type: ignore[arg-type]


class Notification(BaseModel):
    alertname: str
    state: Literal["firing", "resolved"]
    severity: Severity
    service: str
    route: str
    metric: str
    summary: str
    unit: Unit = "answer"  # what the rule counts: answers, or conversations (conversation signals)
    # Score alerts: what the estimate is of, the rule's `signal` (the mean score, the share of good labels, or
    # their conversation counterparts)
    signal: Literal["score", "label", "conversation_label", "conversation_score"] | None = None
    value: float | None = None  # the window's estimate (score alerts), or the judge error rate
    bound: float | None = None  # upper confidence bound of the estimate (score alerts)
    lower: float | None = None  # lower confidence bound of the estimate (score alerts)
    threshold: float | None = None
    samples: int = 0  # interactions (score alerts) or evaluations (judge alerts)
    offline_samples: int | None = None  # offline scores and LLM scores that fed the estimate
    llm_samples: int | None = None
    calibrated: bool | None = None  # False: offline judge alone, no LLM scores to correct it
    # Drop alerts: the reference level the window is compared with (the route's normal, or its floor), how
    # many answers it holds, the drop (normal - value) and its lower confidence bound
    normal: float | None = None
    normal_samples: int | None = None
    drop: float | None = None
    drop_lower: float | None = None
    # Which test decided: the window's bound (`window`), or the CUSUM's evidence of a sustained drop
    # (`sustained`; then value and samples are the answers since the drop began)
    drop_test: Literal["window", "sustained"] | None = None
    change: Change | None = None
    from_severity: Severity | None = None  # escalated / de-escalated firing: the severity it replaces
    to_severity: Severity | None = None  # the resolve of a replaced severity: the one that replaced it
    starts_at: datetime
    ends_at: datetime | None = None  # set on resolve
    repeat: bool = False  # a re-notification of an alert already sent
    # What the person paged does first (a firing alert only): the command that shows the route's flagged
    # answers, or for a route gone quiet where to look
    first_step: str | None = None

    def labels(self) -> dict[str, str]:
        # The label names of deploy/prometheus/tracescore-rules.yaml, so both paths group and silence alike;
        # a conversation alert says so in one more (its no-data alert shares the answers' alertname).
        labels = {
            "alertname": self.alertname,
            "severity": self.severity,
            "service_name": self.service,
            "tracescore_route": self.route,
            "metric": self.metric,
            "source": "tracescore-alert",
        }
        return labels if self.unit == "answer" else {**labels, "unit": self.unit}

    @property
    def headline(self) -> str:
        """The first word a person reads: FIRING, RESOLVED, or what really happened when the severity
        changed: ESCALATED / DE-ESCALATED (the new severity firing), SUPERSEDED (the old one's resolve: the
        alert did not recover, another severity replaced it); ENDED (the config no longer watches it);
        ACCEPTED (a drop that lasted became the route's normal: no recovery either)."""
        if self.change in ("escalated", "de-escalated"):
            return self.change.upper() if self.state == "firing" else "SUPERSEDED"
        return _HEADLINES.get(self.change or "", self.state.upper())

    def to_json(self) -> dict[str, Any]:
        return {**self.model_dump(mode="json"), "headline": self.headline, "labels": self.labels()}
