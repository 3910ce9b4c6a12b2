"""The notifications the evaluator sends, worded once: score alerts (on the rule's signal), judge health and
no data. Pure functions of what the evaluator knows; no state of their own."""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from tracescore._plural import counted
from tracescore.alert._config import RuleConfig
from tracescore.alert._drop import DropReading
from tracescore.alert._durations import span
from tracescore.alert._estimate import Estimate, Signal
from tracescore.alert._notification import AlertKey, Change, Notification, Severity
from tracescore.alert._reading import PAST_RANGE
from tracescore.alert._state import AlertState, Level
from tracescore.model import CONVERSATIONS_TOPIC

__all__ = [
    "JUDGE_ALERT",
    "NO_DATA_ALERT",
    "Level",
    "State",
    "alert_name",
    "drop_note",
    "first_step",
    "judge_note",
    "no_data_note",
    "score_note",
    "span",
    "unwatched_notes",
]

JUDGE_ALERT = "TracescoreJudgeUnhealthy"
NO_DATA_ALERT = "TracescoreNoData"
State = Literal["firing", "resolved"]
Kind = Literal["threshold", "drop"]
# Records per partition the first step's `tracescore tail` starts before the end: the last minutes of a busy
# evaluations topic, without reading its whole retention first.
TAIL_LAST = 1000

# What the number in a score alert is, in its summary: the rule's `signal`.
_SIGNAL_TEXT: dict[Signal, str] = {
    "score": "signal score: mean score",
    "label": "signal label: share of answers the label rule passes",
    "conversation_label": "signal conversation_label: share of conversations with no flagged turn",
    "conversation_score": "signal conversation_score: mean share of a conversation's turns that pass",
}


def alert_name(metric: str, unit: str = "answer", kind: Kind = "threshold") -> str:
    """TracescoreFaithfulnessDropped; TracescoreConversationFaithfulnessDropped for a conversation rule;
    ...BelowNormal for a drop rule's alert (the route against its own normal)."""
    words = metric.split("_") if unit == "answer" else [unit, *metric.split("_")]
    suffix = "Dropped" if kind == "threshold" else "BelowNormal"
    return "Tracescore" + "".join(part.capitalize() for part in words) + suffix


def _change(state: State, level: Level, previous: Level | None) -> tuple[Change | None, Severity | None]:
    """How a notification relates to a severity change: (change, the other severity) or (None, None)."""
    if previous is None or previous == "ok" or previous == level:
        return None, None
    rank = {"warning": 1, "critical": 2}
    new, old = (level, previous) if state == "firing" else (previous, level)
    change: Change = "escalated" if rank[new] > rank[old] else "de-escalated"
    return change, previous  # type: ignore[return-value]


def score_note(
    key: AlertKey,
    rule: RuleConfig,
    est: Estimate | None,
    state: State,
    level: Level,
    starts_at: datetime,
    now: datetime,
    repeat: bool = False,
    other: Level | None = None,
) -> Notification:
    """A threshold alert. `other`: on a severity change, the level it replaces (firing) or that replaces it
    (resolved)."""
    threshold = rule.critical if level == "critical" else rule.warning
    n = 0 if est is None else est.n
    over = counted(n, key.unit)  # "1 answer", "12 conversations"
    shown = "n/a" if est is None else est.describe()
    what = _SIGNAL_TEXT[rule.signal]
    change, other_severity = _change(state, level, other)
    subject = f"{key.metric} of {key.service} {key.route}"
    unread = _unread(rule, est, key.unit)
    if state == "firing" and threshold is None:  # taken out of the rule while it fired, its window unread
        summary = (
            f"{subject} still {level}: its rule has no {level} threshold any more, and it resolves at the "
            f"next reading of its window ({unread}; {what})"
        )
    elif state == "firing" and unread is not None:  # a reminder or re-send: the level holds, unread
        summary = (
            f"{subject} still {level}, below the {level} threshold {threshold:.2f} when last read: {unread}, "
            f"so nothing shows it recovered yet ({what})"
        )
    elif state == "firing":
        assert est is not None
        evidence = _against(est.upper, threshold, level, rule.hysteresis)  # type: ignore[arg-type]
        if change == "de-escalated":
            back = (rule.warning or 0.0) + rule.hysteresis
            summary = (
                f"{subject} de-escalated from critical to warning: up to {shown} over {over}, "
                f"above the critical threshold {rule.critical:.2f} but not recovered (resolves at "
                f"{back:.2f}; {what})"
            )
        else:
            verb = "escalated from warning to critical: fell further to" if change else "dropped to"
            summary = f"{subject} {verb} {shown} over {over} ({what}; {evidence})"
    elif change == "escalated":
        summary = (
            f"{subject}: warning superseded by critical, it fell further to {shown} over {over} "
            f"(not recovered; {what})"
        )
    elif change == "de-escalated":
        summary = (
            f"{subject}: critical superseded by warning, up to {shown} over {over} but still firing as "
            f"warning (not recovered; {what})"
        )
    else:
        summary = f"{subject} recovered to {shown} over {over} ({what})"
    name = alert_name(key.metric, key.unit, "threshold")
    return _note(
        key, name, state, _severity(level), summary, starts_at, now, repeat,
        **_rule_fields(key, rule, state, change, other_severity),
        value=None if est is None else est.shown,
        bound=None if est is None else est.upper,
        lower=None if est is None else est.lower,
        threshold=threshold,
        samples=n,
        offline_samples=None if est is None else est.offline_n,
        llm_samples=None if est is None else est.llm_n,
        calibrated=None if est is None else est.calibrated,
    )  # fmt: skip


