"""Named crash points, for the tests that kill a service at an exact step (never set in production).

`TRACESCORE_TEST_CRASH_AT=<point>[:<n>]` makes the process kill itself with SIGKILL the n-th time (1st by
default) it reaches `<point>`: no `finally`, no flush, no leaving the group, exactly as `kill -9` at that
step. A test then restarts the service and counts what was lost or repeated. The points are the steps of
one checkpoint, in order (docs: Contributing, Architecture):

    rekey.sent        stage 1: re-keyed records handed to the producer, not flushed, input not committed
    keyed.applied     stage 2: a batch applied to the state in memory, nothing written
    shared.sent       an output to a topic other producers share (spans) sent, the ones before it flushed
    output.sent       a verified output (a record) sent, the ones before it flushed, the rest not
    outputs.written   every output acknowledged, no state saved
    state.sent        a state sent (the ones before it flushed first), the rest not
    state.saved       every state acknowledged, the input not committed
    committed         the input committed
    delivered         what waited for the saved state (alert notifications) delivered, not yet marked so
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

__all__ = ["CRASH_ENV", "crash_point"]

CRASH_ENV = "TRACESCORE_TEST_CRASH_AT"


def _armed() -> tuple[str, int] | None:
    value = os.environ.get(CRASH_ENV)
    if not value:
        return None
    point, _, nth = value.partition(":")
    return point, int(nth or 1)


_ARMED = _armed()
_reached: Counter[str] = Counter()


def crash_point(name: str, before: Callable[[], object] | None = None) -> None:
    """Kill this process here if the test armed `name` and this is its n-th time; `before` runs first (to
    make what precedes the point durable, so the crash lands exactly between two steps)."""
    if _ARMED is None or _ARMED[0] != name:
        return
    _reached[name] += 1
    if _reached[name] == _ARMED[1]:
        if before is not None:
            before()
        os.kill(os.getpid(), signal.SIGKILL)
