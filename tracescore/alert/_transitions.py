"""How one alert (a threshold's or a drop's) moves between levels, the same for both: fire, resolve, remind
while firing, hold a re-fire in cooldown, and a change of severity said as such."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from tracescore.alert._config import RuleConfig
from tracescore.alert._notes import State
from tracescore.alert._notification import Notification
from tracescore.alert._state import Level, LevelState

__all__ = ["NoteOf", "due", "transition", "when_due"]

# Builds one alert's notification: (state, level, repeat, the level it replaces or that replaces it).
NoteOf = Callable[[State, Level, bool, Level | None], Notification]


def due(last: datetime | None, interval: float | None, now: datetime) -> bool:
    return interval is not None and last is not None and now - last >= timedelta(seconds=interval)


def when_due(last: datetime | None, interval: float | None) -> datetime | None:
    """From when `due(last, interval, now)` holds (None: never)."""
    return None if interval is None or last is None else last + timedelta(seconds=interval)


def transition(
    rule: RuleConfig, levels: LevelState, level: Level, now: datetime, note: NoteOf
) -> list[Notification] | None:
    """The notifications of the alert's move to `level`, updating `levels`; None when cooldown held a
    re-fire. A change of severity is one firing notification saying so (escalated, de-escalated) and the
    resolve of the severity it replaces, worded alike (superseded): Alertmanager needs it to end that one."""
    cooling = levels.resolved_at is not None and now - levels.resolved_at < timedelta(
        seconds=rule.cooldown_seconds
    )
    if level != "ok" and levels.level == "ok" and cooling:
        return None
    previous = levels.level
    if level == previous:
        if level != "ok" and due(levels.notified_at, rule.renotify_seconds, now):
            levels.notified_at = now
            return [note("firing", level, True, None)]
        return []
    if level == "ok":
        out = [note("resolved", previous, False, None)]
        levels.level, levels.level_since, levels.resolved_at, levels.notified_at = level, now, now, None
        return out
    superseded = [] if previous == "ok" else [note("resolved", previous, False, level)]
    levels.level, levels.level_since, levels.notified_at = level, now, now
    return [note("firing", level, False, None if previous == "ok" else previous), *superseded]