def _unread(rule: RuleConfig, est: Estimate | None, unit: str) -> str | None:
    """Why the thresholds cannot read the window now (a firing alert then holds its level: a reminder must
    not read as a fresh measurement); None: they read it."""
    if est is None:
        return f"no {unit}s in its window (the last {span(rule.window_seconds)})"
    if est.n < rule.min_samples:
        return f"only {counted(est.n, unit)} in its window, fewer than the {rule.min_samples} it reads"
    return rule.waiting(est)


def _against(upper: float, threshold: float, level: Level, hysteresis: float) -> str:
    """The upper bound against the threshold, in as many digits as it takes to read as compared (0.696
    against 0.70 read "0.70 < 0.70"); a level held by its hysteresis says so."""
    if upper >= threshold:
        return (
            f"upper bound {upper:.2f}, no longer below the {level} threshold {threshold:.2f}: held until it "
            f"is back at {threshold + hysteresis:.2f}"
        )
    for digits in (2, 3, 4):
        bound, limit = f"{upper:.{digits}f}", f"{threshold:.{digits}f}"
        if float(bound) < float(limit):
            break
    return f"upper bound {bound} < {level} threshold {limit}"


def drop_note(
    key: AlertKey,
    rule: RuleConfig,
    reading: DropReading,
    state: State,
    level: Level,
    starts_at: datetime,
    now: datetime,
    repeat: bool = False,
    other: Level | None = None,
    *,
    accepted: bool = False,
) -> Notification:
    """A drop rule's alert: the route's window against its normal (or floor), in the figures the test read
    (`DropReading.figures`: the drop is the difference of the levels shown), alike in the summary and the
    fields."""
    drop = rule.drop
    assert drop is not None
    minimum = drop.critical_drop if level == "critical" else drop.min_drop
    assert minimum is not None
    units = "answers" if key.unit == "answer" else "conversations"
    subject = f"{key.metric} of {key.service} {key.route}"
    tag = "" if reading.calibrated else ", uncalibrated: offline judge only"
    against = "its normal"
    if reading.reference == "floor":
        against = f"its best normal of the last {span(drop.floor_seconds)}"
    figures = reading.figures()
    past = ""
    if figures.past_range:
        past = f"; {PAST_RANGE}, the drop between the two levels is what is tested"
    levels = (
        f"{figures.window} over {counted(reading.window_n, key.unit)} against {against} {figures.normal} "
        f"over {reading.normal_n} ({_SIGNAL_TEXT[rule.signal]}; {reading.offline_n} offline + "
        f"{reading.llm_n} LLM{tag}{past})"
    )
    bound = f"at least {figures.lower} at {drop.confidence * 100:g}% confidence"
    if reading.test == "sustained":  # the CUSUM's alarm: the answers since the drop began
        bound = (
            f"a sustained drop: evidence of a drop of {drop.sustained_drop or drop.min_drop:.2f} past the "
            f"threshold set for one false alarm per {drop.sustained_every or 0:,.0f} {units} at the "
            "normal's lower limit"
        )
    change, other_severity = _change(state, level, other)
    fell = f"fell {figures.drop} below {against}: {levels}; {bound}"
    held = reading.test == "window" and reading.lower < minimum
    if held:
        # Held by the hysteresis (it resolves under half the drop): its bound no longer reaches the drop.
        reached = (
            f"; held until the drop is under {minimum / 2:g} in the whole window and its newest answers "
            f"(now up to {reading.peak_drop:.2f}; {level} drop {minimum:.2f})"
        )
    else:
        reached = f" >= {level} drop {minimum:.2f}"
    stayed = f"{subject} stayed below {against} for {span(drop.relearn_after_seconds)}"
    if accepted and reading.whole_n >= drop.min_normal_samples:
        summary = (
            f"{stayed}: its level is accepted as the new normal, drop alerts compare with it from now on "
            f"({levels})"
        )
    elif accepted:  # its window (the new normal) holds too few answers: its next ones complete it
        learned = f"learned from its next {units}"
        accepted_level = "the level it comes back at"
        if reading.whole_n:
            accepted_level = "its level"
            learned = f"learned from the {counted(reading.whole_n, key.unit)} in its window and its next ones"
        summary = (
            f"{stayed}: {accepted_level} is accepted as the new normal, {learned} (no drop alert until it "
            f"holds {drop.min_normal_samples:,}; the old one was {figures.normal} over {reading.normal_n})"
        )
    elif state == "firing" and not reading.ready:  # a reminder or re-send: the level holds, unread
        few = f"no {units} in its window"
        if reading.whole_n:
            few = (
                f"only {counted(reading.whole_n, key.unit)} in its window, fewer than the {drop.min_samples}"
            )
            few += " it reads"
        summary = (
            f"{subject} still {level}, below {against} ({figures.normal} over {reading.normal_n}; {level} "
            f"drop {minimum:.2f}) when last read: {few}, so nothing shows it back at its normal yet"
        )
    elif state == "firing" and change:  # a warning de-escalated to may fire on by its hysteresis alone
        tail = reached if held else f", {level} drop {minimum:.2f}"
        summary = f"{subject} {change} from {other} to {level}: {fell}{tail}"
    elif state == "firing" and reading.test == "sustained":
        summary = f"{subject} {fell}"
    elif state == "firing":
        summary = f"{subject} {fell}{reached}"
    elif change:
        summary = f"{subject}: {level} drop superseded by {other}, not recovered: {fell}"
    else:
        # What resolved it: the largest drop of the window's lengths at most half of min_drop, written so
        # that it reads so (rounded down; the levels' rounded difference read "drop 0.08 < 0.07").
        largest = math.floor(reading.peak_drop * 1000) / 1000
        summary = f"{subject} back to {against}: {levels}; largest drop {largest:.3f} <= {minimum / 2:g}"
    name = alert_name(key.metric, key.unit, "drop")
    return _note(
        key, name, state, _severity(level), summary, starts_at, now, repeat,
        **_rule_fields(key, rule, state, "accepted" if accepted else change, other_severity),
        value=reading.window,
        threshold=minimum,
        samples=reading.window_n,
        offline_samples=reading.offline_n,
        llm_samples=reading.llm_n,
        calibrated=reading.calibrated,
        normal=reading.normal,
        normal_samples=reading.normal_n,
        drop=reading.drop,
        drop_lower=reading.lower,
        drop_test=reading.test,
    )  # fmt: skip


