"""Named crash points, for the tests that kill a service at an exact step (never set in production).

`TRACESCORE_TEST_CRASH_AT=<point>[:<n>]` makes the process kill itself with SIGKILL the n-th time (1st by
default) it reaches `<point>`: no `finally`, no flush, no leaving the group, exactly as `kill -9` at that
step. A test then restarts the service and counts what was lost or repeated. The points are the steps of
one checkpoint, in order, after the two of a start (docs: Contributing, Architecture):

    service.starting  the service about to create its topics (before any client reads)
    keyed.restoring   stage 2: partitions assigned, about to read their state back
    keyed.restored    stage 2: their state and the outputs after its marks read, nothing applied
    rekey.polled      stage 1: a batch polled, nothing re-keyed
    rekey.sent        stage 1: re-keyed records handed to the producer, not flushed, input not committed
    rekey.acknowledged  stage 1: every re-keyed record acknowledged, the input not committed
    keyed.applied     stage 2: a batch applied to the state in memory, nothing written
    shared.sent       an output to a topic other producers share (spans) sent, the ones before it flushed
    output.sent       a verified output (a record) sent, the ones before it flushed, the rest not
    outputs.written   every output acknowledged, no state saved
    state.sent        a state sent (the ones before it flushed first), the rest not
    state.saved       every state acknowledged, the input not committed
    committed         the input committed
    delivered         what waited for the saved state (alert notifications) delivered, not yet marked so

and, before them every few seconds, `state_topic.look`: about to look whether the state topic was deleted.

`TRACESCORE_TEST_PAUSE_AT=<point>[:<n>]` instead stops the process (SIGSTOP) each time it reaches `<point>`
from the n-th time on: the test changes the world around it (pauses the broker, sends SIGTERM), then lets it
go on with SIGCONT.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

__all__ = ["CRASH_ENV", "PAUSE_ENV", "crash_point"]

CRASH_ENV = "TRACESCORE_TEST_CRASH_AT"
PAUSE_ENV = "TRACESCORE_TEST_PAUSE_AT"


def _armed(env: str) -> tuple[str, int] | None:
    value = os.environ.get(env)
    if not value:
        return None
    point, _, nth = value.partition(":")
    return point, int(nth or 1)


_CRASH = _armed(CRASH_ENV)
_PAUSE = _armed(PAUSE_ENV)
_POINTS = {armed[0] for armed in (_CRASH, _PAUSE) if armed is not None}
_reached: Counter[str] = Counter()


def crash_point(name: str, before: Callable[[], object] | None = None) -> None:
    """Kill this process here if the test armed `name` and this is its n-th time; `before` runs first (to
    make what precedes the point durable, so the crash lands exactly between two steps). Or stop it here (a
    pause)."""
    if name not in _POINTS:
        return
    _reached[name] += 1
    if _PAUSE is not None and _PAUSE[0] == name and _reached[name] >= _PAUSE[1]:
        os.kill(os.getpid(), signal.SIGSTOP)  # returns once the test sends SIGCONT
    if _CRASH is not None and _CRASH[0] == name and _reached[name] == _CRASH[1]:
        if before is not None:
            before()
        os.kill(os.getpid(), signal.SIGKILL)
