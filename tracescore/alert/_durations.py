"""How long, in words, as the alert's lines say it: the rules' windows and spans, a route's quiet time."""

from __future__ import annotations

from tracescore._plural import counted


def span(seconds: float | None) -> str:
    """`7 days`, `8.5 days`, `3 hours` (to a tenth), `15 minutes`."""
    if seconds is None:
        return "long"
    days = seconds / 86_400
    if days >= 1:
        return counted(round(days, 1), "day")
    return (
        counted(round(seconds / 3600, 1), "hour")
        if seconds >= 3600
        else counted(round(seconds / 60), "minute")
    )