def _rule_fields(
    key: AlertKey, rule: RuleConfig, state: State, change: Change | None, other: Severity | None
) -> dict[str, Any]:
    """What a threshold's and a drop's notification say beside the common fields: the unit, the rule's
    signal, and how it relates to a severity change."""
    return {"unit": key.unit, "signal": rule.signal, **_severity_change(state, change, other)}


def _note(
    key: AlertKey,
    alertname: str,
    state: State,
    severity: Severity,
    summary: str,
    starts_at: datetime,
    now: datetime,
    repeat: bool,
    **fields: Any,
) -> Notification:
    """What every notification says alike: which alert, about which route, since when, and (once resolved)
    until when; `fields` are its own."""
    return Notification(
        alertname=alertname,
        state=state,
        severity=severity,
        service=key.service,
        route=key.route,
        metric=key.metric,
        summary=summary,
        starts_at=starts_at,
        ends_at=now if state == "resolved" else None,
        repeat=repeat,
        first_step=first_step(key, alertname) if state == "firing" else None,
        **fields,
    )


def first_step(key: AlertKey, alertname: str) -> str:
    """What the person paged does first: the route's flagged answers (or failed evaluations), and for a
    route gone quiet, where its records stopped; a command to paste, its names matched literally."""
    where = f"--service {_literal(key.service)} --route {_literal(key.route)}"
    if key.unit != "answer":
        where = f"--evaluations-topic {CONVERSATIONS_TOPIC} {where}"
    if alertname == NO_DATA_ALERT:
        scorer = "tracescore consume" if key.unit == "answer" else "tracescore conversations"
        return (
            f"check that the route still gets traffic and that {scorer} runs; its last records: "
            f"tracescore tail {where} --last 100"
        )
    if alertname == JUDGE_ALERT:  # the judge's failures alone, each with its reason: the outage's cause
        shown = "the failed evaluations and their reason"
        return f"see {shown}: tracescore tail --failed {where} --last {TAIL_LAST}"
    return f"see the flagged {key.unit}s: tracescore tail --flagged {where} --last {TAIL_LAST}"


