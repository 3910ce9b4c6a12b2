"""Load-dependent limits: a token bucket, an hourly/daily token budget and an arrival-rate meter.

Each reads time from an injected clock (seconds since the epoch), so tests drive them without sleeping.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from pathlib import Path

from tracescore.sample._state_file import write_json_atomically

__all__ = ["ArrivalMeter", "TokenBucket", "TokenBudget"]

Clock = Callable[[], float]

_log = logging.getLogger(__name__)
BUDGET_STATE_VERSION = 1
# A budget's spend is saved at most this often while it spends (and on stop): a crash forgets at most this
# long's spend, and a judge answering many calls a second does not write a file for each.
SAVE_EVERY_S = 10.0


class TokenBucket:
    """`rate` tokens a second up to `capacity`; starts full."""

    def __init__(self, rate: float, capacity: float, clock: Clock) -> None:
        self._rate = rate
        self._capacity = capacity
        self._clock = clock
        self._tokens = capacity
        self._last = clock()

    def take(self) -> bool:
        now = self._clock()
        # max(0, ...): a wall clock stepped backwards must not drain the bucket.
        self._tokens = min(self._capacity, self._tokens + max(0.0, now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class TokenBudget:
    """Tokens spent (plus reserved) per UTC clock hour and day; either limit may be None (unlimited)."""

    def __init__(
        self, per_hour: int | None, per_day: int | None, clock: Clock, state_path: Path | None = None
    ) -> None:
        """`state_path`: where the windows' spend is saved and read back at start, so a restart (with these
        limits or new ones) goes on from what the hour and day spent, instead of from 0 (a process restarted
        N times a day could spend N+1 days' budget)."""
        self._limits = {3600: per_hour, 86_400: per_day}
        self._clock = clock
        self._spent: dict[int, tuple[int, int]] = {}  # window length -> (window index, tokens)
        self.reserved = 0
        self._path = state_path
        self._saved_at = -math.inf
        if state_path is not None:
            self._load(state_path)

    def _used(self, length: int) -> int:
        index = int(self._clock() // length)
        window, spent = self._spent.get(length, (index, 0))
        return spent if window == index else 0

    def available(self, tokens: int, hold_per_s: float = 0.0) -> bool:
        """Whether `tokens` more fit in every window (tokens in flight included), leaving `hold_per_s` tokens
        for every second left in the window."""
        now = self._clock()
        return all(
            limit is None
            or self._used(length) + self.reserved + tokens + hold_per_s * (length - now % length) <= limit
            for length, limit in self._limits.items()
        )

    def spend(self, tokens: int) -> None:
        for length in self._limits:
            index = int(self._clock() // length)
            self._spent[length] = (index, self._used(length) + tokens)
        if self._path is not None and self._clock() - self._saved_at >= SAVE_EVERY_S:
            self.save()

    def save(self) -> None:
        """Write the windows' spend to the state path (if set); a failure is logged, never raised."""
        if self._path is None:
            return
        self._saved_at = self._clock()
        windows = {str(length): [index, tokens] for length, (index, tokens) in self._spent.items()}
        try:
            write_json_atomically(self._path, {"version": BUDGET_STATE_VERSION, "windows": windows})
        except OSError as exc:
            _log.warning("cannot save the LLM budget's spend to %s: %s", self._path, exc)

    def _load(self, path: Path) -> None:
        if not path.exists():
            return
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(state, dict) or state.get("version") != BUDGET_STATE_VERSION:
                found = state.get("version") if isinstance(state, dict) else None
                raise ValueError(f"state version {found!r}, this release reads {BUDGET_STATE_VERSION}")
            spent = {
                int(length): (int(index), int(tokens))
                for length, (index, tokens) in dict(state["windows"]).items()
                if int(length) in self._limits
            }
            if any(tokens < 0 for _, tokens in spent.values()):
                raise ValueError("a negative spend")
        except (OSError, ValueError, TypeError, KeyError) as exc:
            _log.warning(
                "ignoring the LLM budget's saved spend in %s (%s): this hour and day start at 0", path, exc
            )
            return
        self._spent = spent  # a window of an hour or day gone by reads as 0 (`_used` compares its index)
        used = self.used()
        _log.info(
            "the LLM budget goes on from %s: %d tokens spent this UTC hour, %d today",
            path, used["hour"], used["day"],
        )  # fmt: skip

    def used(self) -> dict[str, int]:
        return {"hour": self._used(3600), "day": self._used(86_400)}

    def pace(self, tokens: int) -> float | None:
        """Evaluations of `tokens` a second that spend what is left of every window by its end (the
        tightest window decides); None when no limit is set."""
        now = self._clock()
        rates = [
            max(0, limit - self._used(length) - self.reserved) / tokens / max(1.0, length - now % length)
            for length, limit in self._limits.items()
            if limit is not None
        ]
        return min(rates) if rates else None


class ArrivalMeter:
    """Events per second, exponentially averaged over about `horizon_s` seconds.

    With `warm_up`, the first horizon is averaged over the time since the first event instead, so a long
    horizon does not read as a near-zero rate for its first minutes."""

    def __init__(self, clock: Clock, horizon_s: float = 10.0, *, warm_up: bool = False) -> None:
        self._clock = clock
        self._horizon = horizon_s
        self._level = 0.0
        self._last = clock()
        self._first: float | None = None if warm_up else float("-inf")

    def tick(self) -> float:
        """Counts one event; returns the current rate."""
        now = self._clock()
        if self._first is None:
            self._first = self._last = now
        self._level = self._level * math.exp(-max(0.0, now - self._last) / self._horizon) + 1.0
        self._last = now
        # The weight the average has had time to gather: 1 at steady state, elapsed/horizon at first.
        filled = 1.0 - math.exp(-max(now - self._first, 1.0) / self._horizon)
        return self._level / self._horizon / filled
