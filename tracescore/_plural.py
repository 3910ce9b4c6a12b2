"""A count and its noun, said one way in everything a person reads (command output, log lines, skip reasons,
gate and alert summaries): `1 record`, `3 records`, never `1 records`. Shared by every stage, the SDK
included, so it imports nothing of tracescore."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: float, noun: str, plural: str | None = None) -> str:
    """`counted(1, "record")` -> `1 record`, `counted(3, "record")` -> `3 records`; `plural` for a noun that
    does not take an `s` (`counted(2, "reply", "replies")`). The noun may be several words: the last takes
    the plural (`counted(2, "tool call")` -> `2 tool calls`)."""
    # A whole count in full (`:g` alone writes 1234567 as 1.23457e+06); a float count is a whole one
    # (`GateFailure.found`), else as given.
    number = f"{int(count)}" if float(count).is_integer() else f"{count:g}"
    return f"{number} {noun if count == 1 else plural or noun + 's'}"
