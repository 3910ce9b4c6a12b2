"""The notifications the evaluator sends, worded once: score alerts (on the rule's signal), judge health and
no data. Pure functions of what the evaluator knows; no state of their own."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Literal

from tracescore.alert._config import RuleConfig
from tracescore.alert._estimate import Estimate, Signal
from tracescore.alert._notification import AlertKey, Notification, Severity

__all__ = [
    "JUDGE_ALERT",
    "NO_DATA_ALERT",
    "Level",
    "State",
    "alert_name",
    "judge_note",
    "no_data_note",
    "score_note",
]

Level = Literal["ok", "warning", "critical"]
JUDGE_ALERT = "TracescoreJudgeUnhealthy"
NO_DATA_ALERT = "TracescoreNoData"
State = Literal["firing", "resolved"]

# What the number in a score alert is, in its summary: the rule's `signal`.
_SIGNAL_TEXT: dict[Signal, str] = {
    "score": "signal score: mean score",
    "label": "signal label: share of answers the label rule passes",
    "conversation_label": "signal conversation_label: share of conversations with no flagged turn",
    "conversation_score": "signal conversation_score: mean share of a conversation's turns that pass",
}


def alert_name(metric: str, unit: str = "answer") -> str:
    """TracescoreFaithfulnessDropped; TracescoreConversationFaithfulnessDropped for a conversation rule."""
    words = metric.split("_") if unit == "answer" else [unit, *metric.split("_")]
    return "Tracescore" + "".join(part.capitalize() for part in words) + "Dropped"


def score_note(
    key: AlertKey,
    rule: RuleConfig,
    est: Estimate | None,
    state: State,
    level: Level,
    starts_at: datetime,
    now: datetime,
    repeat: bool = False,
) -> Notification:
    threshold = rule.critical if level == "critical" else rule.warning
    n = 0 if est is None else est.n
    units = "answers" if key.unit == "answer" else "conversations"
    shown = "n/a" if est is None else est.describe()
    what = _SIGNAL_TEXT[rule.signal]
    if state == "firing":
        evidence = "no recent scores" if est is None else f"upper bound {est.upper:.2f}"
        summary = (
            f"{key.metric} of {key.service} {key.route} dropped to {shown} over {n} {units} "
            f"({what}; {evidence} < {level} threshold {threshold:.2f})"
        )
    else:
        summary = f"{key.metric} of {key.service} {key.route} recovered to {shown} over {n} {units} ({what})"
    severity: Severity = "critical" if level == "critical" else "warning"
    return Notification(
        alertname=alert_name(key.metric, key.unit),
        state=state,
        severity=severity,
        unit=key.unit,
        service=key.service,
        route=key.route,
        metric=key.metric,
        summary=summary,
        signal=rule.signal,
        value=None if est is None else est.value,
        bound=None if est is None else est.upper,
        lower=None if est is None else est.lower,
        threshold=threshold,
        samples=n,
        offline_samples=None if est is None else est.offline_n,
        llm_samples=None if est is None else est.llm_n,
        calibrated=None if est is None else est.calibrated,
        starts_at=starts_at,
        ends_at=now if state == "resolved" else None,
        repeat=repeat,
    )


def judge_note(
    key: AlertKey,
    judge: Sequence[tuple[datetime, bool, bool]],
    max_error_rate: float,
    state: State,
    starts_at: datetime,
    now: datetime,
    repeat: bool = False,
) -> Notification:
    """`judge`: the route's (time, failed, timed out) window."""
    n = len(judge)
    failed = sum(f for _, f, _ in judge)
    timeouts = sum(t for _, _, t in judge)
    rate = failed / n if n else 0.0
    summary = (
        f"judge errors on {key.service} {key.route} ({key.metric}): {failed} of {n} evaluations failed"
        f" ({timeouts} timeouts); scores are missing, not low"
        if state == "firing"
        else f"judge healthy again on {key.service} {key.route} ({key.metric}): {failed} of {n} failed"
    )
    return Notification(
        alertname=JUDGE_ALERT,
        state=state,
        severity="warning",
        service=key.service,
        route=key.route,
        metric=key.metric,
        summary=summary,
        value=rate,
        threshold=max_error_rate,
        samples=n,
        starts_at=starts_at,
        ends_at=now if state == "resolved" else None,
        repeat=repeat,
    )


def no_data_note(
    key: AlertKey,
    last_seen: datetime | None,
    state: State,
    starts_at: datetime,
    now: datetime,
    repeat: bool = False,
) -> Notification:
    seen = last_seen.astimezone(UTC).isoformat(timespec="seconds") if last_seen else "never"
    summary = (
        f"no evaluations of {key.service} {key.route} ({key.metric}) since {seen}"
        if state == "firing"
        else f"evaluations of {key.service} {key.route} ({key.metric}) arrive again"
    )
    if key.unit != "answer":
        summary = summary.replace("evaluations of", f"{key.unit} records of", 1)
    return Notification(
        alertname=NO_DATA_ALERT,
        state=state,
        severity="info",
        unit=key.unit,
        service=key.service,
        route=key.route,
        metric=key.metric,
        summary=summary,
        starts_at=starts_at,
        ends_at=now if state == "resolved" else None,
        repeat=repeat,
    )