def _literal(name: str) -> str:
    """`name` as a `tracescore tail` glob matching it alone (its *, ? and [ in brackets), quoted for a
    POSIX shell."""
    return shlex.quote(re.sub(r"([*?\[])", r"[\1]", name))


def _severity(level: Level) -> Severity:
    return "critical" if level == "critical" else "warning"


def _severity_change(state: State, change: Change | None, other: Severity | None) -> dict[str, object]:
    if change is None:
        return {}
    side = "from_severity" if state == "firing" else "to_severity"
    return {"change": change, **({side: other} if other else {})}


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
        f"judge errors on {key.service} {key.route} ({key.metric}): {failed} of "
        f"{counted(n, 'evaluation')} failed ({counted(timeouts, 'timeout')}); scores are missing, not low"
        if state == "firing"
        else f"judge healthy again on {key.service} {key.route} ({key.metric}): {failed} of {n} failed"
    )
    return _note(
        key, JUDGE_ALERT, state, "warning", summary, starts_at, now, repeat,
        value=rate,
        threshold=max_error_rate,
        samples=n,
    )  # fmt: skip


def unwatched_notes(
    key: AlertKey,
    state: AlertState,
    why: str,
    now: datetime,
    *,
    only: Literal["drop", "no_data"] | None = None,
) -> list[Notification]:
    """The end of each alert `state` says fires (only its drop or its no-data alert with `only`) that the
    config no longer watches (`why`: what changed): a resolve that is no recovery, so the receivers that
    heard it fire close it, knowing nothing was measured."""
    firing: list[tuple[str, Severity, datetime | None]] = []
    if state.drop is not None and state.drop_firing and only in (None, "drop"):
        drop = alert_name(key.metric, key.unit, "drop")
        firing.append((drop, _severity(state.drop.level), state.drop.level_since))
    if only is None:
        if state.level != "ok":
            threshold = alert_name(key.metric, key.unit, "threshold")
            firing.append((threshold, _severity(state.level), state.level_since))
        if state.judge_firing:
            firing.append((JUDGE_ALERT, "warning", state.judge_since))
    if state.no_data_firing and only in (None, "no_data"):
        firing.append((NO_DATA_ALERT, "info", state.no_data_since))
    return [
        _note(
            key, name, "resolved", severity,
            f"{name} of {key.service} {key.route} ({key.metric}) is no longer watched: {why}; it ends here, "
            "which is not a recovery",
            since or now, now, False, unit=key.unit, change="unwatched",
        )
        for name, severity, since in firing
    ]  # fmt: skip


def no_data_note(
    key: AlertKey,
    last_seen: datetime | None,
    state: State,
    starts_at: datetime,
    now: datetime,
    repeat: bool = False,
    why: str | None = None,
) -> Notification:
    """`why`: what makes the silence unusual for the route (the unusual mode's firing), else None."""
    seen = last_seen.astimezone(UTC).isoformat(timespec="seconds") if last_seen else "never"
    summary = (
        f"no evaluations of {key.service} {key.route} ({key.metric}) since {seen}"
        if state == "firing"
        else f"evaluations of {key.service} {key.route} ({key.metric}) arrive again"
    )
    if why is not None:
        summary += f" ({why})"
    if key.unit != "answer":
        summary = summary.replace("evaluations of", f"{key.unit} records of", 1)
    return _note(key, NO_DATA_ALERT, state, "info", summary, starts_at, now, repeat, unit=key.unit)
