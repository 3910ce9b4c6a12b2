"""Notifications to the sinks at a stop (`tracescore.alert._delivery`): waited for while the service runs,
given up on at the stop's deadline, the delivery under way counted as not delivered (the next start sends it
again), and a sink's exception still reaches the service."""

from __future__ import annotations

import threading
import time

import pytest
from test_alert_sinks import note

from tracescore.alert import Notification
from tracescore.alert._delivery import deliver


class Receiver:
    """A sink whose second delivery hangs until released; the first fails."""

    name = where = "test"

    def __init__(self) -> None:
        self.sent, self.failed = 0, 0
        self.release = threading.Event()
        self.calls: list[Notification] = []

    def send(self, notification: Notification) -> bool:
        self.calls.append(notification)
        if len(self.calls) == 2:
            self.release.wait()
        return len(self.calls) != 1

    def close(self) -> None:
        pass


def test_deliveries_are_waited_for_until_a_stop_and_given_up_on_at_its_deadline() -> None:
    notes = [note(), note("resolved"), note()]
    sink, stop_deadline = Receiver(), None

    def deadline() -> float | None:
        nonlocal stop_deadline
        if stop_deadline is None and len(sink.calls) == 2:  # the stop comes while the second hangs
            stop_deadline = time.monotonic() + 0.2
        return stop_deadline

    delivered = deliver([sink], notes, deadline)
    assert delivered.done == [(notes[0], 1)], "the first went out (its one sink failed it)"
    assert delivered.not_done == notes[1:], "the one under way and the next are left for the next start"
    sink.release.set()
    assert len(sink.calls) == 2, "nothing started after the deadline"
    assert deliver([sink], notes, deadline).not_done == notes, "past the deadline nothing is tried"
    # While the service runs (no stop), a slow delivery is waited for.
    slow = Receiver()
    threading.Timer(0.3, slow.release.set).start()
    assert [n for n, _ in deliver([slow], notes, lambda: None).done] == notes


def test_a_sinks_exception_reaches_the_service() -> None:
    class Broken(Receiver):
        def send(self, notification: Notification) -> bool:
            raise RuntimeError("a sink that raises")

    with pytest.raises(RuntimeError, match="a sink that raises"):
        deliver([Broken()], [note()], lambda: None)
