"""Fixtures held while their tests run, not to the session's end: a server that takes seconds of CPU to
start and then idles at about a CPU-second a minute (Phoenix, the Prometheus stack) is started by the first
test that asks for it and stopped after the last test of the run that asks, which no pytest scope says (a
session fixture lives to the worker's end, most of a run after its last test).

Their tests come one after another: tests/conftest.py puts all the tests of each such fixture on one worker,
handed out together (`ONE_WORKER_FIXTURES`), and orders them together without xdist, so each starts once.
Where they do not (a hand-picked order), a fixture asked for again after its run ended starts again: slower,
never a different result.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any, TypeVar

import pytest

__all__ = ["held", "release_unused"]

T = TypeVar("T")

# name -> (its value, or the exception its start raised; what stops it), in the order they were started
_held: dict[str, tuple[Any, ExitStack]] = {}


def held(request: pytest.FixtureRequest, start: Callable[[ExitStack], T]) -> T:
    """The value of the requesting fixture (its name keys it), started by `start` at the first ask, which
    enters what must be stopped into the stack it is given. A start that failed fails every test of the run
    that asks, as a session fixture's does, without trying again."""
    name = request.fixturename
    if name not in request.node.fixturenames:
        # Asked for at run time (`request.getfixturevalue`): tests/conftest.py's grouping, which reads the
        # test's fixtures at collection, did not put the test on the worker holding it, so it would start
        # another there and hold it to the worker's end (two such Phoenix starts cost a run ~35 CPU-s).
        pytest.fail(
            f"{name} asked for with request.getfixturevalue: name it among the test's arguments, so the test "
            "runs on the worker that holds it (tests/conftest.py)",
            pytrace=False,
        )
    if name not in _held:
        with ExitStack() as starting:
            try:
                value = start(starting)
            except Exception as error:  # what it had started is stopped as the `with` ends
                _held[name] = (error, ExitStack())
            else:
                _held[name] = (value, starting.pop_all())
        # At the session's end (the last test, an interrupted run): before the session fixtures it uses (the
        # session's broker), which were set up before it, so their finalizers run after this one.
        request.session.addfinalizer(lambda: _release(name))
    found = _held[name][0]
    if isinstance(found, Exception):
        raise found
    return found


def release_unused(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After `item`'s teardown: stop each held fixture `item` used that the next test does not. The last test
    (no next one) leaves them to the session's end, which stops them before the session fixtures."""
    if nextitem is None:
        return
    for name in reversed(list(_held)):  # the later started first: it may use an earlier one
        if name in item.fixturenames and name not in nextitem.fixturenames:
            _release(name)


def _release(name: str) -> None:
    entry = _held.pop(name, None)
    if entry is not None:
        entry[1].close()
